# Two entry points, both self-installing: `make run` and `make test`.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: run test lint bench clean

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[test]'
	touch $(STAMP)

run: $(STAMP)
	$(BIN)/armd estimate config/plans/example.json

test: $(STAMP)
	$(BIN)/lint-imports
	$(BIN)/python -m pytest

bench: $(STAMP)
	$(BIN)/python bench/estimate.py --json

clean:
	rm -rf $(VENV) .pytest_cache .hypothesis
