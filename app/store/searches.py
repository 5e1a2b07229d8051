"""The searches this service sent towards the Brave plan, counted by UTC day on our side:
the figure exists before Brave's first answer states the plan (app/search/plan.py)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime

from app.store.connection import Connection


@dataclass(frozen=True)
class SearchesSpent:
    """Queries sent today and this month (UTC), as the Status panel and doctor show them."""

    today: int
    month: int


def utc_day(at: datetime | None = None) -> str:
    return (at or datetime.now(UTC)).astimezone(UTC).strftime("%Y-%m-%d")


class SearchCounts(Connection):
    """The counting queries; each write its own transaction."""

    def count_search(self, day: str | None = None) -> None:
        """One more query sent on `day` (YYYY-MM-DD, UTC; by default today)."""
        with self.write():
            self.db.execute(
                "INSERT INTO search_queries (day, queries) VALUES (?, 1) "
                "ON CONFLICT (day) DO UPDATE SET queries = search_queries.queries + 1",
                (day or utc_day(),),
            )

    def searches_spent(self, day: str | None = None) -> SearchesSpent:
        """The queries sent on `day` and in its month."""
        day = day or utc_day()
        today = self.scalar("SELECT queries FROM search_queries WHERE day = ?", (day,))
        month = self.scalar(
            "SELECT sum(queries) FROM search_queries WHERE substr(day, 1, 7) = ?", (day[:7],)
        )
        return SearchesSpent(today=today or 0, month=month or 0)
