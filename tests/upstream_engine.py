"""SearXNG's own ``braveapi`` engine (since 2026) in a SearXNG set up by hand: the stand-in
module (``fakes/upstream_braveapi.py``) or the newest SearXNG's own, its settings entry on
the fake Brave, and settings that list it beside or instead of ours."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from app import config
from app.search.embedded import render_settings, write_settings
from tests.conftest import API_KEY
from tests.fakes.brave_api import FakeBrave

UPSTREAM_ENGINE = str(Path(__file__).parent / "fakes" / "upstream_braveapi")
"""The stand-in's path without ``.py``, as SearXNG's loader takes an engine outside its tree."""


def upstream_entry(
    brave: FakeBrave, name: str = config.OLD_ENGINE_NAME, engine: str = UPSTREAM_ENGINE
) -> dict[str, Any]:
    """SearXNG's own engine as its documentation configures it, on the fake Brave: the
    stand-in, or with ``engine="braveapi"`` the real one of the newest SearXNG
    (tests/searxng_releases.py)."""
    endpoint = f"{brave.url}/res/v1/web/search"
    entry = {"name": name, "engine": engine, "api_key": API_KEY, "base_url": endpoint}
    return {**entry, "inactive": False}  # the newest SearXNG's own entry says inactive: true


def our_entry() -> dict[str, Any]:
    """Our engine's entry as searxng/settings.yml renders it with a key."""
    entry: dict[str, Any] = yaml.safe_load(render_settings("all", brave_api_key=API_KEY))[
        "engines"
    ][0]
    return entry


def rendered_with(directory: Path, *engines: dict[str, Any]) -> Path:
    """Our rendered settings with these engine entries instead (a SearXNG set up by hand),
    in directory, as EmbeddedSearxng's ``rendered`` takes them."""
    path = write_settings(directory, "all", brave_api_key=API_KEY)
    settings = yaml.safe_load(path.read_text())
    settings["use_default_settings"]["engines"]["keep_only"] = [e["name"] for e in engines]
    settings["engines"] = [{**engine, "enable_http": True} for engine in engines]
    path.write_text(yaml.safe_dump(settings))
    return directory
