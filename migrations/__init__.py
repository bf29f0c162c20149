"""Plan migration strategies as pure logic: GenMig's split time, output rules and state machine
(``genmig``), and the adaptive multi-way join with JISC, Moving State and Parallel Track (``join``)."""
