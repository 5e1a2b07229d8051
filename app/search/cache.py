"""The search cache's key and contents: which searches are the same, which answers may be
kept, and a response as the JSON the store keeps. The store (app/store/search_cache.py)
keeps the rows; it knows nothing of searches, only keys and text (CacheStore)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Protocol

from app import jsoncodec
from app.search.client import Result, SearchResponse


class CacheStore(Protocol):
    """Where cached searches are kept: the service's database (app.store's Storage)."""

    async def cached_search(self, key: str) -> tuple[str, float] | None:
        """The response's JSON and when it was stored (Unix time), marked as used now."""
        ...

    async def keep_search(self, key: str, response: str, entries: int) -> None:
        """Store (or replace) it, keeping at most ``entries``, the least recently used out."""
        ...

    async def clear_search_cache(self, own: tuple[str, str] | None) -> int:
        """Empty the cache, or only a person's rows (`own_rows`); how many searches went."""
        ...


@dataclass(frozen=True)
class SearchKey:
    """What makes two searches the same one."""

    query: str
    locale: str | None
    engines: str | None
    page: int
    time_range: str | None
    person: int | None = None
    """Whose cache (household mode, not SEARCH_CACHE_SHARED); None: the one shared cache."""

    def text(self) -> str:
        words = " ".join(self.query.casefold().split())
        names = sorted({n.strip() for n in (self.engines or "").split(",") if n.strip()})
        key = [words, self.locale or "", ",".join(names), self.page, self.time_range or ""]
        mine = [] if self.person is None else [self.person]
        return json.dumps([*key, *mine], ensure_ascii=False)


@dataclass(frozen=True)
class Kept:
    """A cached search's results, and who ran it (a users rowid; None: no one named)."""

    results: list[Result]
    by: int | None


def cacheable(response: SearchResponse) -> bool:
    """Only a whole answer is kept: none with a failed engine (the next search may find it
    answering) or without results (the engine may have been blocked without saying so)."""
    return bool(response.results) and not response.engine_errors


def encode(response: SearchResponse, by: int | None) -> str:
    results = [r.as_dict() for r in response.results]
    return json.dumps({"results": results, "by": by}, ensure_ascii=False)


def decode(text: str) -> Kept | None:
    """The kept results and who ran them; None when the row is not what ``encode`` wrote
    (then the search is run again, and the row replaced)."""
    try:
        data = jsoncodec.loads(text)
        results = [
            Result(
                title=str(r["title"]),
                url=str(r["url"]),
                content=str(r["content"]),
                publishedDate=None if r["publishedDate"] is None else str(r["publishedDate"]),
                engine=str(r["engine"]),
            )
            for r in data["results"]
        ]
        by = data.get("by")
    except (ValueError, TypeError, KeyError):
        return None
    return Kept(results, by if isinstance(by, int) else None)


def own_rows(person: int) -> tuple[str, str]:
    """A person's rows of the cache as SQL LIKE patterns of the key and of the response:
    the keys that end with them (SearchKey.text: a key no one's ends with its time range,
    a string) and, in the shared cache, the searches they ran (`encode`'s "by")."""
    return f"%, {person}]", f'%"by": {person}}}'
