"""Changing running plans as pure logic: GenMig's split time, output rules and state machine
(``genmig``), the adaptive multi-way join with JISC, Moving State and Parallel Track (``join``), and
herald-driven semantic optimisation — PredSAT and the multi-modal operators that switch a substream's
plan as its heralds arrive (``heralds``, paper 002)."""
