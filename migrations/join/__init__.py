"""armd's own n-way windowed equi-join and the strategies that change its join order live.

``pipeline`` is the join (plans, states, window expiry), ``strategies`` the
order changes (JISC, Moving State, Parallel Track, Restart), ``oracle`` the
brute-force reference, ``host`` the single-process driver that benchmarks
use, ``per_key`` JISC run one join key at a time with a savable state (what
the Spark host runs for each key). All pure: no clock (the host takes one),
no IO, no policy (JISC with the join-order policy in the loop is
``armd.control.adaptive_join``).
"""

from .host import HostRun, run_host
from .oracle import oracle_count, oracle_results
from .per_key import KEY_STATE_VERSION, KeyEngine, KeyState
from .pipeline import EventLog, Order, Plan, flatten, left_deep, normalise_order, order_text
from .strategies import JISC, MovingState, ParallelTrack, Restart, Strategy

STRATEGIES: dict[str, type[Strategy]] = {
    cls.name: cls for cls in (JISC, MovingState, ParallelTrack, Restart)
}
"""Strategy name → class."""

__all__ = [
    "EventLog", "HostRun", "JISC", "KEY_STATE_VERSION", "KeyEngine", "KeyState", "MovingState", "Order",
    "ParallelTrack", "Plan", "Restart", "STRATEGIES", "Strategy", "flatten", "left_deep", "normalise_order", "oracle_count",
    "oracle_results", "order_text", "run_host",
]
