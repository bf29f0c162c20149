# Two entry points, both self-installing: `make run` and `make test`.
PYTHON ?= python3
SHELL := bash
.SHELLFLAGS := -o pipefail -c
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: run test lint bench clean

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[daemon,test]'
	touch $(STAMP)

# The daemon on embedded defaults (SQLite file config/armd.db) and, started by it ([[apps]]), the demo
# application examples/demo_app.py on local Spark with armd.agent inside; live status until Ctrl-C stops both.
run: $(STAMP)
	$(BIN)/armd db upgrade --config config/armd.toml
	$(BIN)/armd run --config config/armd.toml --live

# The metadata store's tests also run on a real PostgreSQL: scripts/postgres-up
# starts a throwaway server on 127.0.0.1 (unless ARMD_TEST_POSTGRES_URL names
# one already). Without a server those tests skip, or fail under
# ARMD_REQUIRE_POSTGRES=1 (as in CI). Two pytest-xdist workers share the tests,
# each taking a test module whole (tests/conftest.py): most Spark tests wait on
# streams for much of their time, so one worker's waits are the other's CPU.
# The 30 slowest tests are listed at the end, so the suite's time budget
# (about 20 minutes here) can be watched. At exit the
# datasketches bindings (nanobind) print a few hundred "leaked function" lines
# that bury pytest's summary at the end of a CI log: they are filtered out.
test: $(STAMP)
	$(BIN)/lint-imports
	ARMD_TEST_POSTGRES_URL="$${ARMD_TEST_POSTGRES_URL:-$$(bash scripts/postgres-up)}" $(BIN)/python -m pytest -n 2 --durations=30 2>&1 \
		| grep --line-buffered -v -e '^nanobind: ' -e '^ - leaked ' -e '^ - \.\.\. skipped remainder'

bench: $(STAMP)
	$(BIN)/python bench/estimate.py --json

clean:
	rm -rf $(VENV) .pytest_cache .hypothesis
