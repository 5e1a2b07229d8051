"""The Brave plan, as Brave states it in the X-RateLimit-* headers of every answer.

Our engine (searxng-engines/brave_api.py) runs inside SearXNG and writes what the last
answer's headers said to a small JSON file, SEARCH_PLAN_FILE, atomically; this module
reads it, so the chat service knows the plan's rate and the month's queries left without
spending a query (docs/search.md, "The plan"). The headers are comma pairs, the second's
window then the month's: ``X-RateLimit-Limit: 1, 2000``, ``-Remaining: 0, 1987``,
``-Reset: 1, 2528987``; a monthly limit of 0 means no monthly cap.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

# pydantic reads a TypedDict on Python 3.11 only from typing_extensions (/healthz answers it).
from typing_extensions import TypedDict

FREE_PLAN_RATE = 1.0
"""Queries a second before Brave's first answer says otherwise: the free plan's."""
LOW_SHARE = 0.10
"""Below this share of the month's queries left, the plan is shown with a warning."""
POLICY_WINDOW = re.compile(r"^\s*(\d+)\s*;\s*w\s*=\s*(\d+)")


class PlanView(TypedDict):
    """A Plan as /healthz and the Status panel send it (times in ISO 8601)."""

    rate_per_second: float
    monthly_limit: int | None
    monthly_remaining: int | None
    resets_at: str | None
    policy: str
    read_at: str
    low: bool
    limited: str | None


@dataclass(frozen=True)
class Plan:
    """The plan as the last answer of Brave stated it."""

    rate: float
    """Queries a second the plan allows."""
    monthly_limit: int | None
    """Queries a month; None: no monthly cap (Brave's limit of 0)."""
    monthly_remaining: int | None
    """Queries left this month; None without a monthly cap."""
    resets_at: datetime | None
    """When the month's window resets (UTC)."""
    policy: str
    """X-RateLimit-Policy as Brave sent it (``1;w=1, 2000;w=2592000``)."""
    read_at: datetime
    """When Brave sent it (UTC)."""
    limited: str | None = None
    """RATE_LIMITED or QUOTA_LIMITED when that answer was a 429."""
    limited_until: datetime | None = None
    """When the window that ran out resets (that 429's X-RateLimit-Reset)."""

    @property
    def low(self) -> bool:
        """Less than a tenth of the month's queries left."""
        if self.monthly_limit is None or self.monthly_remaining is None:
            return False
        return self.monthly_remaining < self.monthly_limit * LOW_SHARE

    def limited_now(self, now: datetime | None = None) -> str | None:
        """The 429's code while its window has not reset yet."""
        now = now or datetime.now(UTC)
        if self.limited and self.limited_until is not None and self.limited_until > now:
            return self.limited
        return None

    def as_dict(self) -> PlanView:
        """For /healthz and the Status panel (times in ISO 8601)."""
        return {
            "rate_per_second": self.rate,
            "monthly_limit": self.monthly_limit,
            "monthly_remaining": self.monthly_remaining,
            "resets_at": self.resets_at.isoformat() if self.resets_at else None,
            "policy": self.policy,
            "read_at": self.read_at.isoformat(),
            "low": self.low,
            "limited": self.limited_now(),
        }


def per_second(limits: list[int], policy: str) -> float:
    """The first window's queries a second: its policy's ``N;w=S`` (N / S), else its limit."""
    match = POLICY_WINDOW.match(policy.split(",")[0]) if policy else None
    if match and int(match[2]) > 0 and int(match[1]) > 0:
        return int(match[1]) / int(match[2])
    return float(limits[0]) if limits and limits[0] > 0 else FREE_PLAN_RATE


def epoch(value: Any) -> datetime | None:
    return datetime.fromtimestamp(value, UTC) if isinstance(value, int | float) else None


def parse(record: Any) -> Plan | None:
    """A Plan from the engine's record, None when it is not one."""
    if not isinstance(record, dict):
        return None
    limits, remaining, resets = (record.get(k) or [] for k in ("limit", "remaining", "reset"))
    read_at = epoch(record.get("read_at"))
    numbers = [*limits, *remaining, *resets]
    if read_at is None or not limits or not all(isinstance(n, int) for n in numbers):
        return None
    policy = str(record.get("policy") or "")
    capped = len(limits) > 1 and limits[1] > 0
    limited = record.get("limited")
    return Plan(
        rate=per_second(limits, policy),
        monthly_limit=limits[1] if capped else None,
        monthly_remaining=remaining[1] if capped and len(remaining) > 1 else None,
        resets_at=read_at + timedelta(seconds=resets[1]) if len(resets) > 1 else None,
        policy=policy,
        read_at=read_at,
        limited=limited if isinstance(limited, str) else None,
        limited_until=epoch(record.get("limited_until")),
    )


class PlanReader:
    """The plan file, read again only when it changed (one stat per call)."""

    def __init__(self, path: Path, rate: float | None = None) -> None:
        self.path = path
        self.rate = rate
        """SEARCH_RATE: overrides the plan's rate; None: the plan's."""
        self.seen: tuple[int, int, int] | None = None
        self.plan: Plan | None = None

    def read(self) -> Plan | None:
        """The plan Brave's last answer stated; None before any (or if the file is bad)."""
        try:
            stat = os.stat(self.path)
        except OSError:
            return None
        if self.seen == (stat.st_ino, stat.st_mtime_ns, stat.st_size):
            return self.plan
        try:
            record = json.loads(self.path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return self.plan
        self.seen, self.plan = (stat.st_ino, stat.st_mtime_ns, stat.st_size), parse(record)
        return self.plan

    def plan_rate(self) -> float:
        """Queries a second searches may go at: SEARCH_RATE, else the plan's, else the free
        plan's 1/s (before Brave's first answer). For the search governor."""
        if self.rate is not None:
            return self.rate
        plan = self.read()
        return plan.rate if plan is not None else FREE_PLAN_RATE

    def retry_seconds(self) -> float | None:
        """Seconds until the window of Brave's last 429 resets (its X-RateLimit-Reset), for
        the searcher's one retry; None when no 429 is on record."""
        plan = self.read()
        if plan is None or plan.limited_until is None:
            return None
        return max(0.0, (plan.limited_until - datetime.now(UTC)).total_seconds())


def when(moment: datetime) -> str:
    """A day for a far end (the month's quota: its last day, the reset being the next
    midnight), a time for a near one."""
    moment = moment.astimezone(UTC)
    if moment - datetime.now(UTC) > timedelta(days=1):
        return (moment - timedelta(seconds=1)).strftime("%Y-%m-%d")
    return moment.strftime("%Y-%m-%d %H:%M:%S UTC")


def cost(queries: int, price: float) -> str:
    """What ``queries`` cost in dollars at ``price`` per 1,000 (BRAVE_PRICE_PER_1000):
    ``0.015 $``."""
    return f"{queries * price / 1000:.3f} $"


def quota_worth(plan: Plan | None, price: float) -> str:
    """The month's quota as Brave's headers state it, in money: their headers count
    queries, never dollars, so the credit is the queries at ``price``. Empty without a
    price, a plan or a monthly cap."""
    if not price or plan is None or plan.monthly_limit is None:
        return ""
    left = plan.monthly_remaining
    worth = f"{cost(left, price)} of " if left is not None else ""
    return f"; the month's queries left are worth about {worth}{cost(plan.monthly_limit, price)}"


def summary(plan: Plan | None, rate: float | None = None) -> str:
    """The plan in one line, for doctor and the Status panel."""
    paced = f"; searches paced at SEARCH_RATE={rate:g} a second" if rate is not None else ""
    if plan is None:
        return (
            "not known yet: Brave states it in its answer to the first search (until then the "
            f"free plan's {FREE_PLAN_RATE:g} query a second is assumed){paced}"
        )
    text = f"{plan.rate:g} quer{'y' if plan.rate == 1 else 'ies'} a second"
    if plan.monthly_limit is None:
        text += ", no monthly cap"
    else:
        left = f"{plan.monthly_remaining:,}" if plan.monthly_remaining is not None else "?"
        resets = f", resets {plan.resets_at:%Y-%m-%d %H:%M} UTC" if plan.resets_at else ""
        text += f"; {left} of {plan.monthly_limit:,} queries left this month{resets}"
        if plan.low:
            text += f" (below {LOW_SHARE:.0%} left)"
    limited = plan.limited_now()
    if limited == "QUOTA_LIMITED" and plan.limited_until:
        text += f"; the monthly quota is used up until {when(plan.limited_until)}"
    elif limited:
        text += f"; Brave answered {limited}"
    return text + f" (as of {plan.read_at:%Y-%m-%d %H:%M:%S} UTC){paced}"
