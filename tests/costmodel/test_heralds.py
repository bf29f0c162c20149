"""Heralds in the cost model (paper 002 §VII): less CPU for the same output, an overhead per herald."""

from __future__ import annotations

import pytest

from armd.costmodel.evaluate import estimate
from armd.costmodel.plan import PlanError, parse_plan


def plan(select_heralds=None, join_heralds=None):
    select = {"op": "select", "id": "s", "sel": 0.2, "inputs": [{"op": "window", "w": 200, "inputs": [{"op": "source", "stream": "R"}]}]}
    join = {"op": "join", "sel": 0.1, "kind": "nested", "inputs": [{"op": "window", "w": 200, "inputs": [{"op": "source", "stream": "L"}]}, select]}
    if select_heralds is not None:
        select["heralds"] = select_heralds
    if join_heralds is not None:
        join["heralds"] = join_heralds
    return parse_plan({"streams": {"L": {"d": 1, "size": 64}, "R": {"d": 2, "size": 64}}, "queries": {"q": join}})


def test_heralds_that_skip_nothing_and_cost_nothing_change_nothing() -> None:
    plain = estimate(plan())
    free = estimate(plan({"skip": 0, "overhead": 0}, {"skip": 0, "overhead": 0}))
    assert free == plain


def test_the_select_follows_equation_9_per_unit_of_time() -> None:
    node = estimate(plan({"skip": 0.9, "partition": 50, "overhead": 150})).nodes["s"]
    rate = 0.5  # R: one tuple every 2 time units; C_P = 1
    assert node.cpu == pytest.approx(rate * (1 - 0.9) + rate / 50 * 150)


def test_join_skipping_lowers_cpu_monotonically_and_never_the_output_or_memory() -> None:
    plain = estimate(plan())
    runs = [estimate(plan(join_heralds={"skip": s})) for s in (0.0, 0.3, 0.6, 0.9, 1.0)]
    cpus = [r.nodes["q"].cpu for r in runs]
    assert cpus == sorted(cpus, reverse=True) and cpus[0] > plain.nodes["q"].cpu > cpus[-1]
    assert all(r.nodes["q"].out == plain.nodes["q"].out and r.total.memory == plain.total.memory for r in runs)
    assert cpus[1] - cpus[2] == pytest.approx(cpus[2] - cpus[3])  # linear in the fraction skipped


@pytest.mark.parametrize("heralds, words", [
    ({"skip": 1.5}, "skip must be in [0, 1]"),
    ({"partition": 50}, "missing skip"),
    ({"skip": 0.5, "drop": 1}, "unknown key(s) ['drop']; allowed: skip, partition, overhead"),
    ({"skip": 0.5, "partition": 0.5}, "at least 1"),
    ({"skip": 0.5, "overhead": -1}, "overhead must be in [0,"),
    (0.5, "must be an object with skip"),
])
def test_bad_heralds_parameters_are_one_line(heralds, words) -> None:
    with pytest.raises(PlanError) as caught:
        plan(join_heralds=heralds)
    assert words in str(caught.value) and "\n" not in str(caught.value)


def test_only_selects_and_joins_take_heralds() -> None:
    doc = {"streams": {"A": {"d": 1, "size": 8}},
           "queries": {"q": {"op": "window", "w": 10, "heralds": {"skip": 0.5}, "inputs": [{"op": "source", "stream": "A"}]}}}
    with pytest.raises(PlanError, match="unknown parameter"):
        parse_plan(doc)


def test_measured_skip_fractions_from_running_operators_reach_the_estimate() -> None:
    """The select and the join measure what heralds skipped; the estimate prices that, not the declared 0."""
    import random

    from armd.costmodel.heralds import apply_herald_measures, measured_effect
    from armd.migrations.heralds import Herald, MultiModalSelect, Partitioner, Range, conjunction
    from armd.migrations.heralds.batchjoin import MultiModalBatchJoin

    rnd = random.Random(1)
    position = {"k": 0, "a": 1, "b": 2, "ts": 3}
    left, right, ts = [], [], 0.0
    for i in range(40):  # 40 partitions of 25 per side; every other left one is provably empty against all of R
        dead = i % 2 == 0
        left.append(Herald.of({"a": Range(200, 299) if dead else Range(0, 99)}, count=25))
        right.append(Herald.of({"b": Range(0, 99)}, count=25))
        for _ in range(25):
            left.append((rnd.randrange(3), rnd.randint(200, 299) if dead else rnd.randrange(100), 0, ts))
            right.append((rnd.randrange(3), 0, rnd.randrange(100), ts + 0.5))
            ts += 1.0
    select = MultiModalSelect(conjunction(("a", "<", 50)), position)  # [0, 99] evaluated, [200, 299] skipped
    for part in Partitioner(position).feed(left):
        select.process(part)
    assert select.skip_fraction == 0.5 and select.partitions == 40
    join = MultiModalBatchJoin(conjunction(("L.k", "=", "R.k"), ("L.a", "<=", "R.b")), position, position, window=100.0)
    lp, rp = Partitioner(position), Partitioner(position)
    for i in range(0, len(left), 104):
        join.process(lp.feed(left[i : i + 104]), rp.feed(right[i : i + 104]))
    assert 0.4 < join.skip_fraction < 0.6  # half the pairs met are provably empty

    declared = plan(select_heralds={"skip": 0.0}, join_heralds={"skip": 0.0})
    effects = {"s": measured_effect(declared.nodes["s"].heralds, select.skip_fraction, tuples=1000, heralds=select.partitions),
               "q": measured_effect(None, join.skip_fraction)}
    measured = apply_herald_measures(declared, effects)
    assert measured.nodes["s"].heralds.skip == 0.5 and measured.nodes["s"].heralds.partition == 25
    before, after = estimate(declared), estimate(measured)
    rate = 0.5  # equation 9 with what was measured: half the tuples skipped, one herald per 25 tuples
    assert after.nodes["s"].cpu == pytest.approx(rate * (1 - 0.5) + rate / 25 * 150)
    assert after.nodes["q"].cpu < before.nodes["q"].cpu
    assert after.nodes["q"].out == before.nodes["q"].out
    with pytest.raises(ValueError, match=r"in \[0, 1\]"):
        measured_effect(None, 1.5)


def test_the_policys_batch_estimate_falls_with_the_skip_fraction_as_the_scalar_one_does() -> None:
    """The policies price plans with ``BatchPlan``: its CPU must carry equation 9's terms like the scalar evaluator."""
    from armd.costmodel.batch import BatchPlan
    from armd.costmodel.heralds import HeraldEffect, apply_herald_measures

    declared = plan({"skip": 0.0, "partition": 50, "overhead": 5}, {"skip": 0.0, "partition": 50, "overhead": 5})
    cpus, memories = [], []
    for skip in (0.0, 0.25, 0.5, 0.75, 1.0):
        measured = apply_herald_measures(declared, {n: HeraldEffect(skip, 50, 5) for n in ("s", "q")})
        for profile in ("paper", "spark"):
            result = BatchPlan.compile(measured, profile).evaluate()
            scalar = estimate(measured, profile)
            assert float(result.total_cpu) == pytest.approx(scalar.total.cpu, rel=1e-9)
            assert float(result.total_memory) == pytest.approx(scalar.total.memory, rel=1e-9)
            if profile == "paper":
                cpus.append(float(result.total_cpu))
                memories.append(float(result.total_memory))
    assert all(a > b for a, b in zip(cpus, cpus[1:]))  # strictly less CPU the more is skipped
    assert len(set(memories)) == 1  # the optimisations are exact: same output, same state
    plain = BatchPlan.compile(plan()).evaluate()
    assert cpus[0] > float(plain.total_cpu) > cpus[-1]  # skipping nothing costs the overhead; everything saves
