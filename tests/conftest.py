"""Shared fixtures: the fake Brave API and a real SearXNG with our engine, on loopback."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from app.searxng import EmbeddedSearxng
from tests.fakes.brave_api import FakeBrave

ROOT = Path(__file__).resolve().parent.parent
SHARED = ROOT.parent / "shared"
API_KEY = "test-key"
SERVER_LOCALE = "pl-PL"


def shared_path(*parts: str) -> Path:
    """A path in ../shared, or a skip saying why: a user's own clone has no shared/."""
    path = SHARED.joinpath(*parts)
    if not path.exists():
        pytest.skip(f"{path} is absent: the shared corpus sits beside the checkout only in CI")
    return path


@pytest.fixture(scope="session")
def brave() -> Iterator[FakeBrave]:
    with FakeBrave(api_key=API_KEY) as fake:
        yield fake


def searxng_env(brave: FakeBrave) -> dict[str, str]:
    return {**os.environ, "BRAVE_API_URL": brave.url, "BRAVE_API_KEY": API_KEY}


@pytest.fixture(scope="session")
def searxng(brave: FakeBrave) -> Iterator[EmbeddedSearxng]:
    """A SearXNG whose server-side default language is pl-PL."""
    with EmbeddedSearxng(SERVER_LOCALE, environ=searxng_env(brave)) as instance:
        yield instance


@pytest.fixture
def fresh_searxng(brave: FakeBrave) -> Iterator[EmbeddedSearxng]:
    """A SearXNG of its own, for tests that suspend the engine or leave errors behind."""
    with EmbeddedSearxng(SERVER_LOCALE, environ=searxng_env(brave)) as instance:
        yield instance


@pytest.fixture(autouse=True)
def clean_brave(request: pytest.FixtureRequest) -> Iterator[None]:
    if "brave" in request.fixturenames:
        request.getfixturevalue("brave").clear()
    yield


def run_cli(*args: str, searxng_url: str, **env: str) -> subprocess.CompletedProcess[str]:
    """`python -m app ...` as a user runs it, against the given SearXNG."""
    return subprocess.run(
        [sys.executable, "-m", "app", *args],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={**os.environ, "SEARXNG_URL": searxng_url, **env},
        timeout=120,
    )
