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


def collected(*args: str) -> tuple[list[str], int]:
    """The test ids `pytest --collect-only` selects, and how many it collected in all."""
    done = pytest_run("--collect-only", "-q", *args)
    assert done.returncode == 0, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    total = re.search(r"(\d+)/(\d+) tests collected|(\d+) tests collected", done.stdout)
    assert total, lines[-3:]
    return [line for line in lines if "::" in line], int(total.group(2) or total.group(3))


def check_selection() -> str:
    """The `-m` expression `make check` runs with, read from the Makefile."""
    found = re.search(r"^HEAVY_TIERS := (.+)$", (ROOT / "Makefile").read_text(), re.MULTILINE)
    assert found, "the Makefile names the tiers make check leaves out"
    return found.group(1)


def test_make_check_leaves_out_every_heavy_test_and_keeps_most():
    quick, everything = collected("-m", check_selection())
    assert len(quick) >= 0.6 * everything, (len(quick), everything)
    heavy_modules = ("tests/test_page_use.py", "tests/test_llama_server.py")
    assert [test for test in quick if test.startswith(heavy_modules)] == []
    assert [test for test in quick if "postgresql" in test.partition("[")[2]] == []
    assert any(test.startswith("tests/test_storage.py") and "[sqlite" in test for test in quick)


def test_the_tiers_come_from_the_fixtures_a_test_reaches():
    modules = ["tests/test_page_use.py", "tests/test_lost_database.py", "tests/test_jsoncodec.py"]
    heavy, _ = collected("-m", "chromium or postgresql", *modules)
    reached = {test.partition("::")[0] for test in heavy}
    # `page` reaches `browser`, which reaches `chromium`; the module's own cluster fixture
    # reaches `postgresql`; the JSON codec's tests reach neither.
    assert reached == {"tests/test_page_use.py", "tests/test_lost_database.py"}


@pytest.mark.parametrize(
    ("test", "selection", "needs"),
    [
        (PAGE_TEST, "not docker", "needs Chromium: no `chromium` on PATH"),
        (COMPOSE_TEST, "docker", "needs a Docker engine with Compose v2"),
    ],
)
def test_a_missing_component_skips_with_its_reason_and_fails_in_ci(
    test, selection, needs, tmp_path
):
    # A PATH holding nothing: neither chromium nor docker is found on it.
    alone = pytest_run(test, "-m", selection, "-rs", PATH=str(tmp_path), CI="")
    assert alone.returncode == 0, alone.stdout
    assert "1 skipped" in alone.stdout
    assert needs in alone.stdout and "install: apt-get install" in alone.stdout

    in_ci = pytest_run(test, "-m", selection, PATH=str(tmp_path), CI="true")
    assert in_ci.returncode != 0
    assert "CI must run every tier" in in_ci.stdout and needs in in_ci.stdout
