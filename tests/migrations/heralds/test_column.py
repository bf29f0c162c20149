"""Heralds carried in a column of the rows: parsed, placed beside the batch, and the select's output unchanged."""

from __future__ import annotations

import json
import random

import pytest

from armd.adapters.herald_feed import HeraldedSelect
from armd.migrations.heralds import Action, Range, conjunction, regular_select
from armd.migrations.heralds.column import HeraldColumn, parse_cell
from armd.migrations.heralds.record import InvalidHerald

POSITION = {"a": 0, "ts": 1, "herald": 2}
SELECT = conjunction((200, "<=", "a"), ("a", "<", 400))


def test_a_cell_is_a_herald_from_its_row_on() -> None:
    h = parse_cell('{"a": [0, 99], "b": [null, 5], "count": 50}', ts=None)
    assert h.range("a") == Range(0, 99) and h.range("b") == Range.below(5, strict=False) and h.lifespan.value == 50
    t = parse_cell({"a": [10, 20], "seconds": 30}, ts=1000.0)
    assert t.lifespan.kind == "time" and t.ts == 1000.0


@pytest.mark.parametrize("cell, says", [
    ("{not json", "a herald cell is a JSON object"),
    ([1, 2], "an object of attribute ranges and one lifespan"),
    ({"a": [0, 1]}, "exactly one lifespan, count or seconds, got none"),
    ({"a": [0, 1], "count": 5, "seconds": 2}, "exactly one lifespan"),
    ({"a": [5, 1], "count": 5}, "low 5 is above high 1"),
    ({"count": 5}, "at least one attribute range"),
    ({"a": [0, 1], "count": 2.5}, "count is a whole number"),
    ({"a": [0, 1], "seconds": -1}, "seconds are a positive finite number"),
])
def test_a_cell_that_is_no_herald_is_one_line(cell, says) -> None:
    with pytest.raises(InvalidHerald, match=says) as caught:
        parse_cell(cell, ts=0.0)
    assert "\n" not in str(caught.value)


def test_heralds_in_a_column_configure_the_select_and_its_output_equals_the_plain_one() -> None:
    rnd = random.Random(5)
    rows, ts = [], 0.0
    for part in range(60):
        size = rnd.randint(5, 40)
        low, high = rnd.choice([(500, 999), (250, 300), (0, 999)])
        for i in range(size):
            cell = None
            if i == 0 and part % 7 != 3:  # some partitions announce nothing
                cell = json.dumps({"a": [low, high], "count": size}) if part % 2 else {"a": [low, high], "seconds": float(size)}
            rows.append((rnd.randint(low, high), ts, cell))
            ts += 1.0
    rows[100] = (rows[100][0], rows[100][1], '{"a": [3, 1], "count": 9}')  # no herald: refused, not applied
    select = HeraldedSelect(SELECT, POSITION, None, column="herald")
    out = []
    for i in range(0, len(rows), 64):
        out += select.process(rows[i : i + 64], now=float(i))
    assert out == regular_select(rows, SELECT, POSITION)
    tuples = select.select.tuples
    assert tuples[Action.SKIP] > 0 and tuples[Action.PASS] > 0
    column = select.column
    assert column.read > 40 and len(column.refused) == 1 and "low 3 is above high 1" in column.refused[0]


def test_a_batch_without_heralds_costs_one_count() -> None:
    column = HeraldColumn(2)
    assert column.split([(1, 0.0, None), (2, 1.0, None)]) == [] and column.read == 0
