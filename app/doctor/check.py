"""What one check says (`Check`): its part, its state, what to fix."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Literal

State = Literal["ok", "warning", "fail"]
CheckedPart = Literal["searxng", "engine", "model", "access"]
QUICK_TIMEOUT = 5.0
"""Seconds for each free check's request (a healthy local service answers in milliseconds)."""


@dataclass
class Check:
    """One check's outcome. `ok` (not failed) is what the command line prints and exits on."""

    id: str
    part: CheckedPart
    name: str
    state: State
    detail: str
    fix: str = ""

    @property
    def ok(self) -> bool:
        return self.state != "fail"

    def as_dict(self) -> dict[str, str]:
        return asdict(self)


def describe(exc: Exception) -> str:
    """'ConnectError: All connection attempts failed', or the class alone when it says nothing."""
    return f"{exc.__class__.__name__}: {exc}" if str(exc) else exc.__class__.__name__


def first_failure(checks: list[Check]) -> Check | None:
    return next((check for check in checks if check.state == "fail"), None)
