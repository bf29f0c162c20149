"""Plan migration strategies as pure logic (GenMig, JISC, Moving State, Parallel Track); not built yet."""
