"""bench/heralds.py's measurement: the plain and the herald plan take turns going first, and both give their outputs."""

from __future__ import annotations

import sys

from support import REPO

sys.path.insert(0, str(REPO / "bench"))
import heralds  # noqa: E402


def test_the_plain_and_the_herald_run_take_turns_going_first():
    calls: list[str] = []

    def run(name: str) -> str:
        calls.append(name)
        return f"{name}{len(calls)}"

    plain, plain_out, herald, herald_out = heralds.alternating(4, (run, "p"), (run, "h"))
    assert calls == ["p", "h", "h", "p", "p", "h", "h", "p"]
    assert (plain_out, herald_out) == ("p8", "h7") and plain >= 0 and herald >= 0


def test_a_small_fig_7b_case_skips_pairs_and_equals_its_oracle():
    case = heralds.join_case(600, 0.5, 2, 3, 50.0, with_select=True)
    assert case["oracle_ok"] and case["results"] > 0
    assert case["run_meetings"]["skip"] > 0 and case["run_meetings"]["evaluate"] > 0
