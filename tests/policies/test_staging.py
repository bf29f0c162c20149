"""Staging migrations whose extra state would break the memory bound when run together."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from armd.policies.staging import stage


def test_everything_that_fits_runs_now():
    assert stage(50.0, {"a": 10.0, "b": 20.0}, 100.0).now == ("a", "b")


def test_the_rest_waits_smallest_extra_first():
    staging = stage(50.0, {"a": 30.0, "b": 20.0, "c": 40.0}, 100.0)
    assert (staging.now, staging.later, staging.peak_memory, staging.over_bound) == (("b", "a"), ("c",), 100.0, False)
    assert staging.as_json() == {"now": ["b", "a"], "later": ["c"], "peak_memory_bytes": 100.0, "over_bound": False,
                                 "held_bytes": 50.0, "extra_bytes": {"b": 20.0, "a": 30.0, "c": 40.0}}


def test_when_none_fits_the_cheapest_runs_alone_and_says_so():
    staging = stage(95.0, {"x": 10.0, "y": 20.0}, 100.0)
    assert (staging.now, staging.later, staging.peak_memory, staging.over_bound) == (("x",), ("y",), 105.0, True)


def test_the_over_bound_message_names_the_migrations_own_extra_state_apart_from_what_is_held():
    # The demo said a 26 KiB query's migration "holds 1 MB": that was the whole system's state plus its extra.
    message = stage(1_000_000.0, {"small": 26_000.0}, 850_000.0).over_bound_message(850_000.0)
    assert "small holds 26,000 B of extra state" in message and "1,000,000 B held now" in message


def test_a_migration_without_extra_state_always_runs():
    assert stage(150.0, {"restart": 0.0, "live": 5.0}, 100.0).now == ("restart",)


def test_bad_figures_are_named():
    with pytest.raises(ValueError, match="extra memory must be ≥ 0; got b=-1"):
        stage(0.0, {"a": 1.0, "b": -1.0}, 10.0)
    with pytest.raises(ValueError, match="memory_bound must be > 0"):
        stage(0.0, {}, 0.0)


extras = st.dictionaries(st.sampled_from("abcdefgh"), st.floats(0, 1e6, allow_nan=False))


@given(held=st.floats(0, 1e6), extra=extras, bound=st.floats(1, 2e6))
def test_staging_partitions_the_migrations_and_keeps_the_bound_unless_it_says_not(held, extra, bound):
    staging = stage(held, extra, bound)
    assert sorted(staging.now + staging.later) == sorted(extra) and not set(staging.now) & set(staging.later)
    assert staging.peak_memory == pytest.approx(held + sum(extra[q] for q in staging.now))
    if not staging.over_bound:
        assert staging.peak_memory <= bound or all(extra[q] == 0 for q in staging.now)
    else:
        assert len(staging.now) == 1 and held + extra[staging.now[0]] > bound
    if extra:
        assert staging.now  # something always moves


def test_over_the_bound_every_cut_starts_at_once_and_a_growth_waits():
    """Held state already over the bound: waiting frees nothing, so the cuts run together (the state drops after
    the longest of them, not their sum); a growth would only add to the breach, so it waits."""
    out = stage(250.0, {"a": 30.0, "b": 10.0, "grow": 5.0}, 200.0, cuts=["a", "b"])
    assert out.now == ("b", "a") and out.later == ("grow",) and out.over_bound
    assert "a, b" in out.over_bound_message(200.0) or "b, a" in out.over_bound_message(200.0)
    only_growth = stage(250.0, {"grow": 5.0}, 200.0, cuts=[])
    assert only_growth.now == () and only_growth.later == ("grow",) and not only_growth.over_bound
    assert stage(190.0, {"grow": 50.0}, 200.0, cuts=[]).now == ("grow",)  # under the bound: runs alone, as before
    assert stage(250.0, {"grow": 5.0}, 200.0).now == ("grow",)  # the caller does not say which are cuts: as before
