"""The embedded SearXNG: starts with our engine, says so when it is missing, leaves
nothing running behind."""

from __future__ import annotations

import os
import subprocess

import httpx
import pytest

from app.searxng import EmbeddedSearxng, SearxngError, check_engine_loaded
from tests.conftest import API_KEY, run_cli, searxng_env


def waitress_pids() -> set[int]:
    found = subprocess.run(
        ["pgrep", "-f", "waitress.*searx.webapp"], capture_output=True, text=True
    )
    return {int(pid) for pid in found.stdout.split()}


def test_our_engine_is_loaded_and_json_is_on(searxng):
    config = httpx.get(f"{searxng.url}/config").json()
    assert [e["name"] for e in config["engines"]] == ["braveapi"]
    assert httpx.get(f"{searxng.url}/healthz").text == "OK"


def test_a_missing_engine_is_a_clear_error(searxng):
    with pytest.raises(SearxngError, match="has not loaded the engine 'nosuchengine'"):
        check_engine_loaded(searxng.url, "nosuchengine")


def test_stop_leaves_no_process_and_frees_the_port(brave):
    before = waitress_pids()
    instance = EmbeddedSearxng("all", environ=searxng_env(brave)).start()
    pid = instance.process.pid
    assert pid in waitress_pids()
    instance.stop()
    assert waitress_pids() == before
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)
    with pytest.raises(httpx.ConnectError):
        httpx.get(f"{instance.url}/healthz")


def test_a_command_without_searxng_url_runs_its_own_and_stops_it(brave):
    before = waitress_pids()
    run = run_cli(
        "search",
        "sieci komputerowe",
        "--json",
        searxng_url="",
        BRAVE_API_URL=brave.url,
        BRAVE_API_KEY=API_KEY,
        SEARCH_LOCALE="pl-PL",
    )
    assert run.returncode == 0, run.stderr
    assert brave.requests[-1].params["country"] == "PL"
    assert waitress_pids() == before
