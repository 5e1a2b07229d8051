# The two commands of the README: `make run` and `make test`.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin

# Native runs read .env like Compose does.
-include .env
export

.PHONY: run test test-compose lint bench

$(BIN)/python: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet -e '.[test]'
	touch $@

# The stack without Docker: the embedded SearXNG (first run installs it) with our engine.
run: $(BIN)/python
	$(BIN)/python -m app searxng

# Every test: lint, then the suite against a real SearXNG and the fakes on loopback.
test: $(BIN)/python
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/python -m pytest

# Only where a Docker engine is reachable (not in CI): the stack up, one search through it.
test-compose: $(BIN)/python
	$(BIN)/python -m pytest -m compose tests/test_compose_live.py

bench: $(BIN)/python
	$(BIN)/python bench/search_latency.py
	$(BIN)/python bench/snippet_text.py
