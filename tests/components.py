"""What a test needs beyond Python and the lock, found from the fixtures it uses.

Each heavy component has one fixture of the same name (in conftest.py) that the fixtures
using it depend on: `chromium` under `browser`, `postgresql` under the clusters,
`llamacpp` under the llama-server fixtures, `docker` under the Compose stack, `nodejs`
under the Node.js MCP clients (tests/node_clients.py). A test whose
fixtures reach such a fixture is marked with its name (`tier_marks`, called by conftest's
collection hook), so `make check` can leave the heavy tiers out with `-m` and nobody marks
a test by hand. The two light tiers are marked the same way: `searxng` (a real SearXNG,
installed from PyPI on first use) and `service` (the chat service).

A missing component skips its tests with one line naming it and how to install it; with
`CI` set it fails them instead, so CI can never pass by skipping (`require`).
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import pytest


@dataclass(frozen=True)
class Component:
    """A program a tier of tests needs, and how a machine without it gets it."""

    name: str
    """The marker and the fixture that stand for it."""
    what: str
    """What a skip says the test needs."""
    install: str
    missing: Callable[[], str | None]
    """Why it cannot be used here, or None when it can."""


def chromium_executable() -> Path | None:
    found = shutil.which("chromium")
    return Path(found) if found else None


def _chromium_missing() -> str | None:
    return None if chromium_executable() else "no `chromium` on PATH"


def _nodejs_missing() -> str | None:
    missing = [name for name in ("node", "npm") if shutil.which(name) is None]
    return f"no `{'`, `'.join(missing)}` on PATH" if missing else None


def _postgresql_missing() -> str | None:
    from tests.postgres import unavailable

    return unavailable()


def _llama_missing() -> str | None:
    from tests.llama_server import build_missing

    return build_missing()


def _docker_missing() -> str | None:
    for command in (["docker", "info"], ["docker", "compose", "version"]):
        try:
            done = subprocess.run(command, capture_output=True, text=True, timeout=30)
        except (OSError, subprocess.TimeoutExpired) as exc:
            return f"`{' '.join(command)}` failed: {exc}"
        if done.returncode != 0:
            last = (done.stderr or done.stdout).strip().splitlines()[-1:] or ["no output"]
            return f"`{' '.join(command)}`: {last[0]}"
    return None


CHROMIUM = Component(
    "chromium",
    "Chromium",
    "apt-get install chromium fonts-dejavu-core",
    _chromium_missing,
)
POSTGRESQL = Component(
    "postgresql",
    "a PostgreSQL server",
    "apt-get install postgresql",
    _postgresql_missing,
)
LLAMA = Component(
    "llamacpp",
    "llama-server (built once from source)",
    "apt-get install cmake g++ make",
    _llama_missing,
)
DOCKER = Component(
    "docker",
    "a Docker engine with Compose v2",
    "apt-get install docker.io, start dockerd, add the Compose plugin",
    _docker_missing,
)
NODEJS = Component(
    "nodejs",
    "Node.js and npm (the TypeScript MCP SDK and the MCP Inspector, from the npm registry)",
    "apt-get install nodejs npm",
    _nodejs_missing,
)
HEAVY = (CHROMIUM, POSTGRESQL, LLAMA, DOCKER, NODEJS)
"""What `make check` leaves out."""

LIGHT_TIERS = {
    "searxng": frozenset(
        {"searxng", "fresh_searxng", "newest_searxng", "each_searxng", "each_fresh_searxng"}
    ),
    "service": frozenset({"chat", "guarded", "chat_on_backend"}),
}
"""The tiers that need nothing outside the lock, and the fixtures that mark them."""

MARKERS = {
    "chromium": "needs Chromium (the browser fixture); make check leaves it out",
    "postgresql": "needs a PostgreSQL server; make check leaves it out",
    "llamacpp": "needs llama-server, built from source; make check leaves it out",
    "docker": "needs a Docker engine with Compose (make test-compose); not in plain pytest",
    "nodejs": "needs Node.js (MCP clients, npm ci on first use); make check leaves it out",
    "searxng": "starts a real SearXNG (installed from PyPI on first use)",
    "service": "runs the chat service",
    "socket": "its `chat` (or `guarded`) service listens on a loopback port (tests/README.md)",
    "long": "waits tens of seconds: runs first, so the workers end together (conftest)",
}


@cache
def why_missing(component: Component) -> str | None:
    """Probed once a run: whether a component can be used changes with the machine only."""
    return component.missing()


def require(component: Component) -> None:
    """Skip (fail, under CI) the running test when the component is missing here."""
    reason = why_missing(component)
    if reason is None:
        return
    line = f"needs {component.what}: {reason}; install: {component.install}"
    if os.environ.get("CI"):
        pytest.fail(f"CI must run every tier; this test {line} (.ci/run does)", pytrace=False)
    pytest.skip(f"{line} (or run `make check`, which leaves this tier out)")


def tier_marks(fixtures: Iterable[str], marked: Iterable[str]) -> list[str]:
    """The tiers a test is in: from the fixtures it reaches and the marks it already has
    (a parameter such as PostgreSQL's backend brings its own mark)."""
    reached = set(fixtures) | set(marked)
    tiers = [component.name for component in HEAVY if component.name in reached]
    tiers += [name for name, names in LIGHT_TIERS.items() if reached & names]
    return tiers
