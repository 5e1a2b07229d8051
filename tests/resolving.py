"""The fetcher's name lookups answered by the test, for the tests of what a fetch may reach:
a name that resolves to a private address is refused before any connection."""

from __future__ import annotations

import ipaddress
from typing import Any

import pytest

from app.pages import addresses


def resolve_everything_privately(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every name resolves to 10.0.0.1: a fetch by name is refused before connecting."""
    asked: list[str] = []

    async def resolve(host: str, port: int) -> list[Any]:
        asked.append(host)
        return [ipaddress.ip_address("10.0.0.1")]

    monkeypatch.setattr(addresses, "resolve", resolve)
    return asked
