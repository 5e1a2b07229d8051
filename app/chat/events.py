"""The Server-Sent Events of a turn, as the page reads them (`data: {"type": ...}`)."""

from __future__ import annotations

from typing import Any, Literal, NotRequired, TypedDict

from app.chat.context import RefusedFact
from app.store.rows import ToolRefusal


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


class ToolEvent(TypedDict):
    """A search or a page read: its query or address, and what came back."""

    type: Literal["search", "fetch"]
    query: NotRequired[str]
    url: NotRequired[str]


class ErrorEvent(TypedDict):
    type: Literal["error"]
    kind: str
    message: str
    recovery: str
    retry_after: float | None
    restore: str | None
    """The user's message, given back to the input when the turn left no answer."""


class DoneEvent(TypedDict):
    type: Literal["done"]
    status: str
    text: str
    """The answer as stored: numbered as it cites its sources (app/chat/numbering.py)."""
    usage: dict[str, Any]
    sources: list[dict[str, Any]]
    totals: dict[str, Any]
    budget: dict[str, Any]
    truncated: bool
    timing: dict[str, float]
    at: str


Event = (
    TextEvent | RetryEvent | WarningEvent | CompressionEvent | ToolEvent | ErrorEvent | DoneEvent
)
