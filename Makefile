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
		--lifespan on --no-access-log --loop uvloop \
		--http omniroute_site.server:GuardedHttpToolsProtocol

# The dashboard browser test drives Debian's Chromium through Playwright (its own
# browser downloads are not used).  Installed here when missing and root or
# passwordless sudo is at hand; otherwise that test skips (and fails under CI=true).
CHROMIUM ?= /usr/bin/chromium

browser:
	@if [ ! -x "$(CHROMIUM)" ] && command -v apt-get >/dev/null 2>&1; then \
		if [ "$$(id -u)" = 0 ]; then SUDO=""; \
		elif command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then SUDO="sudo -n"; \
		else echo "make browser: $(CHROMIUM) missing and no root; the browser test will skip"; exit 0; fi; \
		$$SUDO env DEBIAN_FRONTEND=noninteractive apt-get update -q && \
		$$SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -q chromium chromium-driver \
			|| echo "make browser: could not install chromium"; \
	fi

test: $(VENV)/.installed browser
	$(VENV)/bin/lint-imports
	$(PY) -m ruff check .
	$(VENV)/bin/mypy gateway providers combos telemetry omniroute_site
	$(PY) -m pytest

lint: $(VENV)/.installed
	$(PY) -m ruff check .
	$(PY) -m ruff format --check .
	$(VENV)/bin/lint-imports
	$(VENV)/bin/mypy gateway providers combos telemetry omniroute_site

bench: $(VENV)/.installed   ## baseline + floor + gateway -> docs/benchmarks.md
	$(PY) bench/run.py

# Routing quality under a scripted fault schedule (issue #17): four mock upstreams,
# one fresh gateway per route, open-loop traffic -> docs/benchmarks.md; ~14 min
# (BENCH_ROUTING_ARGS=--quick: ~6 min).
bench-routing: $(VENV)/.installed
	$(PY) bench/routing_quality.py $(BENCH_ROUTING_ARGS)

# The real CLI clients (codex, claude, opencode; current npm releases, installed into
# .compat/) against a gateway on the mock upstream, on loopback: docs/compatibility.md.
# Needs node and npm; not part of `make test`.
compat: $(VENV)/.installed
	$(PY) -m tests.compat.run

.PHONY: compat

.PHONY: install run test lint bench bench-routing browser
