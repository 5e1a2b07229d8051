"""The tiers of the suite: `make check` leaves out every test that needs Chromium,
PostgreSQL, llama-server or Docker, found from the fixtures each test uses; a missing
component skips its tests with the reason, and fails them under CI."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PAGE_TEST = "tests/test_page.py::test_the_view_follows_the_stream_until_the_reader_scrolls_up"
COMPOSE_TEST = "tests/test_compose_live.py::test_doctor_is_all_ok_in_the_chat_container"


def pytest_run(*args: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", *args],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={**os.environ, **env},
        timeout=300,
    )


def listed(done: subprocess.CompletedProcess[str]) -> list[str]:
    """The test ids a `pytest --collect-only -q` printed."""
    return [line for line in done.stdout.splitlines() if "::" in line]


def collected(*args: str) -> list[str]:
    """The test ids `pytest --collect-only` selects."""
    done = pytest_run("--collect-only", "-q", *args)
    assert done.returncode == 0, done.stdout + done.stderr
    return listed(done)


def check_selection() -> str:
    """The `-m` expression `make check` runs with, read from the Makefile."""
    found = re.search(r"^HEAVY_TIERS := (.+)$", (ROOT / "Makefile").read_text(), re.MULTILINE)
    assert found, "the Makefile names the tiers make check leaves out"
    return found.group(1)


def modules_of(tests: list[str]) -> set[str]:
    return {test.partition("::")[0] for test in tests}


@pytest.fixture(scope="module")
def make_check_listing() -> subprocess.CompletedProcess[str]:
    """`pytest --collect-only` with `make check`'s selection, over four modules, its
    imports timed: one pytest process for the two tests that read it."""
    modules = [
        "tests/test_page_use.py",  # every test drives Chromium (`page` reaches `browser`)
        "tests/test_llama_server.py",  # every test reaches llama-server
        "tests/test_lost_database.py",  # its own cluster, and its late writes on both backends
        "tests/test_jsoncodec.py",  # needs nothing
    ]
    done = pytest_run(
        "--collect-only", "-q", "-m", check_selection(), *modules, PYTHONPROFILEIMPORTTIME="1"
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return done


def test_make_check_leaves_out_what_needs_a_heavy_component(make_check_listing):
    quick = listed(make_check_listing)
    assert modules_of(quick) == {"tests/test_lost_database.py", "tests/test_jsoncodec.py"}
    lost = [test for test in quick if test.startswith("tests/test_lost_database.py")]
    assert lost and all("sqlite" in test.partition("[")[2] for test in lost)


def test_the_heavy_tiers_come_from_the_fixtures_a_test_reaches():
    modules = ["tests/test_page_use.py", "tests/test_storage.py", "tests/test_jsoncodec.py"]
    heavy = collected("-m", "chromium or postgresql", *modules)
    assert modules_of(heavy) == {"tests/test_page_use.py", "tests/test_storage.py"}
    storage = [test for test in heavy if test.startswith("tests/test_storage.py")]
    assert all("[postgresql" in test for test in storage)  # the backend parameter's mark


def test_a_missing_component_skips_with_its_reason_and_fails_in_ci(tmp_path):
    tests = [PAGE_TEST, COMPOSE_TEST]
    needs = ["needs Chromium: no `chromium` on PATH", "needs a Docker engine with Compose v2"]
    # A PATH holding nothing: neither chromium nor docker is found on it.
    alone = pytest_run(*tests, "-m", "chromium or docker", "-rs", PATH=str(tmp_path), CI="")
    assert alone.returncode == 0, alone.stdout
    assert "2 skipped" in alone.stdout
    assert all(reason in alone.stdout for reason in needs)
    assert alone.stdout.count("install: apt-get install") == 2

    in_ci = pytest_run(*tests, "-m", "chromium or docker", PATH=str(tmp_path), CI="true")
    assert in_ci.returncode != 0
    assert "2 errors" in in_ci.stdout  # each fails in its set-up, naming what it needs
    assert all(f"CI must run every tier; this test {reason}" in in_ci.stdout for reason in needs)


def test_pytest_starts_without_the_plugins_no_test_uses(make_check_listing):
    """No test uses hypothesis or schemathesis in-process (test_schema runs schemathesis's
    command), nor LangSmith's pytest plugin (installed with LangChain), so every pytest
    process, each xdist worker too, starts without them."""
    lines = make_check_listing.stderr.splitlines()
    timed = [line for line in lines if line.startswith("import time:")]
    imported = {line.rpartition("|")[2].strip().split(".")[0] for line in timed}
    assert "pytest" in imported  # the listing is read
    assert imported.isdisjoint({"hypothesis", "schemathesis", "langsmith"})


def test_a_run_on_workers_rewrites_each_test_module_once_before_they_start(tmp_path):
    """On a fresh clone no test module's rewritten form is in __pycache__: a run asked for
    workers writes them all in its controller, before it starts them (with --collect-only
    it starts none, and collects alone), and pytest's own import hook then takes them."""
    cache = {"PYTHONPYCACHEPREFIX": str(tmp_path / "pycache"), "PYTHONDONTWRITEBYTECODE": ""}
    trace = tmp_path / "debug.log"
    ran = pytest_run(
        "-n", "2", "--collect-only", "-q", f"--debug={trace}", "tests/test_cli.py", **cache
    )
    assert ran.returncode == 0, ran.stdout + ran.stderr
    log = trace.read_text()
    written = re.findall(r"rewritten before the workers start: .*/(test_\w+)\.py", log)
    assert set(written) >= {"test_cli", "test_users", "test_tiers"}, written
    assert f"found cached rewritten pyc for {ROOT / 'tests' / 'test_cli.py'}" in log
