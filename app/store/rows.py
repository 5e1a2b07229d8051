"""The data of chat.db as the rest of the service reads it (a conversation, its messages,
the list, a turn's outcome, a model's refusal of the tools), and the mappers between those
and the rows of its tables (docs/architecture.md)."""

from __future__ import annotations

import re
from datetime import UTC, datetime
from typing import Any, Literal, NamedTuple, NotRequired, TypeAlias

# pydantic reads a TypedDict on Python 3.11 only from typing_extensions (/api/config answers
# the tool refusals).
from typing_extensions import TypedDict

from app import jsoncodec
from app.store.errors import Damaged, InvalidId
from app.store.nul import json_text

ID_PATTERN = r"^[a-z0-9][a-z0-9-]{5,63}$"
ID = re.compile(ID_PATTERN)
NEW_TITLE = "New conversation"

StoredSettings: TypeAlias = dict[str, Any]
"""A conversation's settings as stored (JSON): app/chat reads them over its defaults; the
store does not read into them, but for the model a turn picked. Free-form here: their
fields are app/chat's (`ChatSettings`), and a stored key no setting has any more is kept."""
Totals: TypeAlias = dict[str, int | float]
"""What a conversation's turns used, added up by name (tokens, searches, pages read)."""
EditAt: TypeAlias = int | Literal["last"]
"""The user message an edit replaces: its position in the log, or the last one."""
ContextReport: TypeAlias = dict[str, Any]
"""The context budget's report of the last turn (JSON), kept as the turn gave it. Free-form
here: its shape is app/chat's (`BudgetReport`), which the store does not know."""


class Message(TypedDict):
    """One entry of the log. An answer also carries its activity, sources, usage, status,
    timing, warnings and error, stored as they were streamed."""

    role: str
    content: str
    created: NotRequired[str]
    status: NotRequired[str]
    digest: NotRequired[str]
    """An answer's tool results in short (titles, addresses, dates, snippets, the start of
    each page read), wrapped as web data: what a follow-up question needs of its sources."""
    versions: NotRequired[VersionMark]
    """On a user message whose turn has versions (never stored: read from turn_versions)."""


class VersionMark(TypedDict):
    index: int
    """The version shown, from 1."""
    count: int


class Conversation(TypedDict):
    id: str
    title: str
    created: str
    updated: str
    settings: StoredSettings
    messages: list[Message]
    summary: str
    summarized: int
    """How many of the oldest messages the summary stands for."""
    title_from_message: NotRequired[bool]
    totals: NotRequired[Totals]
    usage: NotRequired[dict[str, int]]
    """The last measured prompt, and how many messages it covered."""
    budget: NotRequired[ContextReport]


class TailSnapshot(TypedDict):
    """A turn's version set aside (turn_versions.tail): its messages as stored (role,
    content, details, digest), the versions of the turns after it (position, slot, tail),
    and the conversation's measured prompt and context report when they were of this tail."""

    messages: list[tuple[str, str, str, str | None]]
    later: list[tuple[int, int, str]]
    usage: str | None
    budget: str | None


class Entry(TypedDict):
    """A conversation in the list."""

    id: str
    title: str
    created: str
    updated: str
    running: bool
    """A turn is answering in it now (on any replica): the page can reattach to it."""
    damaged: NotRequired[str]


class OutcomeWrite(TypedDict):
    """What a turn leaves in its conversation, written in one transaction."""

    position: int
    """Where the answer goes: right after the user's message."""
    answer: Message | None
    rewind: bool
    """Take the user's message back out (a turn that failed before any output)."""
    summary: str | None
    summarized: int | None
    totals: Totals
    """Added to the conversation's totals."""
    budget: ContextReport | None
    usage: dict[str, int] | None


class ToolRefusal(TypedDict):
    """A model whose server refused the tool declarations: it is offered none until the
    user clears this, instead of each turn being refused and sent again."""

    model: str
    at: str
    reason: str
    """The model server's words."""


class ConversationRow(NamedTuple):
    """A row of the conversations table, its JSON columns still text."""

    rowid: int
    id: str
    title: str
    title_from_message: int
    created: str
    updated: str
    settings: str
    summary: str
    summarized: int
    totals: str | None
    usage: str | None
    budget: str | None


CONVERSATION_COLUMNS = ", ".join(ConversationRow._fields)


def now() -> str:
    # Microseconds: the conversation list sorts on it, and edits come within a second.
    return datetime.now(UTC).isoformat(timespec="microseconds")


def check_id(conversation_id: str) -> str:
    if not isinstance(conversation_id, str) or not ID.fullmatch(conversation_id):
        raise InvalidId(f"invalid conversation id: {conversation_id!r}")
    return conversation_id


def settings_of(row: ConversationRow) -> StoredSettings:
    try:
        settings: StoredSettings = jsoncodec.loads(row.settings)
    except ValueError as exc:
        raise Damaged(f"conversation {row.id}: settings damaged ({exc})") from None
    return settings


def conversation_from_row(row: ConversationRow) -> Conversation:
    """Its messages are left to the caller; ValueError if a JSON column is not JSON."""
    conversation: Conversation = {
        "id": row.id,
        "title": row.title,
        "created": row.created,
        "updated": row.updated,
        "settings": jsoncodec.loads(row.settings),
        "messages": [],
        "summary": row.summary,
        "summarized": row.summarized,
    }
    if row.title_from_message:
        conversation["title_from_message"] = True
    if row.totals is not None:
        conversation["totals"] = jsoncodec.loads(row.totals)
    if row.usage is not None:
        conversation["usage"] = jsoncodec.loads(row.usage)
    if row.budget is not None:
        conversation["budget"] = jsoncodec.loads(row.budget)
    return conversation


def brief(role: str, content: str, digest: str | None) -> Message:
    """A message as a turn reads it: role, text and, for an answer that used tools, its digest."""
    message: Message = {"role": role, "content": content}
    if digest:
        message["digest"] = digest
    return message


def detailed(role: str, content: str, digest: str | None, details: str) -> Message:
    """A message with its details (activity, sources, status...); ValueError if they are
    not JSON."""
    message: Message = {**brief(role, content, digest), **jsoncodec.loads(details)}
    return message


def message_columns(message: Message) -> tuple[str, str, str, str | None]:
    """A message as the messages table holds it: role, content, details (JSON), digest."""
    details = {k: v for k, v in message.items() if k not in ("role", "content", "digest")}
    return message["role"], message["content"], json_text(details), message.get("digest")


def measured_messages(usage: str) -> int:
    """How many messages a stored measured prompt (the usage column) covered."""
    return int(jsoncodec.loads(usage).get("measured_messages", 0))
