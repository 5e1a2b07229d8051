# The two commands of the README: `make run` and `make test`.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin

.PHONY: run test test-compose bench screenshots

$(BIN)/python: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet -e '.[test]'
	touch $@

# The stack without Docker: the chat service on 127.0.0.1:8080 with the embedded SearXNG
# (its first start installs it). Reads .env.
run: $(BIN)/python
	$(BIN)/python -m app serve

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
	$(BIN)/python bench/chat_latency.py
	$(BIN)/python bench/extraction.py
	$(BIN)/python bench/faults.py
	$(BIN)/python bench/schema.py
	$(BIN)/python bench/crash.py
	$(BIN)/python bench/load.py
	$(BIN)/python bench/turn_cpu.py
	$(BIN)/python bench/save_cost.py
	$(BIN)/python bench/llama.py

# The README's pictures: a finished search + fetch answer, light and dark, into docs/.
screenshots: $(BIN)/python
	SCREENSHOT_DIR=docs $(BIN)/python -m pytest -q tests/test_screenshots.py
