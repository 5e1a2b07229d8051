"""The Server-Sent Events of a turn, as the page reads them (`data: {"type": ...}`)."""

from __future__ import annotations

from typing import Any, Literal, NotRequired, TypedDict

from app.chat.context import RefusedFact
from app.store.rows import ToolRefusal, Totals


class TextEvent(TypedDict):
    """A piece of the answer ("delta") or of the model's reasoning ("reasoning")."""

    type: Literal["delta", "reasoning"]
    text: str


class RetryEvent(TypedDict):
    """What the answer keeps when an attempt that already streamed is discarded and run
    again (a tool call llama.cpp could not parse): the page shows these in place of all it
    was sent so far."""

    type: Literal["retry"]
    text: str
    reasoning: str


class WarningEvent(TypedDict):
    type: Literal["warning"]
    message: str
    tools_refused: NotRequired[ToolRefusal]
    """The model's server refused the web tools and that is now remembered: the page marks
    the model in its picker."""


class CompressionEvent(TypedDict):
    type: Literal["compression"]
    messages: int
    summary_tokens: int
    facts_added: list[str]
    """Saved to memory.md; the page offers Undo for each."""
    facts_refused: list[RefusedFact]
    """Proposed but not saved, each with the reason (an address, web text, a limit)."""


class Source(TypedDict):
    """A source the answer may cite as [n]: a search result, or a page read."""

    url: str
    title: str
    domain: str
    date: str | None
    """The result's day (YYYY-MM-DD) when the engine gave one."""
    read: bool
    """Its page was read, not merely listed in the results."""


class ListedResult(TypedDict):
    """A search result as the trail shows it."""

    url: str
    title: str
    domain: str
    date: str | None


class SearchEvent(TypedDict):
    """A search: its query and language, and the results or what failed."""

    type: Literal["search"]
    query: str
    language: str
    results: NotRequired[list[ListedResult]]
    error: NotRequired[str]
    repeated: NotRequired[bool]
    """The same call was made earlier in the answer: its result was given again."""
    waited: NotRequired[float]
    """Seconds it waited for the search plan's rate (other searches went first)."""
    cached_age: NotRequired[float]
    """It came from the search cache, stored this many seconds ago: no query was spent."""
    queries: NotRequired[int]
    """The Brave queries it spent (two with both of our engines, 0 from the cache); an
    answer stored before it was said counts one a search."""
    left_out: NotRequired[bool]
    """Its results were not given to the model: no room was left in its window (`error`
    says how large the window is)."""
    without_tools: NotRequired[bool]
    """The service searched before the model answered: the model cannot call tools
    (app/chat/search_first.py)."""
    read: NotRequired[list[int]]
    """The source numbers of the results whose pages came read through Brave (its LLM
    Context): read without any request from this network to their servers."""


class SearchWaitEvent(TypedDict):
    """A search waiting for the search plan's rate, told while it waits; its search event
    follows and takes its place in the trail. Not kept with the answer."""

    type: Literal["search_wait"]
    query: str
    seconds: float
    """About how long it will wait (the searches ahead of it, at the plan's rate)."""


class FetchEvent(TypedDict):
    """A page read: its address, and the page or why it was not read."""

    type: Literal["fetch"]
    url: str
    title: NotRequired[str]
    chars: NotRequired[int]
    domain: NotRequired[str]
    seconds: NotRequired[float]
    source: NotRequired[int]
    """The page's source number, as the answer cites it."""
    unsolicited: NotRequired[bool]
    """The address came from neither a search result nor the user (a page gave it)."""
    refused: NotRequired[bool]
    error: NotRequired[str]
    repeated: NotRequired[bool]
    left_out: NotRequired[bool]
    """Fetched but not read: no room was left for it in the model's window (`error` says
    how large the window is)."""
    without_tools: NotRequired[bool]
    """The service read it before the model answered, as the model asked in plain text: the
    model cannot call tools (app/chat/search_first.py)."""


ToolEvent = SearchEvent | FetchEvent
Step = ToolEvent | WarningEvent
"""One step of the answer's trail: a tool call, or a call the model got wrong."""


class ErrorEvent(TypedDict):
    type: Literal["error"]
    kind: str
    message: str
    recovery: str
    retry_after: float | None
    restore: str | None
    """The user's message, given back to the input when the turn left no answer."""


class TurnUsage(TypedDict):
    """What the turn's requests cost, as the servers reported it."""

    prompt_tokens: int
    completion_tokens: int
    cached_tokens: int
    cost: float | None
    requests: int
    reported: bool
    """At least one request reported its usage."""


class BudgetReport(TypedDict, total=False):
    """For the context bar: what the turn budgeted against, the measured prompt of its
    first request (what the next turn builds on), the largest prompt of the turn, and the
    estimated share of each part of the context."""

    limit: int
    window: int | None
    """The window the model server serves, when it says."""
    window_note: str | None
    projected: int
    used: int | None
    peak: int | None
    parts: dict[str, int]


class DoneEvent(TypedDict):
    type: Literal["done"]
    status: str
    text: str
    """The answer as stored: numbered as it cites its sources (app/chat/numbering.py)."""
    usage: TurnUsage
    sources: list[Source]
    totals: Totals
    """The conversation's totals as the store sums them (app/store/turns.py)."""
    budget: BudgetReport
    truncated: bool
    timing: dict[str, float]
    at: str
    research: NotRequired[dict[str, Any]]
    """A research's answer: as the stored answer's `research` (app/chat/outcome.py)."""


class StoppedEvent(TypedDict):
    """The turn was stopped (Stop, the service shutting down, or its replica gone): what
    came is kept, marked interrupted. The last event of such a turn."""

    type: Literal["stopped"]


class ResearchPlanEvent(TypedDict):
    """A research turn's plan (app/api/research_turn.py): before any search, waiting for
    the user's Start or for `starts_in` seconds (None: for Start); then once it runs."""

    type: Literal["research_plan"]
    questions: list[str]
    started: bool
    starts_in: float | None
    queries_left: int | None
    """The Brave plan's queries left this month, as its last answer stated (None: unknown
    or uncapped)."""
    max_queries: int
    """The most Brave queries the budget's searches may send (two a search with both of
    our engines among SearXNG's defaults)."""
    max_cost: float | None
    """The most the budget's searches may cost, in dollars (None: no price set)."""


class ResearchEvent(TypedDict):
    """A research turn's step (`step`: "" when it goes on as before) and its counters
    against the budget."""

    type: Literal["research"]
    step: str
    about: str
    searches: int
    max_searches: int
    pages: int
    max_pages: int
    seconds: float
    max_seconds: float


Event = (
    TextEvent
    | RetryEvent
    | WarningEvent
    | CompressionEvent
    | SearchEvent
    | SearchWaitEvent
    | FetchEvent
    | ErrorEvent
    | DoneEvent
    | StoppedEvent
    | ResearchPlanEvent
    | ResearchEvent
)
