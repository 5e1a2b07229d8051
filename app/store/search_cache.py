"""The search cache's rows (table search_cache): a search's key and its response as JSON,
when it was stored, and when it was last used (a counter: the least recently used goes
first when the cache is full). What a key or a response means is app.search's business
(app/search/cache.py); the service's Storage offers these to it."""

from __future__ import annotations

import time
from typing import NamedTuple

from app.store.connection import Connection


class CachedSearch(NamedTuple):
    response: str
    stored_at: float
    """Unix time."""


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

    def clear_search_cache(self) -> int:
        with self.write():
            return self.db.execute("DELETE FROM search_cache").rowcount
