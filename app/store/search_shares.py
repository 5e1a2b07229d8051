"""Each person's share of the Brave plan (household mode, docs/household.md): the queries
they may spend a UTC day and a calendar month (the settings' default, or their own, set by
`python -m app users limit`), and the queries they spent, counted by UTC day.

A search reserves its queries before it is sent (`spend_search_share`): the check and the
count are one write transaction, whose lock every replica of the database takes in turn,
so two replicas cannot both pass the last query of a share."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final, Literal

from app import config
from app.store.connection import Connection
from app.store.errors import Refused
from app.store.searches import utc_day

DEFAULT: Final = "default"
NO_LIMIT: Final = "none"
Limit = int | Literal["default", "none"]
"""A person's own limit: a number of queries, the settings' default, or none."""
STORED_NO_LIMIT = -1
"""How the database keeps "none" (NULL keeps "default")."""
Period = Literal["today", "month"]


@dataclass(frozen=True)
class ShareLimits:
    """Queries a day and a month; None: no limit."""

    daily: int | None
    monthly: int | None

    @classmethod
    def default(cls, settings: config.Settings) -> ShareLimits:
        """SEARCH_USER_DAILY_LIMIT and SEARCH_USER_MONTHLY_LIMIT: each person's, unless
        their own."""
        return cls(settings.search_user_daily_limit, settings.search_user_monthly_limit)


@dataclass(frozen=True)
class PersonShare:
    """A person's limits and what they spent, for `users list`, their own page and the
    admin's Status: names and counts only."""

    name: str
    own: tuple[Limit, Limit]
    """Their own daily and monthly limits, as set (DEFAULT: the settings')."""
    limits: ShareLimits
    """The limits that hold for them."""
    today: int
    month: int

    def described(self) -> str:
        """'today 3 of 20 · this month 41, no limit (default) Brave queries': a limit
        marked (default) when it is the settings' rather than the person's own. The one
        wording of a share: the page shows it as the API gives it."""
        parts = []
        for period, used, own, limit in (
            ("today", self.today, self.own[0], self.limits.daily),
            ("this month", self.month, self.own[1], self.limits.monthly),
        ):
            whose = " (default)" if own == DEFAULT else ""
            held = ", no limit" if limit is None else f" of {limit}"
            parts.append(f"{period} {used}{held}{whose}")
        return " · ".join(parts) + " Brave queries"


@dataclass(frozen=True)
class ShareRefused:
    """A search refused before it was sent: its queries would go beyond the person's share."""

    period: Period
    used: int
    limit: int
    queries: int
    """What the search would have spent."""
    admins: tuple[str, ...]
    """The household's admins, by name: whom to ask."""


def checked_limit(what: str, value: Limit) -> Limit:
    """A limit the store keeps; Refused for a negative number or another word."""
    if value in (DEFAULT, NO_LIMIT):
        return value
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise Refused(
            f"the {what} limit must be a whole number from 0, {NO_LIMIT!r} or "
            f"{DEFAULT!r}, not {value!r}"
        )
    return value


def stored(limit: Limit) -> int | None:
    if limit == DEFAULT:
        return None
    return STORED_NO_LIMIT if limit == NO_LIMIT else int(limit)


def limit_of(value: int | None) -> Limit:
    if value is None:
        return DEFAULT
    return NO_LIMIT if value == STORED_NO_LIMIT else int(value)


def holding(own: Limit, default: int | None) -> int | None:
    if own == DEFAULT:
        return default
    return None if own == NO_LIMIT else int(own)


class SearchShareRows(Connection):
    """The shares' queries; each write its own transaction."""

    def set_search_limits(self, name: str, daily: Limit | None, monthly: Limit | None) -> bool:
        """The person's own limits (None: left as they are); whether there is such a person.
        Refused for a limit the store does not keep, before anything is written."""
        changes = {
            column: stored(checked_limit(column, value))
            for column, value in (("daily", daily), ("monthly", monthly))
            if value is not None
        }
        with self.write():
            person = self.scalar("SELECT rowid FROM users WHERE name = ?", (name,))
            if person is None:
                return False
            self.db.execute(
                "INSERT INTO search_limits (person) VALUES (?) ON CONFLICT (person) DO NOTHING",
                (person,),
            )
            for column, value in changes.items():
                self.db.execute(
                    f"UPDATE search_limits SET {column} = ? WHERE person = ?", (value, person)
                )
            return True

    def search_shares(self, defaults: ShareLimits, day: str | None = None) -> list[PersonShare]:
        """Every person's share, oldest first."""
        people = self.db.execute("SELECT rowid FROM users ORDER BY rowid").fetchall()
        return [self.share_of(int(person), defaults, day or utc_day()) for (person,) in people]

    def search_share(
        self, name: str, defaults: ShareLimits, day: str | None = None
    ) -> PersonShare | None:
        person = self.scalar("SELECT rowid FROM users WHERE name = ?", (name,))
        return None if person is None else self.share_of(int(person), defaults, day or utc_day())

    def spend_search_share(
        self, person: int, queries: int, defaults: ShareLimits, day: str | None = None
    ) -> ShareRefused | None:
        """`queries` more spent by `person` today, unless that goes beyond their day's or
        month's limit: then nothing is counted, and the refusal says which."""
        day = day or utc_day()
        with self.write():
            share = self.share_of(person, defaults, day)
            periods: tuple[tuple[Period, int, int | None], ...] = (
                ("today", share.today, share.limits.daily),
                ("month", share.month, share.limits.monthly),
            )
            for period, used, limit in periods:
                if limit is not None and used + queries > limit:
                    admins = self.db.execute(
                        "SELECT name FROM users WHERE admin = 1 ORDER BY rowid"
                    ).fetchall()
                    named = tuple(str(admin) for (admin,) in admins)
                    return ShareRefused(period, used, limit, queries, named)
            self.db.execute(
                "INSERT INTO search_spent (id, person, day, queries) VALUES (?, ?, ?, ?) "
                "ON CONFLICT (id) DO UPDATE SET queries = search_spent.queries + excluded.queries",
                (f"{day} {person}", person, day, queries),
            )
        return None

    def share_of(self, person: int, defaults: ShareLimits, day: str) -> PersonShare:
        name = self.scalar("SELECT name FROM users WHERE rowid = ?", (person,))
        own = self.db.execute(
            "SELECT daily, monthly FROM search_limits WHERE person = ?", (person,)
        ).fetchone()
        daily, monthly = (limit_of(value) for value in own or (None, None))
        today = self.scalar(
            "SELECT queries FROM search_spent WHERE person = ? AND day = ?", (person, day)
        )
        month = self.scalar(
            "SELECT sum(queries) FROM search_spent WHERE person = ? AND substr(day, 1, 7) = ?",
            (person, day[:7]),
        )
        limits = ShareLimits(holding(daily, defaults.daily), holding(monthly, defaults.monthly))
        return PersonShare(str(name), (daily, monthly), limits, int(today or 0), int(month or 0))
