"""The search cache's rows (table search_cache): a search's key and its response as JSON,
when it was stored, and when it was last used (a counter: the least recently used goes
first when the cache is full). What a key or a response means is app.search's business
(app/search/cache.py); the service's Storage offers these to it."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import NamedTuple

from app.store.connection import Connection


class CachedSearch(NamedTuple):
    response: str
    stored_at: float
    """Unix time."""


@dataclass(frozen=True)
class OwnCache:
    """A person's rows of the search cache, as SQL LIKE patterns of its `key` and its
    `response` (app.search.cache.own_rows: what a key means is the search's business)."""

    keys_like: str
    responses_like: str


class SearchCacheRows(Connection):
    """The cache's queries; each write its own transaction."""

    def cached_search(self, key: str) -> CachedSearch | None:
        with self.write():
            found = self.db.execute(
                "SELECT response, stored_at FROM search_cache WHERE key = ?", (key,)
            ).fetchone()
            if found is None:
                return None
            self.db.execute(
                "UPDATE search_cache SET used = "
                "(SELECT coalesce(max(used), 0) + 1 FROM search_cache) WHERE key = ?",
                (key,),
            )
        return CachedSearch(*found)

    def keep_search(self, key: str, response: str, entries: int) -> None:
        with self.write():
            self.db.execute(
                "INSERT INTO search_cache (key, response, stored_at, used) VALUES "
                "(?, ?, ?, (SELECT coalesce(max(used), 0) + 1 FROM search_cache)) "
                "ON CONFLICT (key) DO UPDATE SET response = excluded.response, "
                "stored_at = excluded.stored_at, used = excluded.used",
                (key, response, time.time()),
            )
            self.db.execute(
                "DELETE FROM search_cache WHERE used <= "
                "(SELECT used FROM search_cache ORDER BY used DESC LIMIT 1 OFFSET ?)",
                (entries,),
            )

    def clear_search_cache(self, own: OwnCache | None = None) -> int:
        """Every row, or only a person's (`own`); how many went."""
        with self.write():
            if own is not None:
                return forget_searches(self, own)
            return self.db.execute("DELETE FROM search_cache").rowcount


def forget_searches(rows: Connection, own: OwnCache) -> int:
    """A person's rows gone, in the caller's transaction; how many."""
    forgotten = rows.db.execute(
        "DELETE FROM search_cache WHERE key LIKE ? OR response LIKE ?",
        (own.keys_like, own.responses_like),
    )
    return forgotten.rowcount
