# The two commands a fresh machine needs: `make app` and `make test`.  Each creates .venv if missing
# and installs what it needs first.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-$(shell cat pyproject.toml | md5sum | cut -c1-8)

$(BIN)/python:
	$(PY) -m venv $(VENV)

$(STAMP): $(BIN)/python pyproject.toml
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -e '.[app,test]'
	touch $(STAMP)

install: $(STAMP)

app: $(STAMP)
	$(BIN)/python app.py --server.address 127.0.0.1 --server.headless true --browser.gatherUsageStats false

test: $(STAMP)
	$(BIN)/python -m pytest -q -n 2 tests

# Speed and accuracy targets: every benchmark runs; the exit status is 1 if any missed its target.
bench: $(STAMP)
	@fail=0; for f in benchmarks/*.py; do echo "== $$f"; $(BIN)/python $$f || fail=1; done; exit $$fail

lint: $(STAMP)
	$(BIN)/python -m pip install -q ruff && $(BIN)/ruff check planner calibration tests app.py

.PHONY: install app test bench lint
