"""The OpenAI Chat Completions shapes of /v1 (docs/openai.md): the request body as the
official SDK sends it, errors as {"error": {message, type, param, code}}, and the
chat.completion and chat.completion.chunk objects."""

from __future__ import annotations

import secrets
import time
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StrictBool

from app.chat.completion import Citation, CompletionEvent
from app.config import LOCALE
from app.model.tool_calls import ToolCall
from app.model.usage import Usage

OWN_FIELDS = frozenset(
    {
        "model",
        "messages",
        "stream",
        "stream_options",
        "tools",
        "web_search_options",
        "n",
        "web_search",
        "search_language",
        "search_activity",
        "sources_in_text",
    }
)
"""Fields read here; every other one is the model server's (temperature, stop, seed...)."""
DROPPED_FIELDS = frozenset({"store", "metadata", "user", "service_tier", "prediction"})
"""OpenAI's own platform's fields, which a model server would not know."""
ERROR_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "invalid_request_error",
    409: "invalid_request_error",
    413: "invalid_request_error",
    415: "invalid_request_error",
    421: "invalid_request_error",
    429: "rate_limit_error",
}


class Message(BaseModel):
    """One message of the client's history, kept as sent (its other fields pass on)."""

    model_config = ConfigDict(extra="allow")
    role: Literal["system", "developer", "user", "assistant", "tool", "function"]
    content: str | list[dict[str, Any]] | None = None


class Function(BaseModel):
    model_config = ConfigDict(extra="allow")
    name: Annotated[str, Field(min_length=1, max_length=64)]


class Tool(BaseModel):
    """A client's function tool, passed on to the model as declared."""

    model_config = ConfigDict(extra="allow")
    type: Literal["function"]
    function: Function


class StreamOptions(BaseModel):
    model_config = ConfigDict(extra="allow")
    include_usage: StrictBool = False


class Approximate(BaseModel):
    model_config = ConfigDict(extra="allow")
    country: Annotated[str, Field(pattern=r"^[A-Za-z]{2}$")] | None = None
    """ISO 3166-1 alpha-2, as OpenAI's user_location takes it."""


class UserLocation(BaseModel):
    model_config = ConfigDict(extra="allow")
    approximate: Approximate | None = None


class WebSearchOptions(BaseModel):
    model_config = ConfigDict(extra="allow")
    user_location: UserLocation | None = None


class ChatCompletionBody(BaseModel):
    """POST /v1/chat/completions. Beside OpenAI's fields, four of ours: `web_search`
    (false: no web tools for this request), `search_language` (the results' language,
    'de' or 'de-AT'; the country may come from web_search_options.user_location) and
    `search_activity` (false: what was searched and read is not told as reasoning) and
    `sources_in_text` (true: the cited sources listed as links after the answer, for a
    client that shows no annotations)."""

    model_config = ConfigDict(extra="allow")
    model: Annotated[str, Field(min_length=1, max_length=200)]
    messages: Annotated[list[Message], Field(min_length=1, max_length=2000)]
    stream: StrictBool = False
    stream_options: StreamOptions | None = None
    tools: Annotated[list[Tool], Field(max_length=128)] | None = None
    web_search_options: WebSearchOptions | None = None
    n: Annotated[int, Field(ge=1, le=1)] | None = None
    web_search: StrictBool = True
    search_language: Annotated[str, Field(pattern=LOCALE.pattern)] | None = None
    search_activity: StrictBool = True
    sources_in_text: StrictBool = False

    def passed_on(self) -> dict[str, Any]:
        """The model server's own fields, as the client sent them."""
        extra = self.model_extra or {}
        return {k: v for k, v in extra.items() if k not in OWN_FIELDS | DROPPED_FIELDS}

    @property
    def country(self) -> str | None:
        options = self.web_search_options
        where = options.user_location if options else None
        return where.approximate.country if where and where.approximate else None


def error_body(
    status: int, message: str, param: str | None = None, code: str | None = None
) -> dict[str, Any]:
    """OpenAI's error object for a status of ours."""
    codes = {404: "model_not_found", 413: "request_too_large", 401: "invalid_api_key"}
    code = code or codes.get(status)
    kind = ERROR_TYPES.get(status, "server_error" if status >= 500 else "invalid_request_error")
    return {"error": {"message": message, "type": kind, "param": param, "code": code}}


ERROR_SCHEMA = {
    "type": "object",
    "required": ["error"],
    "properties": {
        "error": {
            "type": "object",
            "required": ["message", "type", "param", "code"],
            "properties": {
                "message": {"type": "string"},
                "type": {"type": "string"},
                "param": {"type": ["string", "null"]},
                "code": {"type": ["string", "null"]},
            },
        }
    },
}


def error_responses(*statuses: int) -> dict[int | str, dict[str, Any]]:
    return {
        s: {
            "description": "an OpenAI-shaped error",
            "content": {"application/json": {"schema": ERROR_SCHEMA}},
        }
        for s in statuses
    }


def usage_object(usage: Usage) -> dict[str, Any]:
    return {
        "prompt_tokens": usage.prompt_tokens,
        "completion_tokens": usage.completion_tokens,
        "total_tokens": usage.prompt_tokens + usage.completion_tokens,
        "prompt_tokens_details": {"cached_tokens": usage.cached_tokens},
    }


def annotation(citation: Citation) -> dict[str, Any]:
    """OpenAI's url_citation, as Chat Completions nests it."""
    return {
        "type": "url_citation",
        "url_citation": {
            "url": citation.url,
            "title": citation.title,
            "start_index": citation.start,
            "end_index": citation.end,
        },
    }


def sources_object(event: CompletionEvent) -> list[dict[str, Any]]:
    """Every result and page of the answer, numbered as `[n]` cites them (an extension:
    `read` marks a page read, not merely listed)."""
    return [
        {"number": n, "url": s["url"], "title": s["title"], "date": s["date"], "read": s["read"]}
        for n, s in enumerate(event.sources, 1)
    ]


def tool_call_object(call: ToolCall, index: int | None = None) -> dict[str, Any]:
    shaped: dict[str, Any] = {
        "id": call.id,
        "type": "function",
        "function": {"name": call.name, "arguments": call.arguments},
    }
    return shaped if index is None else {"index": index, **shaped}


class Chunks:
    """The chat.completion.chunk objects of one streamed answer."""

    def __init__(self, model: str, include_usage: bool) -> None:
        self.ident = f"chatcmpl-{secrets.token_hex(12)}"
        self.created = int(time.time())
        self.model = model
        self.include_usage = include_usage

    def chunk(self, delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
        shaped: dict[str, Any] = {
            "id": self.ident,
            "object": "chat.completion.chunk",
            "created": self.created,
            "model": self.model,
            "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}],
        }
        if self.include_usage:
            shaped["usage"] = None  # as OpenAI: null on each chunk but the last
        return shaped

    def first(self) -> dict[str, Any]:
        return self.chunk({"role": "assistant", "content": ""})

    def of(self, event: CompletionEvent) -> list[dict[str, Any]]:
        """The chunks of one event of the answer."""
        if event.type == "delta":
            return [self.chunk({"content": event.text})]
        if event.type == "reasoning":
            return [self.chunk({"reasoning_content": event.text})]
        if event.type == "tool_calls":
            calls = [tool_call_object(c, i) for i, c in enumerate(event.tool_calls)]
            return [self.chunk({"tool_calls": calls})]
        delta: dict[str, Any] = {}
        if event.citations:
            delta["annotations"] = [annotation(c) for c in event.citations]
        if event.sources:
            delta["sources"] = sources_object(event)
        last = [self.chunk(delta, event.finish_reason)]
        if self.include_usage:
            usage = usage_object(event.usage or Usage())
            last.append({**self.chunk({}), "choices": [], "usage": usage})
        return last


def completion_object(model: str, events: list[CompletionEvent]) -> dict[str, Any]:
    """The whole answer as one chat.completion."""
    text = "".join(e.text for e in events if e.type == "delta")
    reasoning = "".join(e.text for e in events if e.type == "reasoning")
    calls = [c for e in events if e.type == "tool_calls" for c in e.tool_calls]
    done = events[-1]
    message: dict[str, Any] = {"role": "assistant", "content": text or None, "refusal": None}
    if reasoning:
        message["reasoning_content"] = reasoning
    if calls:
        message["tool_calls"] = [tool_call_object(c) for c in calls]
    message["annotations"] = [annotation(c) for c in done.citations]
    if done.sources:
        message["sources"] = sources_object(done)
    shaped: dict[str, Any] = {
        "id": f"chatcmpl-{secrets.token_hex(12)}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [
            {"index": 0, "message": message, "logprobs": None, "finish_reason": done.finish_reason}
        ],
    }
    if done.usage is not None:
        shaped["usage"] = usage_object(done.usage)
    return shaped
