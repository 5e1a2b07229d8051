"""Schemathesis against /openapi.json, all checks and every phase its version runs
(examples, coverage, fuzzing, stateful): no 5xx, no response that breaks the schema, no
valid request refused, no invalid one accepted. A bounded run; `bench/schema.py` runs long.

Its CLI is used because its pytest plugin does not load under pytest 9."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import ChatService, chat_env

EXAMPLES_PER_OPERATION = 15


def run_schemathesis(url: str, examples: int, cwd: Path) -> subprocess.CompletedProcess[str]:
    st = Path(sys.executable).with_name("st")
    return subprocess.run(
        [
            str(st),
            "run",
            f"{url}/openapi.json",
            "--checks",
            "all",
            "--max-examples",
            str(examples),
            "--request-timeout",
            "30",
            # Its default is 10 s, and the lab's measure of three locales, 50 results each,
            # paces its searches (pages of each locale) to the plan's one a second: about
            # 10 s by design (a run of CI took 12.3 s).
            "--max-response-time",
            "25",
            "--no-color",
            # No examples kept from an earlier run (a fresh directory each run had none).
            "--generation-database",
            "none",
        ],
        capture_output=True,
        text=True,
        cwd=cwd,
        env={**os.environ, "HYPOTHESIS_STORAGE_DIRECTORY": str(hypothesis_tables())},
        timeout=600,
    )


def hypothesis_tables() -> Path:
    """Where hypothesis keeps the Unicode tables it builds: in the user's cache, not the
    run's scratch directory, so only the first run builds them (the UTF-8 codec's table
    alone takes about 2.3 s of CPU, the patterns' strings need it)."""
    cache = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(cache) / "private-search-chat" / "hypothesis"


@pytest.fixture
def fuzzed_service(llm, searxng, pages, tmp_path) -> Iterator[ChatService]:
    llm.clear()
    service = ChatService(chat_env(llm, tmp_path, pages), searxng.url).start()
    yield service
    service.stop()


@pytest.mark.long  # schemathesis's pass over the API, about a minute
def test_schemathesis_finds_nothing(fuzzed_service, tmp_path):
    # The service's client (30 s): FastAPI builds the schema at its first request, which
    # took over httpx's default 5 s with the run's long tests all starting at once.
    paths = fuzzed_service.http.get("/openapi.json").json()["paths"]
    assert {"/v1/chat/completions", "/v1/models"} <= set(paths)  # /v1 is fuzzed too
    result = run_schemathesis(fuzzed_service.url, EXAMPLES_PER_OPERATION, tmp_path)
    summary = result.stdout[-4000:]
    assert result.returncode == 0, summary
    generated = re.search(r"(\d+) generated, (\d+) passed", result.stdout)
    assert generated and generated.group(1) == generated.group(2), summary
    assert int(generated.group(1)) > 500  # every route was exercised, not a few
