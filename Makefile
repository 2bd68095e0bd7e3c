# KernelEvolve: two commands. `make run` brings the portal up with a local worker on embedded
# defaults (SQLite, embedded Redis); `make test` runs ruff and the whole test suite.
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: setup run test lint format

$(STAMP): requirements.txt package.json package-lock.json
	test -x $(PY) || python3 -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -r requirements.txt
	npm ci --no-audit --no-fund --silent
	touch $(STAMP)

setup: $(STAMP)
	sh scripts/ensure_system_packages.sh
	$(PY) scripts/vendor_assets.py

run: setup
	$(PY) manage.py migrate --no-input
	$(PY) -m kernelevolve_site.launcher --seed-demo --demo-traffic

lint: setup
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(PY) scripts/check_imports.py

format: setup
	$(VENV)/bin/ruff format .
	$(VENV)/bin/ruff check --fix .

test: lint
	sh scripts/ensure_system_packages.sh --browser
	$(PY) -m pytest
