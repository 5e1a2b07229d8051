"""Each person's share of the Brave plan (household mode, docs/household.md): a search
through SearXNG reserves the Brave queries it will send from its person's share before it
is sent, and one beyond the share is refused, nothing sent, in words the model and the
person both read. The shares are kept in the database (app/store/search_shares.py); the
service's ShareGate (app/chat/services.py) joins the two."""

from __future__ import annotations

from typing import Protocol

from app.search.client import SearchError
from app.search.governor import NothingSent


class ShareUsedUp(SearchError, NothingSent):
    """The person's share of today's or this month's Brave queries is spent: the search
    was refused before it was sent."""

    status = 429

    def __init__(self, person: int, message: str) -> None:
        super().__init__(message)
        self.person = person


class ShareGate(Protocol):
    async def spend(self, person: int, queries: int) -> None:
        """Reserve `queries` of `person`'s share; ShareUsedUp, nothing reserved, when they
        would go beyond it."""
        ...


def used_up(
    person: int, period: str, used: int, limit: int, queries: int, admins: tuple[str, ...]
) -> ShareUsedUp:
    """The refusal as the trail, the model and the API clients say it."""
    which = "today's" if period == "today" else "this month's"
    needs = "" if used >= limit else f"; this search needs {queries}"
    ask = f"; ask {' or '.join(admins)}" if admins else ""
    return ShareUsedUp(
        person, f"your share of {which} searches is used up ({used} of {limit}{needs}){ask}"
    )
