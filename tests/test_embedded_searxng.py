"""The embedded SearXNG: starts with our engine, says so when it is missing, leaves
nothing running behind."""

from __future__ import annotations

import os
import secrets
from pathlib import Path

import httpx
import pytest

from app.searxng import EmbeddedSearxng, SearxngError, check_engine_loaded
from tests.conftest import API_KEY, run_cli, searxng_env


def marked(token: str) -> set[int]:
    """Processes whose environment carries the token: ours, whatever else runs meanwhile."""
    found = set()
    for environ in Path("/proc").glob("[0-9]*/environ"):
        try:
            if f"SEARXNG_TEST_MARK={token}".encode() in environ.read_bytes():
                found.add(int(environ.parent.name))
        except OSError:
            continue
    return found


def test_our_engine_is_loaded_and_json_is_on(searxng):
    config = httpx.get(f"{searxng.url}/config").json()
    assert [e["name"] for e in config["engines"]] == ["braveapi"]
    assert httpx.get(f"{searxng.url}/healthz").text == "OK"


def test_a_missing_engine_is_a_clear_error(searxng):
    with pytest.raises(SearxngError, match="has not loaded the engine 'nosuchengine'"):
        check_engine_loaded(searxng.url, "nosuchengine")


def test_stop_leaves_no_process_and_frees_the_port(brave):
    token = secrets.token_hex(8)
    environ = {**searxng_env(brave), "SEARXNG_TEST_MARK": token}
    instance = EmbeddedSearxng("all", environ=environ).start()
    pid = instance.process.pid
    assert pid in marked(token)
    instance.stop()
    assert marked(token) == set()
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)
    with pytest.raises(httpx.ConnectError):
        httpx.get(f"{instance.url}/healthz")


def test_a_command_without_searxng_url_runs_its_own_and_stops_it(brave):
    token = secrets.token_hex(8)
    run = run_cli(
        "search",
        "sieci komputerowe",
        "--json",
        searxng_url="",
        BRAVE_API_URL=brave.url,
        BRAVE_API_KEY=API_KEY,
        SEARCH_LOCALE="pl-PL",
        SEARXNG_TEST_MARK=token,  # inherited by the SearXNG the command starts
    )
    assert run.returncode == 0, run.stderr
    assert brave.requests[-1].params["country"] == "PL"
    assert marked(token) == set()
