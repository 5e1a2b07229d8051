"""A client for any OpenAI-compatible model server: streaming, tool calls, usage, errors.

Servers differ (llama.cpp, Ollama, vLLM, LM Studio, hosted APIs); the differences that
matter are handled here and nowhere else: where reasoning text arrives, how usage counts
cached tokens, how an error names its cause, and where the served window can be read.
"""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import httpx
from httpx_sse import aconnect_sse

FAILURE_KINDS = (
    "auth",
    "rate_limit",
    "content_filter",
    "context_overflow",
    "network",
    "upstream",
    "tools_unsupported",
)
CONTEXT_OVERFLOW = re.compile(
    r"context length|context size|context window|maximum context|too many tokens|"
    r"exceed_context|context_length_exceeded|prompt is too long",
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
    r"unsupported.*tools|tools.*unsupported|function calling is not",
    re.I,
)


class LLMError(Exception):
    """A failed model call, with the kind that decides its recovery (SPEC 4.5)."""

    def __init__(self, kind: str, message: str, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.kind = kind
        self.message = message
        self.retry_after = retry_after


def error_text(body: Any) -> str:
    if isinstance(body, dict):
        error = body.get("error", body)
        if isinstance(error, dict):
            return str(error.get("message") or error.get("detail") or json.dumps(error))
        return str(error)
    return str(body or "")


def classify(status: int, body: Any, headers: httpx.Headers | dict[str, str]) -> LLMError:
    """The failure kind of an HTTP error from the model server."""
    text = error_text(body)
    code = ""
    if isinstance(body, dict) and isinstance(body.get("error"), dict):
        code = f"{body['error'].get('code', '')} {body['error'].get('type', '')}"
    if status in (401, 403):
        return LLMError("auth", f"the model server refused the API key ({status}): {text}")
    if status == 429:
        retry = headers.get("retry-after")
        seconds = float(retry) if retry and retry.replace(".", "", 1).isdigit() else None
        return LLMError("rate_limit", f"rate limited by the model server: {text}", seconds)
    if CONTEXT_OVERFLOW.search(f"{code} {text}"):
        return LLMError("context_overflow", f"the conversation is too long for the model: {text}")
    if CONTENT_FILTER.search(f"{code} {text}"):
        return LLMError("content_filter", f"the model server refused the content: {text}")
    if status in (400, 404, 422) and TOOLS_UNSUPPORTED.search(text):
        return LLMError("tools_unsupported", f"the model does not accept tools: {text}")
    if TOOL_OUTPUT_UNPARSED.search(text):
        return LLMError("tools_unsupported", f"the model cannot call tools here: {text}")
    return LLMError("upstream", f"the model server answered {status}: {text}")


@dataclass
class Usage:
    """Token counts normalised across servers; cost only when the server reported one."""

    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached_tokens: int = 0
    cost: float | None = None


def normalize_usage(raw: dict[str, Any] | None, floor_prompt_tokens: int = 0) -> Usage | None:
    """One shape for the three seen in the wild.

    Cached tokens come as ``cache_read_input_tokens`` (Anthropic-style),
    ``prompt_tokens_details.cached_tokens`` (OpenAI-style) or not at all. Some servers
    count only the uncached part in ``prompt_tokens``: when it is smaller than the
    cached count, the two are added. The local estimate is a floor.
    """
    if not raw:
        return None
    details = raw.get("prompt_tokens_details") or {}
    cached = raw.get("cache_read_input_tokens") or details.get("cached_tokens") or 0
    prompt = int(raw.get("prompt_tokens") or raw.get("input_tokens") or 0)
    if prompt < cached:
        prompt += cached
    cost = raw.get("cost")
    return Usage(
        prompt_tokens=max(prompt, floor_prompt_tokens),
        completion_tokens=int(raw.get("completion_tokens") or raw.get("output_tokens") or 0),
        cached_tokens=int(cached),
        cost=float(cost) if isinstance(cost, int | float) else None,
    )


@dataclass
class ToolCall:
    id: str
    name: str
    arguments: str = ""


@dataclass
class ToolCallAssembler:
    """Tool calls rebuilt from streamed deltas: keyed by ``index``, arguments in pieces."""

    calls: dict[int, ToolCall] = field(default_factory=dict)

    def add(self, delta: dict[str, Any]) -> None:
        index = delta.get("index", len(self.calls))
        function = delta.get("function") or {}
        call = self.calls.get(index)
        if call is None:
            call = self.calls[index] = ToolCall(id=delta.get("id") or f"call_{index}", name="")
        if delta.get("id"):
            call.id = delta["id"]
        call.name += function.get("name") or ""
        call.arguments += function.get("arguments") or ""

    def result(self) -> list[ToolCall]:
        return [self.calls[i] for i in sorted(self.calls)]


@dataclass
class Event:
    """One thing the stream said: ``reasoning`` / ``delta`` text, ``tool_calls``,
    ``finish`` (with the reason) or ``usage``."""

    type: str
    text: str = ""
    tool_calls: list[ToolCall] = field(default_factory=list)
    usage: dict[str, Any] | None = None


class ModelClient:
    """One OpenAI-compatible server (``LLM_BASE_URL`` ends with ``/v1``)."""

    def __init__(self, base_url: str, api_key: str = "", *, timeout: float = 300.0) -> None:
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self.base_url = base_url.rstrip("/")
        self.http = httpx.AsyncClient(headers=headers, timeout=httpx.Timeout(timeout, connect=10.0))

    async def aclose(self) -> None:
        await self.http.aclose()

    async def stream(self, payload: dict[str, Any]) -> AsyncIterator[Event]:
        """Stream one completion. Closing this iterator closes the upstream connection,
        which is how Stop reaches the model server."""
        body = {**payload, "stream": True, "stream_options": {"include_usage": True}}
        tools = ToolCallAssembler()
        finish = None
        try:
            async with aconnect_sse(
                self.http, "POST", f"{self.base_url}/chat/completions", json=body
            ) as source:
                response = source.response
                if response.status_code != 200:
                    await response.aread()
                    raise classify(response.status_code, safe_json(response), response.headers)
                async for sse in source.aiter_sse():
                    if sse.data.strip() == "[DONE]":
                        break
                    chunk = json.loads(sse.data)
                    if chunk.get("error"):
                        raise classify(500, chunk, {})
                    for event in chunk_events(chunk, tools):
                        if event.type == "finish":
                            finish = event.text
                        else:
                            yield event
        except httpx.TimeoutException as exc:
            raise LLMError(
                "network", f"the model server timed out ({exc.__class__.__name__})"
            ) from exc
        except (httpx.TransportError, httpx.StreamError) as exc:
            raise LLMError(
                "network",
                f"lost the connection to the model server: {exc or exc.__class__.__name__}",
            ) from exc
        if tools.calls:
            yield Event("tool_calls", tool_calls=tools.result())
        yield Event("finish", text=finish or "stop")

    async def complete(self, payload: dict[str, Any]) -> tuple[str, dict[str, Any] | None]:
        """One non-streamed completion: its text and raw usage."""
        try:
            response = await self.http.post(
                f"{self.base_url}/chat/completions", json={**payload, "stream": False}
            )
        except httpx.HTTPError as exc:
            raise LLMError("network", f"the model server is unreachable: {exc}") from exc
        if response.status_code != 200:
            raise classify(response.status_code, safe_json(response), response.headers)
        data = response.json()
        message = (data.get("choices") or [{}])[0].get("message") or {}
        return message.get("content") or "", data.get("usage")

    async def models(self) -> list[str] | None:
        """Model ids the server lists: empty when it lists none, None when unreachable."""
        try:
            response = await self.http.get(f"{self.base_url}/models", timeout=5)
        except httpx.HTTPError:
            return None
        try:
            return [m["id"] for m in response.json().get("data", []) if m.get("id")]
        except (ValueError, KeyError, TypeError, AttributeError):
            return []

    async def served_window(self, model: str) -> int | None:
        """The context window the server actually runs with, where it says so:
        llama.cpp's ``/props`` ``n_ctx``, Ollama's ``/api/show`` ``num_ctx``."""
        root = self.base_url.removesuffix("/v1")
        try:
            props = await self.http.get(f"{root}/props", timeout=5)
            if props.status_code == 200:
                data = props.json()
                n_ctx = data.get("n_ctx") or (data.get("default_generation_settings") or {}).get(
                    "n_ctx"
                )
                if n_ctx:
                    return int(n_ctx)
            show = await self.http.post(f"{root}/api/show", json={"model": model}, timeout=5)
            if show.status_code == 200:
                match = re.search(r"num_ctx\s+(\d+)", show.json().get("parameters") or "")
                if match:
                    return int(match.group(1))
        except (httpx.HTTPError, ValueError, TypeError, AttributeError):
            return None
        return None


def safe_json(response: httpx.Response) -> Any:
    try:
        return response.json()
    except ValueError:
        return response.text[:500]


def chunk_events(chunk: dict[str, Any], tools: ToolCallAssembler) -> list[Event]:
    """Events of one streamed chunk; tool-call deltas go to the assembler."""
    events = []
    if chunk.get("usage"):
        events.append(Event("usage", usage=chunk["usage"]))
    for choice in chunk.get("choices") or []:
        delta = choice.get("delta") or {}
        reasoning = delta.get("reasoning_content") or delta.get("reasoning")
        if reasoning:
            events.append(Event("reasoning", text=reasoning))
        if delta.get("content"):
            events.append(Event("delta", text=delta["content"]))
        for call in delta.get("tool_calls") or []:
            tools.add(call)
        if choice.get("finish_reason"):
            events.append(Event("finish", text=choice["finish_reason"]))
    return events
