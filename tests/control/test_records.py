"""What a decision record says of each query: the guardrail notes."""

from __future__ import annotations

import numpy as np

from armd.control.records import guardrail_note
from armd.policies.guardrails import Guarded


def guarded(**effects: tuple[str, ...]) -> Guarded:
    return Guarded(fw=np.ones(1), fg=np.zeros(1), outcome=None, apply=True,  # type: ignore[arg-type]
                   **{"held": (), "limited": (), "forced": (), **effects})


def test_a_growth_the_transient_fit_shortened_or_held_is_named_with_the_reason():
    assert guardrail_note("q", guarded(), set()) is None
    assert "no more of it fits the memory bound" in guardrail_note("q", guarded(fitted=("q",)), set())
    assert guardrail_note("q", guarded(limited=("q",), fitted=("q",)), set()) == "limited to the maximum step"
