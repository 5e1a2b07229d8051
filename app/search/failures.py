"""An engine's failure named: what happened and until when ("the Brave plan's monthly quota
is used up until 2026-12-31", "duckduckgo blocked this address (CAPTCHA)").

SearXNG's search answer names a failed engine with a category only ("too many requests",
"Suspended: CAPTCHA"); the engine's own words are in /stats/errors, and the end of a
suspension nowhere: it is SearXNG's suspension time for that category, counted from the
search that first saw it (SUSPENDED_TIMES), or for our Brave engine the reset time
Brave's own headers gave (app/search/plan.py).
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

# pydantic reads a TypedDict on Python 3.11 only from typing_extensions (/healthz answers it).
from typing_extensions import TypedDict

from app import config
from app.search.plan import Plan, when

# SearXNG's search.suspended_times defaults (seconds), for the categories that suspend.
SUSPENDED_TIMES = {"CAPTCHA": 86400, "access denied": 86400, "too many requests": 3600}
# Its own times for the blocks it recognises by the page (the engine's words name them).
SUSPENDED_BY_DETAIL = {"Cloudflare CAPTCHA": 1296000, "ReCAPTCHA": 604800}
SUSPENDED = "Suspended: "


def suspended_seconds(category: str, details: tuple[str, ...]) -> int:
    """How long SearXNG suspends an engine for this failure."""
    for detail, seconds in SUSPENDED_BY_DETAIL.items():
        if detail in details:
            return seconds
    return SUSPENDED_TIMES[category]


class FailureView(TypedDict):
    """An engine's failure as /healthz sends it."""

    engine: str
    message: str
    named: str
    until: str | None


@dataclass(frozen=True)
class EngineFailure:
    """One engine that did not answer a search, as SearXNG and the engine said."""

    engine: str
    message: str
    """SearXNG's category: "too many requests", "Suspended: CAPTCHA", "timeout"..."""
    details: tuple[str, ...] = ()
    """The engine's own words from /stats/errors (Brave's code and detail)."""
    until: datetime | None = None
    """When the suspension (or Brave's window that ran out) ends, when it can be told."""
    code: str | None = None
    """Brave's RATE_LIMITED / QUOTA_LIMITED, for our engine."""

    @property
    def category(self) -> str:
        return self.message.removeprefix(SUSPENDED)

    @property
    def suspended(self) -> bool:
        return self.message.startswith(SUSPENDED) or self.category in SUSPENDED_TIMES

    @property
    def line(self) -> str:
        """'engine: message (the engine's own detail)', as the search has always said."""
        if len(self.details) > 1:
            # SearXNG keeps one entry per distinct message, ordered by how often it
            # happened, never by when: which one is this search's cannot be told.
            return f"{self.engine}: {self.message} (one of: {'; '.join(self.details)})"
        return f"{self.engine}: {self.message}" + (f" ({self.details[0]})" if self.details else "")

    @property
    def named(self) -> str:
        """What happened and until when, in plain words, for the model and the user."""
        until = f" until {when(self.until)}" if self.until else ""
        if self.code == "QUOTA_LIMITED":
            return f"the Brave plan's monthly quota is used up{until}"
        if self.code == "RATE_LIMITED":
            return f"the Brave plan's per-second rate limit was reached; {self.engine} waits{until}"
        what = {
            "CAPTCHA": "blocked this address (CAPTCHA)",
            "access denied": "blocked this address (access denied)",
            "too many requests": "rate-limited this address (too many requests)",
        }.get(self.category)
        if what is None:
            return self.line
        if self.until:
            return f"{self.engine} {what}; suspended{until}"
        return f"{self.engine} {what}; suspended by SearXNG"

    @property
    def told(self) -> str:
        """The named failure, then SearXNG's and the engine's own words when they differ."""
        return self.named if self.named == self.line else f"{self.named} [{self.line}]"

    def as_dict(self) -> FailureView:
        return {
            "engine": self.engine,
            "message": self.message,
            "named": self.named,
            "until": self.until.isoformat() if self.until else None,
        }


def brave_code(details: tuple[str, ...], plan: Plan | None) -> str | None:
    for code in ("QUOTA_LIMITED", "RATE_LIMITED"):
        if any(code in detail for detail in details):
            return code
    return plan.limited_now() if plan is not None else None


class Suspensions:
    """The engines seen suspended, with the end of each suspension when it can be told:
    the Status panel and doctor show them without a search."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.seen: dict[str, EngineFailure] = {}

    def name(
        self, engine: str, message: str, details: tuple[str, ...], plan: Plan | None
    ) -> EngineFailure:
        """The failure with its until, remembered while the engine is suspended."""
        now = datetime.now(UTC)
        ours = engine in (config.ENGINE_NAME, config.CONTEXT_ENGINE_NAME)
        code = brave_code(details, plan) if ours else None
        failure = EngineFailure(engine, message, details, None, code)
        if code and plan is not None and plan.limited_until and plan.limited_until > now:
            failure = EngineFailure(engine, message, details, plan.limited_until, code)
        with self.lock:
            earlier = self.seen.get(engine)
            if failure.until is None and failure.category in SUSPENDED_TIMES:
                if not message.startswith(SUSPENDED) and code is None:  # this search's
                    seconds = suspended_seconds(failure.category, details)
                    failure = EngineFailure(
                        engine, message, details, now + timedelta(seconds=seconds)
                    )
                elif earlier is not None and earlier.until and earlier.until > now:
                    failure = EngineFailure(engine, message, details, earlier.until, code)
            if failure.suspended:
                self.seen[engine] = failure
        return failure

    def answered(self, engines: set[str]) -> None:
        """These engines gave results: no longer suspended."""
        with self.lock:
            for engine in engines:
                self.seen.pop(engine, None)

    def current(self) -> list[EngineFailure]:
        """The engines suspended now (an end that passed drops the engine)."""
        now = datetime.now(UTC)
        with self.lock:
            for engine, failure in list(self.seen.items()):
                if failure.until is not None and failure.until <= now:
                    del self.seen[engine]
            return sorted(self.seen.values(), key=lambda f: f.engine)
