"""How a model call fails: the kinds of failure, the error that carries one, and the two
translations into it, of the server's error answers (classify) and of the HTTP library's
exceptions (http_failure). Each kind decides the recovery the page offers
(docs/architecture.md, "Errors").
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from enum import StrEnum
from typing import Any

import httpx
from httpx_sse import SSEError

from app.errors import ServiceError


class Failure(StrEnum):
    """The kinds of failure, each with the recovery the page offers (docs/architecture.md)."""

    AUTH = "auth"
    RATE_LIMIT = "rate_limit"
    CONTENT_FILTER = "content_filter"
    CONTEXT_OVERFLOW = "context_overflow"
    NETWORK = "network"
    UPSTREAM = "upstream"
    TOOLS_UNSUPPORTED = "tools_unsupported"
    INTERNAL = "internal"  # a failure of the chat service itself, not of the model server

    @property
    def recovery(self) -> str:
        return RECOVERIES.get(self, "retry")


RECOVERIES = {
    Failure.AUTH: "fix_settings",
    Failure.RATE_LIMIT: "retry_later",
    Failure.CONTENT_FILTER: "rewind",
    Failure.CONTEXT_OVERFLOW: "compress_and_retry",
}


class LLMError(ServiceError):
    """A failed model call, with the kind that decides its recovery (docs/architecture.md).
    The web layer answers it with 502: the model server, upstream, failed."""

    status = 502

    def __init__(
        self,
        kind: Failure,
        message: str,
        retry_after: float | None = None,
        *,
        tools_refused: bool = False,
    ) -> None:
        super().__init__(message)
        self.kind = kind
        self.message = message
        self.retry_after = retry_after
        self.tools_refused = tools_refused
        """The server refused the tool declarations themselves, as it will every time (not
        a model output that failed to parse as a tool call, which may parse next time)."""


CONTEXT_OVERFLOW = re.compile(
    r"context length|context size|context window|maximum context|too many tokens|"
    r"exceed_context|context_length_exceeded|prompt is too long|"
    # LM Studio's llama.cpp engine: "Cannot truncate prompt with n_keep (15028) >= n_ctx (7424)"
    r"n_keep.*n_ctx",
    re.I,
)
CONTENT_FILTER = re.compile(r"content.?(filter|policy|management)|safety|moderation", re.I)
# llama.cpp accepts tool declarations for any model, then fails with a 500 (or an error
# chunk in the stream) when the model's output does not parse as its tool-call format.
TOOL_OUTPUT_UNPARSED = re.compile(
    r"does not match the expected .*format|failed to parse tool", re.I
)
TOOLS_UNSUPPORTED = re.compile(
    r"does not support tools|tools? (are|is) not supported|tool.?choice.*not supported|"
    r"unsupported.*tools|tools.*unsupported|function calling is not|"
    # vLLM started without a tool parser: '"auto" tool choice requires
    # --enable-auto-tool-choice and --tool-call-parser to be set' (400)
    r"enable-auto-tool-choice",
    re.I,
)


def error_text(body: Any) -> str:
    """The message of an error body (JSON, decoded, or the text when it was not JSON)."""
    if isinstance(body, dict):
        error = body.get("error", body)
        if isinstance(error, dict):
            return str(error.get("message") or error.get("detail") or json.dumps(error))
        return str(error)
    return str(body or "")


def classify(status: int, body: Any, headers: httpx.Headers | Mapping[str, str]) -> LLMError:
    """The failure kind of an HTTP error from the model server."""
    text = error_text(body)
    code = ""
    if isinstance(body, dict) and isinstance(body.get("error"), dict):
        code = f"{body['error'].get('code', '')} {body['error'].get('type', '')}"
    if status in (401, 403):
        return LLMError(Failure.AUTH, f"the model server refused the API key ({status}): {text}")
    if status == 429:
        retry = headers.get("retry-after")
        seconds = float(retry) if retry and retry.replace(".", "", 1).isdigit() else None
        return LLMError(Failure.RATE_LIMIT, f"rate limited by the model server: {text}", seconds)
    if CONTEXT_OVERFLOW.search(f"{code} {text}"):
        return LLMError(
            Failure.CONTEXT_OVERFLOW, f"the conversation is too long for the model: {text}"
        )
    if CONTENT_FILTER.search(f"{code} {text}"):
        return LLMError(Failure.CONTENT_FILTER, f"the model server refused the content: {text}")
    if status in (400, 404, 422) and TOOLS_UNSUPPORTED.search(text):
        return LLMError(
            Failure.TOOLS_UNSUPPORTED,
            f"the model does not accept tools: {text}",
            tools_refused=True,
        )
    if TOOL_OUTPUT_UNPARSED.search(text):
        return LLMError(Failure.TOOLS_UNSUPPORTED, f"the model cannot call tools here: {text}")
    return LLMError(Failure.UPSTREAM, f"the model server answered {status}: {text}")


HTTP_ERRORS = (httpx.HTTPError, httpx.StreamError)
"""What the HTTP library raises (StreamError, a misuse of a body, is no HTTPError)."""


def http_failure(exc: httpx.HTTPError | httpx.StreamError, base_url: str) -> LLMError:
    """What an exception of the HTTP library means for a model call: the one translation,
    made where the client calls the library (aiohttp's exceptions arrive as httpx's,
    app/transport.py). Refused, timed out and cut short stay three messages: the page
    tells a cut answer by its words (message.js, CUT_SHORT)."""
    if isinstance(exc, SSEError):
        return LLMError(
            Failure.UPSTREAM, f"the model server did not answer with an event stream: {exc}"
        )
    if isinstance(exc, httpx.ConnectError):
        return LLMError(Failure.NETWORK, f"cannot reach the model server at {base_url}: {exc}")
    if isinstance(exc, httpx.TimeoutException):
        return LLMError(Failure.NETWORK, f"the model server timed out ({exc.__class__.__name__})")
    if isinstance(exc, httpx.TransportError | httpx.StreamError):
        return LLMError(
            Failure.NETWORK,
            f"lost the connection to the model server: {exc or exc.__class__.__name__}",
        )
    return LLMError(Failure.NETWORK, f"the model server is unreachable: {exc}")
