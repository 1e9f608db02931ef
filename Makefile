# The two commands a newcomer needs: `make demo` and `make test`. Both set everything up.
VENV   ?= .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed-stamp
PYTHON ?= python3

.PHONY: install demo test lint screenshots bench chaos clean docs docs-serve

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[dev]'
	touch $(STAMP)

install: $(STAMP)

demo: install
	$(VENV)/bin/jobtui demo

test: install
	$(PY) -m pytest -q

lint: install
	$(VENV)/bin/ruff check --no-cache jobtui tests benchmarks tools
	$(VENV)/bin/mypy
	$(VENV)/bin/lint-imports --no-cache

screenshots: install
	$(PY) tools/screenshots.py screenshots

bench: install
	$(PY) -m pip install -q -e '.[dev,bench]'
	$(PY) benchmarks/run.py $(BENCH_ARGS)

.PHONY: bench-table bench-plot bench-console bench-history bench-matrix

# The docs' performance tables (docs/performance.md) and the scaling plot, from the results JSON
# `make bench` wrote.
BENCH_RESULTS ?= benchmarks/results.json
BENCH_HISTORY ?= benchmarks/history.json
BENCH_MATRIX ?= benchmarks/results-matrix.json
bench-table: install
	$(PY) benchmarks/table.py $(BENCH_RESULTS) $(if $(wildcard $(BENCH_MATRIX)),--matrix $(BENCH_MATRIX)) \
	    $(if $(wildcard $(BENCH_HISTORY)),--history $(BENCH_HISTORY))

bench-plot: install
	$(PY) -m pip install -q -e '.[dev,bench]'
	$(PY) benchmarks/plot.py $(BENCH_RESULTS) $(wildcard $(BENCH_MATRIX)) $(if $(wildcard $(BENCH_HISTORY)),--history $(BENCH_HISTORY))

# Drain and pickup as work grows, jobtui beside PgQueuer (asyncpg, batch 100) at every cell:
# 1, 2 and 4 worker processes; 20k, 200k and 2M ready jobs (issue 24: the 2M drain ≥ 0.6× the
# 20k one). The 2M cells take most of the time (the run's seconds are in the table); a shorter one:
#   make bench-matrix MATRIX_ONLY=drain MATRIX_WORKERS=2 MATRIX_BACKLOGS=20000,2000000
MATRIX_ONLY     ?= drain,latency
MATRIX_WORKERS  ?= 1,2,4
MATRIX_BACKLOGS ?= 20000,200000,2000000
MATRIX_PEERS    ?= pgqueuer
MATRIX_RUNS     ?= 1
bench-matrix: install
	$(PY) -m pip install -q -e '.[dev,bench]'
	$(PY) benchmarks/run.py --only $(MATRIX_ONLY) --workers $(MATRIX_WORKERS) \
	    --backlog $(MATRIX_BACKLOGS) --runs $(MATRIX_RUNS) --peers $(MATRIX_PEERS) \
	    --results $(BENCH_MATRIX) $(BENCH_MATRIX_ARGS)

# The console's reads with 1M and 10M finished jobs kept (builds the data sets once; minutes).
bench-history: install
	$(PY) benchmarks/history.py --results $(BENCH_HISTORY) $(BENCH_HISTORY_ARGS)

# Idle console bytes per tab through a real terminal (tmux), 80x24 and 120x40.
bench-console: install
	$(PY) benchmarks/console_tmux.py $(BENCH_CONSOLE_ARGS)

# The documentation site (MkDocs, Material theme) from docs/ into site/; the CLI reference is
# regenerated from the parser first. `mkdocs build --strict`: a broken link or anchor fails.
DOCS_STAMP := $(VENV)/.docs-stamp
$(DOCS_STAMP): pyproject.toml $(STAMP)
	$(PY) -m pip install -q -e '.[dev,docs]'
	touch $(DOCS_STAMP)

docs: $(DOCS_STAMP)
	$(PY) tools/cli_reference.py
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs build --strict

docs-serve: $(DOCS_STAMP)
	$(PY) tools/cli_reference.py
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs serve

chaos: install
	$(PY) tests/chaos/run.py
	$(PY) tests/chaos/hetero.py $(CHAOS_ARGS)

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache
