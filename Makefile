# xc — two commands: `make run` and `make test`. Everything else is a convenience.
SHELL := /bin/bash
PYTHON ?= python3.11
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
export DAGSTER_HOME := $(CURDIR)
export XC_DAGSTER_STATE := $(CURDIR)/.dagster_home
XC_HOME ?= $(CURDIR)/.xc
export XC_HOME

.PHONY: install run test ui bench clean

$(STAMP): pyproject.toml
	test -d $(VENV) || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	# torch==2.13.0 is pinned inside pyproject.toml, so it is resolved in this same install (CPU wheel).
	$(BIN)/pip install --quiet -e '.[dev]'
	touch $(STAMP)

install: $(STAMP)

$(XC_DAGSTER_STATE):
	mkdir -p $(XC_DAGSTER_STATE)

run: $(STAMP) $(XC_DAGSTER_STATE)
	$(BIN)/xc run --home $(XC_HOME) --quiet | tee $(XC_HOME).last-run.json
	@echo
	@echo "Event store:   $(XC_HOME)/events  (duckdb views: $(XC_HOME)/xc.duckdb)"
	@echo "Quarantine:    $(XC_HOME)/quarantine/quarantine.parquet"
	@echo "Dagster UI:    make ui   → http://127.0.0.1:3000 (this run is in its Runs tab)"

test: $(STAMP)
	$(BIN)/python -m pytest -q

ui: $(STAMP) $(XC_DAGSTER_STATE)
	$(BIN)/dagster dev -w workspace.yaml -h 127.0.0.1 -p 3000

bench: $(STAMP)
	$(BIN)/python benchmarks/bench_ingest.py

clean:
	rm -rf $(XC_DAGSTER_STATE) $(XC_HOME)
