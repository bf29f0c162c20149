"""The control layer: what turns observations into desired settings and desired settings into running plans.

``ports`` are the narrow interfaces (Protocols and frozen records) between the
control loop and the outside world — statistics sources, appliers, the
metadata store, alert sinks — so adapters depend on this package and never on
the daemon that wires them. ``errors`` says whether a failure is worth a
retry. ``cycle`` is one tick of the loop as pure functions (a snapshot in;
estimates, a decision and desired settings out), on the cost model of
``model``, with the measurement ``watchers`` and the decision ``records``.
Everything here is pure: no Spark, no SQL, no scheduler, no clock (times come
in as arguments).
"""
