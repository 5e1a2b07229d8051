# The two commands of the README: `make run` and `make test`; `make check` for a quick answer.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin

.PHONY: run check test test-compose bench screenshots lock

# Every package from the lock, each checked against its hash; then the work tree on the
# venv's path (what an editable install does, without a build backend outside the lock),
# byte-compiled as pip compiles what it installs; then the embedded SearXNG's venv
# (SEARXNG_VENV, from searxng/requirements.lock), which `make run` and the tests start, and
# the newest SearXNG's, which the tests run our engine on too (tests/searxng_releases.py),
# rather than at their first start.
$(BIN)/python: requirements-test.lock
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --require-hashes --no-deps -r requirements-test.lock
	echo "$(CURDIR)" > "$$($(BIN)/python -c 'import sysconfig; print(sysconfig.get_path("purelib"))')/private-search-chat.pth"
	$(BIN)/python -m compileall -q app
	$(BIN)/python -m app searxng --install-only
	$(BIN)/python -c 'from tests.searxng_releases import NEWEST_INSTALL as newest; from app.search.embedded import ensure_venv; ensure_venv(newest.venv, newest.lock)'
	touch $@

# Re-resolve every lock from its direct pins (pyproject.toml, searxng/requirements.in, the
# newest SearXNG's tests/searxng-newest.in, the SearXNG stand-in's
# tests/compose/searxng-image.in, .ci/run's tests/compose/tools.in): run after changing a pin.
# The app's lock takes the test lock's versions, so the tests run on what the image installs.
UV_COMPILE := $(BIN)/uv pip compile --quiet --universal --python-version 3.11 --generate-hashes
lock: $(BIN)/python
	$(UV_COMPILE) pyproject.toml --extra test -o requirements-test.lock
	$(UV_COMPILE) pyproject.toml -c requirements-test.lock -o requirements.lock
	$(UV_COMPILE) searxng/requirements.in -o searxng/requirements.lock
	cd tests && ../$(UV_COMPILE) searxng-newest.in -o searxng-newest.lock
	cd tests/compose && ../../$(UV_COMPILE) searxng-image.in -o searxng-image.lock
	cd tests/compose && ../../$(UV_COMPILE) tools.in -o tools.lock

# The stack without Docker: the chat service on 127.0.0.1:8080 with the embedded SearXNG
# (its first start installs it). Reads .env.
run: $(BIN)/python
	$(BIN)/python -m app serve

# The quick check: lint, the import rule between app/'s layers, app/'s types, and every
# test that needs none of Chromium, PostgreSQL, llama-server or Docker (tests/components.py
# marks each test's tiers from the fixtures it uses), on three workers a core: most of these
# tests wait on servers on loopback (on 2 cores, 2 min 32 s of pytest with six workers,
# 3 min 44 s with four, 2 min 36 s with eight).
# What else keeps it short is in docs/architecture.md ("The tiers, and make check").
CORES := $(shell nproc 2>/dev/null || echo 2)
# pytest keeps each test module it has rewritten for its asserts in __pycache__ (ignored by
# git); where PYTHONDONTWRITEBYTECODE is set, every worker rewrites them all again at each
# run (5 s of CPU a worker), so these runs keep them whatever the environment says.
KEEP_REWRITTEN := PYTHONDONTWRITEBYTECODE=
HEAVY_TIERS := not chromium and not postgresql and not llamacpp and not docker and not nodejs
# xdist hands out the tests in their order, one at a time to the next free worker (by
# default a block of them to each at the start): the `long` tests, first in the order
# (tests/conftest.py), start on different workers at once.
LONG_FIRST := --maxschedchunk 1
# The import contracts and mypy (12 s of CPU on one core from a fresh clone, with no
# .mypy_cache) run beside pytest, whose workers start by collecting; their output comes
# when pytest ends, and either failing fails the check.
check: $(BIN)/python
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	@log=$$(mktemp); \
	{ $(BIN)/lint-imports && $(BIN)/mypy; } >"$$log" 2>&1 & types=$$!; \
	$(KEEP_REWRITTEN) $(BIN)/python -m pytest -m "$(HEAVY_TIERS)" -n $$(( $(CORES) * 3 )) $(LONG_FIRST) --durations=10; \
	tests=$$?; wait $$types; typed=$$?; \
	echo "lint-imports and mypy:"; cat "$$log"; rm -f "$$log"; \
	exit $$(( tests || typed ))

# Every test: the same checks, the whole suite against a real SearXNG, Chromium, PostgreSQL
# and llama-server with the fakes on loopback (one worker a core; its 20 slowest at the
# end), then the Compose
# stack for real. A missing component skips its tests with the reason; with CI=true it
# fails them, so CI cannot pass by skipping.
test: $(BIN)/python
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/lint-imports
	$(BIN)/mypy
	$(KEEP_REWRITTEN) $(BIN)/python -m pytest -n auto $(LONG_FIRST) --durations=20
	$(MAKE) test-compose

# The stack built and brought up by Docker Compose, with the fakes on the host
# (tests/test_compose_live.py, and the scale profile: tests/test_compose_scale.py, and
# behind Authelia: tests/test_compose_authelia.py; the images it cannot pull are built by
# tests/compose/).
# -s: it prints its build and start-up times and the image sizes; a test may build an image.
test-compose: $(BIN)/python
	$(BIN)/python -m pytest -m docker -p no:cacheprovider -s --timeout=1800 tests/test_compose_live.py tests/test_compose_scale.py tests/test_compose_authelia.py

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
	$(BIN)/python bench/migrate_db.py
	$(BIN)/python bench/storage_cost.py
	$(BIN)/python bench/scale_load.py
	$(BIN)/python bench/crash_replicas.py
	$(BIN)/python bench/llama.py
	$(BIN)/python bench/research.py
	$(BIN)/python bench/llm_context.py
	$(BIN)/python bench/openai_v1.py
	$(BIN)/python bench/search_pacing.py
	$(BIN)/python bench/search_spend.py
	$(BIN)/python bench/export.py
	$(BIN)/python bench/shape_check.py
	$(BIN)/python bench/slowloris.py
# bench/stalls.py reads a `perf sched record` of a load run (see its docstring): not here.

# The README's pictures: a finished search + fetch answer, light and dark, into docs/.
screenshots: $(BIN)/python
	SCREENSHOT_DIR=docs $(BIN)/python -m pytest -q tests/test_screenshots.py
