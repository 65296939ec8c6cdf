# OmniRoute: `make run` serves the embedded demo, `make test` runs every test.
VENV   := .venv
PY     := $(VENV)/bin/python
PYTHON ?= python3
HOST   ?= 127.0.0.1
PORT   ?= 8000

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[dev]'
	touch $@

install: $(VENV)/.installed

run: $(VENV)/.installed   ## embedded default: SQLite, in-process state, demo provider
	$(PY) manage.py migrate --noinput
	$(PY) manage.py import_config omniroute_site/demo.yaml
	$(PY) -m uvicorn omniroute_site.asgi:application --host $(HOST) --port $(PORT) \
		--lifespan on --no-access-log --loop uvloop --http httptools

test: $(VENV)/.installed
	$(VENV)/bin/lint-imports
	$(PY) -m ruff check .
	$(PY) -m pytest

lint: $(VENV)/.installed
	$(PY) -m ruff check .
	$(PY) -m ruff format --check .
	$(VENV)/bin/lint-imports
	$(VENV)/bin/mypy gateway providers combos telemetry omniroute_site

bench: $(VENV)/.installed   ## baseline + floor + gateway -> docs/benchmarks.md
	$(PY) bench/run.py

.PHONY: install run test lint bench
