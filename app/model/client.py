"""A client for any OpenAI-compatible model server: streaming, tool calls, usage, errors.

Servers differ (llama.cpp, Ollama, vLLM, LM Studio, hosted APIs); the differences that
matter are handled in this package and nowhere else: where reasoning text arrives
(shaped_events), how usage counts cached tokens (usage.py), how an error names its cause
(failures.py), how a tool call written as text looks (tool_calls.py) and where the served
window can be read (windows.py).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable
from contextlib import AsyncExitStack
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Literal, TypeVar, cast

import httpx
from httpx_sse import ServerSentEvent, aconnect_sse

from app import config, jsoncodec
from app.model.bounds import (
    CONNECT_SECONDS,
    DRAIN_SECONDS,
    MODELS_PROBE_SECONDS,
    WINDOW_PROBE_SECONDS,
    Bounds,
    Limits,
    next_event,
)
from app.model.failures import HTTP_ERRORS, Failure, LLMError, classify, http_failure
from app.model.tool_calls import TextToolCalls, ToolCall, ToolCallAssembler, declared_tools
from app.model.usage import RawUsage
from app.model.windows import (
    PROBE_FAILURES,
    OllamaWindow,
    read_llama_cpp,
    read_lmstudio,
    read_ollama,
    read_vllm,
)
from app.model.wire import RequestBody, ServerObject
from app.transport import AiohttpTransport

T = TypeVar("T")

LARGE_REQUEST_CHARS = 200_000
"""A request whose messages hold more text than this is encoded in a thread."""
JSON_HEADERS = {"Content-Type": "application/json"}

ModelEventType = Literal["reasoning", "delta", "tool_calls", "finish", "usage"]


@dataclass
class ModelEvent:
    """One thing the stream said: ``reasoning`` / ``delta`` text, ``tool_calls``,
    ``finish`` (with the reason) or ``usage`` (once per request, before ``finish``).

    ``tool_calls`` with ``text`` set are calls the model wrote as text in its answer
    instead of as ``tool_calls`` (``text`` is what it wrote, never shown as a delta)."""

    type: ModelEventType
    text: str = ""
    tool_calls: list[ToolCall] = field(default_factory=list)
    usage: RawUsage | None = None


async def request_body(body: RequestBody) -> bytes:
    """The request's JSON. A long history (megabytes) is encoded in a thread, a message at
    a time: encoding it whole is one C call that holds the GIL, and so the event loop and
    every other stream."""
    messages = body.get("messages") or []
    if sum(len(str(m.get("content") or "")) for m in messages) < LARGE_REQUEST_CHARS:
        return jsoncodec.dumps(body)
    return await asyncio.to_thread(encode_in_parts, body)


def encode_in_parts(body: RequestBody) -> bytes:
    others = jsoncodec.dumps({k: v for k, v in body.items() if k != "messages"})[1:-1]
    parts = b",".join(jsoncodec.dumps(m) for m in body["messages"])
    return b"{" + others + (b"," if others else b"") + b'"messages":[' + parts + b"]}"


@dataclass(frozen=True)
class KeyRefused:
    """The model server's last refusal of our key, kept for Status: llama-server and some
    proxies list their models without a key, so the free checks can pass while every
    answer is refused."""

    model: str
    message: str
    at: datetime


class ModelClient:
    """One OpenAI-compatible server (``LLM_BASE_URL`` ends with ``/v1``)."""

    def __init__(self, base_url: str, api_key: str = "", *, limits: Limits | None = None) -> None:
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self.base_url = base_url.rstrip("/")
        self.limits = limits or Limits()
        self.ollama_windows: dict[str, OllamaWindow] = {}
        """What Ollama last said of each model's window (read_window), for the context bar."""
        self.template_tools: dict[str, bool | None] = {}
        """Whether llama.cpp's chat template for each model takes tools, as /props last said
        (read_window); None where it does not say."""
        self.key_refused: KeyRefused | None = None
        """Set by an answer refused for the key, cleared by the next one given."""
        # Reads are bounded by `limits` with deadlines of our own: httpx's read timeout
        # cannot tell the wait for the first byte from the wait between two events.
        self.http = httpx.AsyncClient(
            headers=headers,
            timeout=httpx.Timeout(None, connect=CONNECT_SECONDS),
            transport=AiohttpTransport(),
        )

    @classmethod
    def from_settings(cls, settings: config.Settings) -> ModelClient:
        return cls(
            settings.llm_base_url, settings.llm_api_key, limits=Limits.from_settings(settings)
        )

    async def aclose(self) -> None:
        await self.http.aclose()

    async def stream(self, payload: RequestBody) -> AsyncIterator[ModelEvent]:
        """Stream one completion. Closing this iterator closes the upstream connection,
        which is how Stop reaches the model server.

        The stream must end with a ``finish_reason`` or ``[DONE]``: one that just stops
        is a lost connection (kind ``network``), never a complete answer."""
        body = {**payload, "stream": True, "stream_options": {"include_usage": True}}
        tools = ToolCallAssembler()
        written = TextToolCalls(declared_tools(payload))
        usage: RawUsage | None = None
        finish: str | None = None
        bounds = Bounds(self.limits)
        try:
            async with AsyncExitStack() as stack:
                events = await self.open_stream(stack, bounds, body)
                idle = f"the model server sent nothing for {self.limits.idle:g} s "
                idle += "(LLM_IDLE_TIMEOUT)"
                while (sse := await next_event(bounds, events, idle)) is not None:
                    if sse.data.strip() == "[DONE]":
                        finish = finish or "stop"
                        await self.drain(events)
                        break
                    chunk = parse_chunk(sse.data)
                    # {"error": {...}}: OpenAI, vLLM, OpenRouter; {"object": "error", ...}:
                    # vLLM before its errors moved under "error".
                    if chunk.get("error") or chunk.get("object") == "error":
                        raise classify(500, chunk, {})
                    for event in chunk_events(chunk, tools):
                        if event.type == "finish":
                            finish = event.text
                        elif event.type == "usage":
                            # vLLM with continuous_usage_stats (or a gateway forcing it) sends
                            # a running total in every chunk: only the last one counts.
                            usage = event.usage
                        elif event.type == "delta":
                            if shown := written.feed(event.text):
                                yield ModelEvent("delta", text=shown)
                        else:
                            yield event
        except HTTP_ERRORS as exc:
            raise http_failure(exc, self.base_url) from exc
        finally:
            bounds.close()
        for event in stream_end(finish, usage, tools, written):
            yield event

    async def open_stream(
        self, stack: AsyncExitStack, bounds: Bounds, body: RequestBody
    ) -> AsyncIterator[ServerSentEvent]:
        """The request sent and its answer's events, open until `stack` closes; an error
        answer raised as the failure it names."""
        source = await bounds.step(
            self.limits.first_byte,
            stack.enter_async_context(
                aconnect_sse(
                    self.http,
                    "POST",
                    f"{self.base_url}/chat/completions",
                    content=await request_body(body),
                    headers=JSON_HEADERS,
                )
            ),
            silent=f"no answer within {self.limits.first_byte:g} s (LLM_FIRST_BYTE_TIMEOUT)",
        )
        response = source.response
        if response.status_code != 200:
            await bounds.step(
                self.limits.idle, response.aread(), silent="the error body did not arrive"
            )
            raise self.refused(body, response)
        self.key_refused = None
        return source.aiter_sse()

    def refused(self, body: dict[str, Any], response: httpx.Response) -> LLMError:
        """The failure an error answer names; a refused key is kept for Status."""
        error = classify(response.status_code, safe_json(response), response.headers)
        if error.kind is Failure.AUTH:
            model = str(body.get("model", ""))
            self.key_refused = KeyRefused(model, error.message, datetime.now(UTC))
        return error

    async def drain(self, events: AsyncIterator[ServerSentEvent]) -> None:
        """Read the body's end after [DONE], which usually came in the same packet: a
        response read to its end leaves its connection open for the next request, saving
        a connect per turn. A server that holds the body open is not waited for."""
        try:
            async with asyncio.timeout(DRAIN_SECONDS):
                async for _ in events:
                    pass
        except (TimeoutError, httpx.TransportError, httpx.StreamError):
            pass  # the answer was whole at [DONE]; this connection is simply not reused

    async def complete(self, payload: RequestBody) -> tuple[str, RawUsage | None]:
        """One non-streamed completion: its text and raw usage. Its first byte comes only
        with the whole answer, so only the total limit applies."""
        try:
            async with asyncio.timeout(self.limits.total):
                response = await self.http.post(
                    f"{self.base_url}/chat/completions",
                    content=await request_body({**payload, "stream": False}),
                    headers=JSON_HEADERS,
                )
        except TimeoutError:
            raise LLMError(
                Failure.UPSTREAM,
                f"no answer from the model server within {self.limits.total:g} s "
                "(LLM_TOTAL_TIMEOUT)",
            ) from None
        except HTTP_ERRORS as exc:
            raise http_failure(exc, self.base_url) from exc
        if response.status_code != 200:
            raise self.refused(payload, response)
        self.key_refused = None
        try:
            data = response.json()
            message = (data.get("choices") or [{}])[0].get("message") or {}
            text = message.get("content") or ""
            if not isinstance(text, str):
                raise TypeError("content is not text")
        except (ValueError, TypeError, AttributeError, IndexError) as exc:
            raise LLMError(
                Failure.UPSTREAM, f"the model server's answer is not a chat completion ({exc})"
            ) from exc
        return text, cast(RawUsage | None, data.get("usage"))

    async def get(self, path: str) -> httpx.Response:
        """GET one of the server's /v1 paths (``/models``), whatever its status; no answer
        is an LLMError. Bounded by the caller, with asyncio.timeout."""
        try:
            return await self.http.get(f"{self.base_url}{path}")
        except HTTP_ERRORS as exc:
            raise http_failure(exc, self.base_url) from exc

    async def models(self) -> list[str] | None:
        """Model ids the server lists: empty when it lists none, None when unreachable."""
        try:
            async with asyncio.timeout(self.limits.probe(MODELS_PROBE_SECONDS)):
                response = await self.get("/models")
        except (LLMError, TimeoutError):
            return None
        try:
            return [m["id"] for m in response.json().get("data", []) if m.get("id")]
        except (ValueError, KeyError, TypeError, AttributeError):
            return []

    async def served_window(self, model: str) -> int | None:
        """The context window the server actually runs with, where it says so:
        llama.cpp's ``/props``, Ollama's (OllamaWindow.served), LM Studio's loaded context
        length, vLLM's ``max_model_len``, each from an answer of that server's shape
        (windows.py). All the asks together take at most WINDOW_PROBE_SECONDS: a hung server
        costs the turn that, not more, and is asked again only after a while
        (Services.served_window)."""
        return await probe(self.limits.probe(WINDOW_PROBE_SECONDS), self.read_window(model))

    async def ollama_window(self, model: str, seconds: float) -> OllamaWindow | None:
        """What Ollama says of the model's window (windows.read_ollama) within `seconds`;
        None when this is not Ollama or it did not say."""
        return await probe(seconds, read_ollama(self.http, self.root, model))

    @property
    def root(self) -> str:
        """The server's own address, for the APIs it serves beside /v1."""
        return self.base_url.removesuffix("/v1")

    async def read_window(self, model: str) -> int | None:
        llama_cpp = await read_llama_cpp(self.http, self.root)
        if llama_cpp is not None:
            self.template_tools[model] = llama_cpp.takes_tools
            if llama_cpp.window is not None:
                return llama_cpp.window
        ollama = await read_ollama(self.http, self.root, model)
        if ollama is not None:
            self.ollama_windows[model] = ollama
            return ollama.served
        lmstudio = await read_lmstudio(self.http, self.root, model)
        if lmstudio is not None:
            return lmstudio
        return await read_vllm(self.http, self.base_url, model)


async def probe(seconds: float, asking: Awaitable[T]) -> T | None:
    """What a probe found within `seconds`, or None: a probe that fails (PROBE_FAILURES)
    only leaves the thing unknown."""
    try:
        async with asyncio.timeout(seconds):
            return await asking
    except PROBE_FAILURES:
        return None


def stream_end(
    finish: str | None, usage: RawUsage | None, tools: ToolCallAssembler, written: TextToolCalls
) -> list[ModelEvent]:
    """The events after the stream's last chunk: the content held back, the usage, the
    tool calls and the finish; a stream that ended without finishing is a failure."""
    if finish is None:
        raise LLMError(
            Failure.NETWORK,
            "the model server ended the stream before the answer finished "
            "(no finish_reason, no [DONE])",
        )
    if finish == "error":  # OpenRouter's mark of a failure mid-answer, when no error came
        raise LLMError(Failure.UPSTREAM, "the model server stopped the answer with an error")
    events = []
    shown, from_text = written.finish(parse=not tools.calls)
    if shown:
        events.append(ModelEvent("delta", text=shown))
    if usage is not None:
        events.append(ModelEvent("usage", usage=usage))
    if tools.calls:
        events.append(ModelEvent("tool_calls", tool_calls=tools.result()))
    elif from_text:
        events.append(ModelEvent("tool_calls", tool_calls=from_text, text=written.raw))
    events.append(ModelEvent("finish", text=finish))
    return events


def safe_json(response: httpx.Response) -> object:
    """An answer's JSON, or the start of its text when it is not JSON (an error page)."""
    try:
        return response.json()
    except ValueError:
        return response.text[:500]


def parse_chunk(data: str) -> ServerObject:
    """One stream chunk's JSON object; anything else is the server's fault (upstream)."""
    try:
        chunk = jsoncodec.loads(data)
    except ValueError:
        chunk = None
    if not isinstance(chunk, dict):
        raise LLMError(
            Failure.UPSTREAM,
            f"the model server sent a stream chunk that is not JSON: {data[:200]!r}",
        )
    return chunk


def chunk_events(chunk: ServerObject, tools: ToolCallAssembler) -> list[ModelEvent]:
    """Events of one streamed chunk; tool-call deltas go to the assembler. A chunk of
    another shape fails as upstream rather than as a crash in the middle of the turn."""
    try:
        return shaped_events(chunk, tools)
    except (AttributeError, TypeError) as exc:
        raise LLMError(
            Failure.UPSTREAM, f"the model server sent a stream chunk of an unknown shape ({exc})"
        ) from exc


def shaped_events(chunk: ServerObject, tools: ToolCallAssembler) -> list[ModelEvent]:
    events = []
    if chunk.get("usage"):
        events.append(ModelEvent("usage", usage=chunk["usage"]))
    for choice in chunk.get("choices") or []:
        delta = choice.get("delta") or {}
        reasoning = delta.get("reasoning_content") or delta.get("reasoning")
        if reasoning:
            events.append(ModelEvent("reasoning", text=text_of(reasoning)))
        if delta.get("content"):
            events.append(ModelEvent("delta", text=text_of(delta["content"])))
        for call in delta.get("tool_calls") or []:
            tools.add(call)
        if choice.get("finish_reason"):
            events.append(ModelEvent("finish", text=text_of(choice["finish_reason"])))
    return events


def text_of(value: Any) -> str:
    if not isinstance(value, str):
        raise TypeError(f"{type(value).__name__} where text was expected")
    return value
