"""The Compose stack for real: only where a Docker engine answers (make test-compose).

Needs a Docker engine and a real BRAVE_API_KEY in the environment; skipped otherwise,
and not part of `make test` or CI (there is no Docker engine there).
"""

from __future__ import annotations

import json
import os
import secrets
import subprocess
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.compose
ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def stack():
    docker = pytest.importorskip("docker")
    try:
        client = docker.from_env()
        client.ping()
    except Exception as exc:  # noqa: BLE001 -- any failure means: no engine to test with
        pytest.skip(f"no Docker engine reachable: {exc}")
    if not os.environ.get("BRAVE_API_KEY"):
        pytest.skip("set BRAVE_API_KEY: the stack searches the real Brave API")
    env = {**os.environ, "SEARXNG_SECRET": secrets.token_hex(32), "SEARCH_LOCALE": "pl-PL"}
    compose = ["docker", "compose", "--project-directory", str(ROOT)]
    subprocess.run([*compose, "up", "-d", "--build"], check=True, env=env)
    try:
        chat = client.containers.list(filters={"label": "com.docker.compose.service=chat"})[0]
        deadline = time.monotonic() + 180
        while chat.attrs["State"].get("Health", {}).get("Status") != "healthy":
            assert time.monotonic() < deadline, "chat never became healthy"
            time.sleep(2)
            chat.reload()
        yield chat
    finally:
        subprocess.run([*compose, "down", "-v"], env=env)


def test_a_search_runs_through_the_stack_in_polish(stack):
    code, output = stack.exec_run(["python", "-m", "app", "search", "pogoda Warszawa", "--json"])
    assert code == 0, output.decode()
    results = json.loads(output)
    assert results and all(r["engine"] == "braveapi" for r in results)
