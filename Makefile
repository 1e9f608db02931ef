# The two commands a newcomer needs: `make demo` and `make test`. Both set everything up.
VENV   ?= .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed-stamp
PYTHON ?= python3

.PHONY: install demo test lint screenshots bench chaos clean

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
	$(VENV)/bin/ruff check --no-cache jobtui tests benchmarks
	$(VENV)/bin/mypy

screenshots: install
	$(PY) -m jobtui.tui.screenshots screenshots

bench: install
	$(PY) -m pip install -q -e '.[dev,bench]'
	$(PY) benchmarks/run.py $(BENCH_ARGS)

chaos: install
	$(PY) tests/chaos/run.py
	$(PY) tests/chaos/hetero.py $(CHAOS_ARGS)

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache
