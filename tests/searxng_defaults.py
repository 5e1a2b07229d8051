"""A SearXNG whose default engines are the test's: the rendered settings with each
engine's entry enabled or disabled (`searching_with`), as a user sets them in
searxng/settings.yml."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import yaml

from app.search.embedded import EmbeddedSearxng, write_settings
from tests.conftest import API_KEY, searxng_env
from tests.fakes.brave_api import FakeBrave


@contextmanager
def searching_with(brave: FakeBrave, directory: Path, *engines: str) -> Iterator[EmbeddedSearxng]:
    """A SearXNG whose default engines are these (their entries say disabled: false, the
    others' disabled: true)."""
    path = write_settings(directory, "pl-PL", brave_api_key=API_KEY, allow_http_engine=True)
    settings = yaml.safe_load(path.read_text())
    for entry in settings["engines"]:
        entry["disabled"] = entry["name"] not in engines
    path.write_text(yaml.safe_dump(settings))
    with EmbeddedSearxng("pl-PL", environ=searxng_env(brave), rendered=directory) as instance:
        yield instance
