"""A tool result within the room the served window leaves, for every surface (the page's
turn and /v1): whole when it fits, cut at its end with a visible marker when it does not,
left out when too little room is left for it to mean anything. A result left out is
never reported as read (ToolRunner.left_out): the model is told so, and the trail."""

from __future__ import annotations

from dataclasses import dataclass

from app.chat import context
from app.chat.openai_wire import ChatMessage, FunctionTool
from app.webtext import PASSAGE_MARK

CUT_MARKER = "\n\n[... cut here: the rest would not fit in the model's context window]"
NO_ROOM = (
    "(This result did not fit in the model's context window and was left out: you have not "
    "read it. Answer with what you have.)"
)
MIN_RESULT_TOKENS = 64
"""Less room than this for a tool result and it is left out: a stub of a page misleads."""
UNTRUSTED_CLOSE = "\n</untrusted-data"


@dataclass(frozen=True)
class Fitted:
    """A tool result as the model gets it."""

    text: str
    left_out: int | None = None
    """The window (tokens) it was left out of for lack of room; None when it was given."""


def fitted(
    text: str,
    window: int | None,
    messages: list[ChatMessage],
    tools: list[FunctionTool],
    reserve: int,
) -> Fitted:
    """`text` within what `window` leaves after the request's messages, its tools'
    declarations and the reply's share (`reserve`); as it is when the window is unknown."""
    if window is None:
        return Fitted(text)
    used = history_tokens(messages) + context.estimate_tokens(str(tools))
    room = window - used - reserve - context.MESSAGE_OVERHEAD_TOKENS
    if context.estimate_tokens(text) <= room:
        return Fitted(text)
    if room < MIN_RESULT_TOKENS:
        return Fitted(NO_ROOM, left_out=window)
    return Fitted(cut(text, room))


def cut(text: str, room: int) -> str:
    """`text` cut at its end to `room` tokens (estimated as the budget is), with a visible
    marker, the closing line of its web-data block kept. Pages read as passages (Brave's
    LLM Context) lose whole passages: half a passage could say the opposite of the whole."""
    at = text.rfind(UNTRUSTED_CLOSE)
    body, closing = (text[:at], text[at:]) if at >= 0 else (text, "")
    spare = room - context.estimate_tokens(CUT_MARKER + closing)
    keep = max(0, len(body) * spare // max(1, context.estimate_tokens(body)))
    while keep > 0 and context.estimate_tokens(body[:keep]) > spare:
        keep = keep * 9 // 10
    return body[: whole_passages(body, keep)].rstrip() + CUT_MARKER + closing


def whole_passages(body: str, keep: int) -> int:
    """Where to cut instead of `keep`: before the passage the cut would split, if any."""
    start = body.rfind(PASSAGE_MARK, 0, keep)
    if start < 0:
        return keep
    ends = [at for at in (body.find(PASSAGE_MARK, start + 1), body.find("\n\n", start)) if at >= 0]
    end = min(ends, default=len(body))
    return start if end > keep else keep


def history_tokens(messages: list[ChatMessage]) -> int:
    """The messages' estimated size, content parts read as their text."""
    return context.message_tokens(
        [{"content": message_text(m), "tool_calls": m.get("tool_calls")} for m in messages]
    )


def message_text(message: ChatMessage) -> str:
    """A message's text: a string, or the text of its content parts."""
    content = message.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(part.get("text") or "" for part in content if part["type"] == "text")
    return ""
