"""A short, stable code for why a decision was made, stored beside the readable text.

The control cycle words its triggers for people ("rate of 2 stream(s) moved
past the threshold: clicks=…"); the text carries figures, so it cannot be
grouped in SQL. ``trigger_code`` maps each wording to one code, so
``SELECT trigger_code, count(*) FROM decisions GROUP BY 1`` answers "why does
armd re-decide?". The same mapping fills the column for decisions stored
before it existed (revision 0007).
"""

from __future__ import annotations

TRIGGER_CODES: tuple[tuple[str, str], ...] = (
    ("queries added or removed", "queries_changed"),
    ("bounds changed", "bounds_changed"),
    ("rate of ", "rate_drift"),
    ("measured selectivity of ", "selectivity_drift"),
    ("join order in force changed", "join_order_in_force"),
    ("join order of ", "join_order_proposed"),
    ("the estimate of the settings in force exceeds the bounds", "estimate_over_bounds"),
    ("periodic", "periodic"),
)
"""(how the text begins, its code), tried in order; a text that matches none is ``other``."""

OTHER = "other"


def trigger_code(text: str) -> str:
    """The code of a decision's trigger text (``rate_drift``, ``periodic``, …; ``other`` when unknown)."""
    for prefix, code in TRIGGER_CODES:
        if text.startswith(prefix):
            return code
    return OTHER
