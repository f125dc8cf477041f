# xc — two commands: `make run` and `make test`. Everything else is a convenience.
SHELL := /bin/bash
.SHELLFLAGS := -eo pipefail -c
PYTHON ?= python3.11
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
export DAGSTER_HOME := $(CURDIR)
export XC_DAGSTER_STATE := $(CURDIR)/.dagster_home
XC_HOME ?= $(CURDIR)/.xc
export XC_HOME
# production storage (docs/operating.md): XC_POSTGRES_URL=postgresql://USER[:PASSWORD]@HOST:PORT puts Dagster's
# run/event/schedule storage (database xc_dagster) and MLflow's tracking store (xc_mlflow) on that server; unset,
# both are SQLite files (.dagster_home/, $(XC_HOME)/mlflow/)
ifneq ($(strip $(XC_POSTGRES_URL)),)
export DAGSTER_HOME := $(CURDIR)/xc_assets/deploy/postgres
PG_SERVER := $(patsubst %/,%,$(subst postgresql://,postgresql+psycopg2://,$(subst postgres://,postgresql://,$(XC_POSTGRES_URL))))
export XC_DAGSTER_POSTGRES_URL := $(PG_SERVER)/xc_dagster
endif

# One MLflow store per home, where the bare CLI finds it (xc_core/tracking/store.py): make run and make ui
# set no MLFLOW_TRACKING_URI, so xc resolves <home>/mlflow itself; make mlflow-ui serves that same folder.
MLFLOW_STORE = $(abspath $(XC_HOME))/mlflow
MLFLOW_URI = $(if $(strip $(XC_POSTGRES_URL)),$(PG_SERVER)/xc_mlflow,sqlite:///$(MLFLOW_STORE)/mlflow.db)

.PHONY: install peers run results lint test test-scale ui ui-snapshot mlflow-ui serve bench clean

$(STAMP): pyproject.toml
	test -d $(VENV) || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	# torch==2.13.0 is pinned inside pyproject.toml, so it is resolved in this same install (CPU wheel).
	$(BIN)/pip install --quiet -e '.[dev]'
	# the hybrid channel's numba kernels, compiled into their cache once here, not by the first process that fits it
	$(BIN)/python -m xc_core.classifier.xrlinear
	touch $(STAMP)

install: $(STAMP)

# the optional engines (pyspark: the graph tables on Spark) and the PostgreSQL storage; `make test` exercises them,
# `make run` never needs them
SCALE_STAMP := $(VENV)/.installed-scale
$(SCALE_STAMP): $(STAMP) pyproject.toml
	$(BIN)/pip install --quiet -e '.[scale,postgres]'
	touch $(SCALE_STAMP)

# The linear peer (PECOS XR-Linear) in its own environment: libpecos pins numpy<2 / scipy<1.14.
# xc talks to it through files only (benchmarks/peers/pecos_peer.py); xc's environment never imports it.
PEERS := .venv-peers
$(PEERS)/.installed: benchmarks/peers/requirements.txt
	test -d $(PEERS) || $(PYTHON) -m venv $(PEERS)
	$(PEERS)/bin/pip install --quiet --upgrade pip
	$(PEERS)/bin/pip install --quiet -r benchmarks/peers/requirements.txt
	touch $@

peers: $(PEERS)/.installed

$(XC_DAGSTER_STATE):
	mkdir -p $(XC_DAGSTER_STATE)

DATASET ?= synthetic
COMMA := ,
PROFILE ?= demo
# the registry's default run (every method declaring roles.run, each after what it requires)
METHODS ?= $(shell $(BIN)/python -m xc_core.methods run)

# xc run prints the results table and saves its JSON summary as $(XC_HOME)/last-run.json
# (python -m xc_assets.summary $(XC_HOME)/last-run.json prints the table again)
# the linear peer (PECOS) scored on the same test split before the report, shown beside the methods (empty: none)
RUN_PEERS ?= pecos
run: $(STAMP) $(if $(RUN_PEERS),peers) $(XC_DAGSTER_STATE)
	@mkdir -p $(XC_HOME)
	@echo "simulate → ingest → graphs → data set → anchors → train → index → eval → A/B → report → promotion (about 10 minutes on 2 idle cores: docs/benchmarks.md)"
	@# a line per step as it starts and ends; the Dagster log goes to $(XC_HOME)/last-run.log (its tail on a failure)
	@$(BIN)/xc run --dataset $(DATASET) --profile $(PROFILE) --methods $(METHODS) --home $(XC_HOME) \
		$(if $(RUN_PEERS),--peers $(RUN_PEERS))
	@echo
	@echo "Results under $(XC_HOME):"
	@echo "  event store      $(XC_HOME)/events   (duckdb views: $(XC_HOME)/xc.duckdb; quarantine: $(XC_HOME)/quarantine)"
	@echo "  simulated world  $(XC_HOME)/simulate  (calibration plots in */calibration/)"
	@echo "  XC data set      $(XC_HOME)/datasets/$(DATASET)   anchor sets + coverage: $(XC_HOME)/anchor_sets/$(DATASET)"
	@echo "  encoders         $(XC_HOME)/models/$(DATASET)   indexes: $(XC_HOME)/indexes/$(DATASET)"
	@echo "  HTML report      $(XC_HOME)/reports/$(DATASET)-$(PROFILE).html   (open it in a browser; A/B tables inside)"
	@echo "  A/B tests        $(XC_HOME)/abtest/$(DATASET)/$(PROFILE)   (JSON + HTML per test; gate tests in gate/)"
	@echo "Dagster UI:  make ui  → http://127.0.0.1:3000 (this run is in Runs; assets, checks and plots in Assets)"
	@echo "MLflow UI:   make mlflow-ui → http://127.0.0.1:5000 (store: $(MLFLOW_STORE); xc predict reads the same)"

# docs/RESULTS.md: every method of the registry's result_methods() on RESULTS_DATASETS at PROFILE, in one
# home; the PECOS peer is scored between two passes (the second reuses every model and evaluation and adds it)
RESULTS_DATASETS ?= synthetic,wikispeedia,aol-1000
RESULTS_OUT ?= docs
results: $(STAMP) peers
	@mkdir -p $(XC_HOME)
	$(BIN)/xc results --profile $(PROFILE) --datasets $(RESULTS_DATASETS) --home $(XC_HOME) --out $(RESULTS_OUT)
	for d in $(subst $(COMMA), ,$(RESULTS_DATASETS)); do \
		$(BIN)/xc peer --dataset $$d --profile $(PROFILE) --homes $(XC_HOME) --quiet || exit 1; done
	$(BIN)/xc results --profile $(PROFILE) --datasets $(RESULTS_DATASETS) --home $(XC_HOME) --out $(RESULTS_OUT)

# ruff and mypy on the whole tree (their settings: pyproject.toml); make test runs it first. mypy checks on one worker
# per core (-n auto): a fresh clone has no mypy cache, and the checking of the libraries xc imports is most of lint.
lint: $(STAMP) $(SCALE_STAMP)
	$(BIN)/ruff check xc_core xc_assets tests benchmarks experiments
	$(BIN)/mypy -n auto xc_core xc_assets tests benchmarks experiments

# the suite on one worker more than cores (pytest-xdist, at most TEST_WORKERS_MAX: each worker builds its own session
# homes): a worker also waits on the servers, subprocesses and Dagster step processes its tests start, and the spare
# worker fills those waits (docs/results/issue-65.md). A test file runs whole on one worker, so its module fixtures
# are built once; tests/conftest.py gives each worker its share of the threads and homes of its own.
# TEST_WORKERS=1 for one worker; pytest without -n runs it serially.
TEST_WORKERS ?= $(shell echo $$(( $$(nproc 2>/dev/null || echo 1) + 1 )))
TEST_WORKERS_MAX ?= 4
# The installs and the lint come first, as two independent chains built side by side (a sub-make with -j2): xc's
# environment then its lint, and the peers' environment. On a fresh clone the peers' install (about 1.5 min, most of it
# unpacking torch's wheel again) then overlaps xc's install instead of adding to it; with both installed it is a no-op.
test:
	$(MAKE) --no-print-directory -j2 lint peers
	$(BIN)/python -m pytest -q -n $(TEST_WORKERS) --maxprocesses $(TEST_WORKERS_MAX) --dist loadfile -m "not scale" --durations=20

# whole `xc run`s on Spark and on a dask cluster against the default run (issue #42; ~5 min on idle cores);
# `make test` keeps one Spark and one executor test
test-scale: $(STAMP) $(SCALE_STAMP)
	$(BIN)/python -m pytest -q -m scale

ui-snapshot: $(STAMP) $(XC_DAGSTER_STATE)
	bash docs/ui_snapshot.sh

mlflow-ui: $(STAMP)
	mkdir -p $(MLFLOW_STORE)
	$(BIN)/python -m xc_core.storage
	MLFLOW_SERVER_ENABLE_JOB_EXECUTION=false $(BIN)/mlflow server --backend-store-uri $(MLFLOW_URI) \
		--default-artifact-root $(MLFLOW_STORE)/artifacts --host 127.0.0.1 --port 5000 --workers 1

ui: $(STAMP) $(XC_DAGSTER_STATE)
	$(BIN)/python -m xc_core.storage
	$(BIN)/dagster dev -w workspace.yaml -h 127.0.0.1 -p 3000

# the champion over HTTP on 127.0.0.1 (POST /predict, /health, /ready, /metrics); it follows @champion, so run it
# beside `make ui` and every promotion is served without a restart (README "Serving the champion")
SERVE_PORT ?= 8900
export XC_SERVE_PORT := $(SERVE_PORT)
serve: $(STAMP)
	$(BIN)/xc serve --dataset $(DATASET) --home $(XC_HOME) --port $(SERVE_PORT)

bench: $(STAMP)
	$(BIN)/python benchmarks/bench_ingest.py

# the home holds its MLflow store; mlflow/mlflow.db and mlflow/artifacts are where it lived before (issue #15)
clean:
	rm -rf $(XC_DAGSTER_STATE) $(XC_HOME) $(MLFLOW_STORE) mlflow/mlflow.db mlflow/artifacts
