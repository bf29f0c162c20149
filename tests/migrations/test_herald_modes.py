"""Join data skipping for the n-way equi-join (``migrations.join.herald_modes``) against the brute-force oracle."""

from __future__ import annotations

from support.jisc_logs import heralded_log

from armd.migrations.heralds import Herald, Range
from armd.migrations.join import oracle_results
from armd.migrations.join.herald_modes import skip_spans


def herald(low: int, high: int, start: float, seconds: float) -> Herald:
    return Herald.of({"k": Range(low, high)}, time=seconds, ts=start)


def test_a_span_is_skipped_only_when_another_stream_rules_its_keys_out_over_the_whole_window() -> None:
    a = [herald(0, 9, 0, 10), herald(10, 19, 10, 10), herald(0, 9, 20, 10)]
    b = [herald(10, 19, -10, 40)]  # covers [-10, 30): A's first span needs [-2, 12), its last [18, 32): a gap
    assert skip_spans({"A": a, "B": b}, {"A": "k", "B": "k"}, 2) == {"A": [(0, 10)], "B": []}
    # heralds that contradict each other are trusted with nothing
    b2 = b + [herald(0, 5, -10, 40)]
    assert skip_spans({"A": a, "B": b2}, {"A": "k", "B": "k"}, 2)["A"] == []


def test_no_skipped_tuple_is_part_of_any_result_over_random_heralded_logs() -> None:
    names = ["A", "B", "C"]
    window = 10
    skipped_total = 0
    for seed in range(40):
        log, raw = heralded_log(seed, names, keys=6, span=200, piece=20, n=150)
        heralds = {s: [herald(lo, hi, start, sec) for lo, hi, start, sec in raw[s]] for s in names}
        skip = skip_spans(heralds, dict.fromkeys(names, "k"), window)
        dropped = {e for e in range(len(log))
                   if any(a <= log.ts[e] < b for a, b in skip[names[log.stream[e]]])}
        skipped_total += len(dropped)
        in_results = {e for result in oracle_results(log, window) for e in result}
        assert not dropped & in_results, seed
    assert skipped_total > 300  # the heralds prove a good part of the tuples joinless
