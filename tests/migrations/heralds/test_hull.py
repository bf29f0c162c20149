"""``hull``: the strictest patterns both of two heralds' tuples match (used to announce a join's output)."""

from __future__ import annotations

import math

from hypothesis import given
from hypothesis import strategies as st

from armd.migrations.heralds import Range
from armd.migrations.heralds.herald import hull

ends = st.integers(-3, 3)


@st.composite
def ranges(draw):
    low, high = sorted((draw(ends), draw(ends)))
    low_open, high_open = (draw(st.booleans()), draw(st.booleans())) if low < high else (False, False)
    return Range(low if draw(st.booleans()) else -math.inf, high, low_open, high_open)


@given(ranges(), ranges(), ranges())
def test_every_value_either_admits_the_hull_admits_and_no_more_than_needed(a, b, other) -> None:
    merged = dict(hull((("x", a), ("y", other)), (("x", b),)))
    assert "y" not in merged  # one herald says nothing about y: neither may the hull
    grid = [v / 2 for v in range(-8, 9)]
    inside = [v for v in grid if a.contains(v) or b.contains(v)]
    assert all(merged["x"].contains(v) for v in inside)
    if inside:
        assert merged["x"].contains(min(inside)) and merged["x"].contains(max(inside))
        assert not any(merged["x"].contains(v) for v in grid if v < min(inside) - 0.5 or v > max(inside) + 0.5)
