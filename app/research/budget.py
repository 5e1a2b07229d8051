"""What a research run may spend, what it spent, and which bound stopped it."""

from __future__ import annotations

import time
from dataclasses import dataclass, field, replace
from enum import StrEnum

from app.config import RESEARCH_CAPS, ResearchDefaults

MAX_SEARCHES = RESEARCH_CAPS.searches
"""The service's caps on a run's own budget (config.RESEARCH_CAPS)."""
MAX_PAGES = RESEARCH_CAPS.pages
MAX_MINUTES = float(RESEARCH_CAPS.minutes)
WINDOWS_OF_TOKENS = 4
"""The tokens bound by default: the served window this many times over. A run reads a page
per request, so a few windows' worth is many pages' notes and a report."""
DEFAULT_WINDOW = 8192
"""The window a budget made before its model is known counts with (a dry run)."""


class Bound(StrEnum):
    """What ended the gathering before the plan was done."""

    SEARCHES = "searches"
    PAGES = "pages"
    MINUTES = "minutes"
    TOKENS = "tokens"
    SEARCH_UNAVAILABLE = "search_unavailable"
    """The search engine refused to go on: the month's quota, its rate, a suspension."""
    USER = "user"
    """Stop (Ctrl-C on the command line)."""
    UNSTARTED = "unstarted"
    """The plan waited for a Start that never came (the page's): nothing was searched."""


class BudgetError(ValueError):
    """A budget the service does not run: said in the user's words."""


@dataclass(frozen=True)
class Budget:
    searches: int = ResearchDefaults.searches
    pages: int = ResearchDefaults.pages
    minutes: float = ResearchDefaults.minutes
    tokens: int = DEFAULT_WINDOW * WINDOWS_OF_TOKENS

    @classmethod
    def asked(
        cls,
        defaults: ResearchDefaults,
        searches: int | None = None,
        pages: int | None = None,
        minutes: float | None = None,
    ) -> Budget:
        """The budget a run asks for, each bound it leaves out (None) the service's
        default (RESEARCH_SEARCHES, RESEARCH_PAGES, RESEARCH_MINUTES)."""
        return cls(
            defaults.searches if searches is None else searches,
            defaults.pages if pages is None else pages,
            defaults.minutes if minutes is None else minutes,
        )

    def checked(self) -> Budget:
        """This budget, or a BudgetError naming the bound out of the service's range."""
        for name, value, cap in (
            ("searches", self.searches, MAX_SEARCHES),
            ("pages", self.pages, MAX_PAGES),
            ("minutes", self.minutes, MAX_MINUTES),
        ):
            if not 0 < value <= cap:
                raise BudgetError(f"{name} must be above 0 and at most {cap:g}, not {value:g}")
        return self


def most_queries(budget: Budget, per_search: int) -> int:
    """The most Brave queries the budget's searches may spend, each sending `per_search`
    (SearXNG's default engines of ours: two with web search and LLM Context both on)."""
    return budget.searches * per_search


def most_cost(budget: Budget, price_per_1000: float, per_search: int) -> float | None:
    """The most the budget's searches may cost in dollars; None without a price
    (BRAVE_PRICE_PER_1000=0)."""
    return most_queries(budget, per_search) * price_per_1000 / 1000 if price_per_1000 else None


def tokens_for(window: int) -> int:
    """The tokens bound for a model served with this window."""
    return window * WINDOWS_OF_TOKENS


@dataclass
class Spent:
    """What the run spent so far; the command's --json prints it as it is."""

    searches: int = 0
    searches_cached: int = 0
    """Searches the cache answered: no Brave query spent."""
    pages: int = 0
    """Pages read (their text reached the model)."""
    prompt_tokens: int = 0
    completion_tokens: int = 0
    started: float = field(default_factory=time.monotonic)
    until: float | None = None
    """When a snapshot was taken: its seconds stay what they were then."""

    @property
    def seconds(self) -> float:
        return round((self.until or time.monotonic()) - self.started, 1)

    def snapshot(self) -> Spent:
        return replace(self, until=time.monotonic())

    @property
    def tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens

    def reached(self, budget: Budget) -> Bound | None:
        """The bound of the whole run this spending reached, if any: its time, then its
        tokens (the searches and pages are checked where one is about to be spent)."""
        if self.seconds >= budget.minutes * 60:
            return Bound.MINUTES
        if self.tokens >= budget.tokens:
            return Bound.TOKENS
        return None
