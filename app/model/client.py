"""A client for any OpenAI-compatible model server: streaming, tool calls, usage, errors.

Servers differ (llama.cpp, Ollama, vLLM, LM Studio, hosted APIs); the differences that
matter are handled here and nowhere else: where reasoning text arrives, how usage counts
cached tokens, how an error names its cause, and where the served window can be read.
"""

from __future__ import annotations

import asyncio
import json
import re
import secrets
from collections.abc import AsyncIterator, Awaitable
from contextlib import AsyncExitStack
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, TypeVar

import httpx
from httpx_sse import ServerSentEvent, SSEError, aconnect_sse

from app import config, jsoncodec
from app.transport import AiohttpTransport

T = TypeVar("T")


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
        return {
            "auth": "fix_settings",
            "rate_limit": "retry_later",
            "content_filter": "rewind",
            "context_overflow": "compress_and_retry",
        }.get(self.value, "retry")


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


CONNECT_SECONDS = 10.0
# The served-window and model-list probes run before a turn's first request: a server that
# hangs must not hold the turn up for long, so each probe waits at most this (and never
# longer than a first byte may take).
WINDOW_PROBE_SECONDS = 2.0
MODELS_PROBE_SECONDS = 5.0
DRAIN_SECONDS = 0.2
"""How long the end of a body is waited for after [DONE], to keep the connection."""
LARGE_REQUEST_CHARS = 200_000
"""A request whose messages hold more text than this is encoded in a thread."""
JSON_HEADERS = {"Content-Type": "application/json"}


@dataclass(frozen=True)
class Limits:
    """How long one model request may take; each bound catches a different way to hang."""

    first_byte: float = 60.0
    """Request sent to response headers: a server that accepted and never answers."""
    idle: float = 300.0
    """Between two events of a stream (headers to first event included): a stalled stream."""
    total: float = 900.0
    """The whole request: a stream that never ends, or a non-streamed answer that never comes."""

    @classmethod
    def from_settings(cls, settings: config.Settings) -> Limits:
        return cls(
            first_byte=settings.llm_first_byte_timeout,
            idle=settings.llm_idle_timeout,
            total=settings.llm_total_timeout,
        )

    def probe(self, seconds: float) -> float:
        """A probe's bound: its own, and never more than a first byte may take."""
        return min(seconds, self.first_byte)


class Bounds:
    """The limits of one streamed request, kept by a single timer: each step (the answer's
    headers, an error body, the next event) must end within its own limit and within the
    request's total. asyncio.timeout around each step armed and cancelled a timer per
    event, a sixth of the service's CPU per streamed token; this timer is set again only
    when it fires early or a step must end sooner.

    Steps are awaits, never a ``yield``: when the timer fires while the consumer holds an
    event, no step is waiting and nothing is cancelled."""

    def __init__(self, limits: Limits) -> None:
        self.loop = asyncio.get_running_loop()
        task = asyncio.current_task()
        if task is None:
            raise RuntimeError("a streamed request runs in a task")
        self.task = task
        self.limits = limits
        self.deadline = self.loop.time() + limits.total
        self.until: float | None = None
        """When the step now waiting must be over; None between steps."""
        self.timer: asyncio.Handle | None = None
        self.timer_at = 0.0
        """When the timer fires: kept here, since uvloop's call_at gives a plain Handle
        (no when()) for a time already past."""
        self.expired = False

    async def step(self, seconds: float, awaitable: Awaitable[T], *, silent: str) -> T:
        """`awaitable`'s result; LLMError (`silent`, or the total's) when it takes too long."""
        self.until = until = min(self.loop.time() + seconds, self.deadline)
        if self.timer is None or self.timer_at > until:
            if self.timer is not None:
                self.timer.cancel()
            self.arm(until)
        cancelling = self.task.cancelling()
        try:
            return await awaitable
        except asyncio.CancelledError:
            # Ours only if no other cancellation (Stop) came meanwhile, as asyncio.timeout.
            if not self.expired or self.task.uncancel() > cancelling:
                raise
            self.expired = False
            if until >= self.deadline:
                raise LLMError(
                    "upstream",
                    f"the model server's answer went on past {self.limits.total:g} s "
                    "(LLM_TOTAL_TIMEOUT)",
                ) from None
            raise LLMError("network", silent) from None
        finally:
            self.until = None

    def check(self) -> None:
        self.timer = None
        if self.until is None:
            return  # between steps: the next one sets the timer
        if self.loop.time() < self.until:
            self.arm(self.until)
            return
        self.expired = True
        self.task.cancel()

    def arm(self, when: float) -> None:
        self.timer = self.loop.call_at(when, self.check)
        self.timer_at = when

    def close(self) -> None:
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None


async def next_event(
    bounds: Bounds, events: AsyncIterator[ServerSentEvent], silent: str
) -> ServerSentEvent | None:
    """The stream's next event within the idle limit, or None at its end."""
    try:
        return await bounds.step(bounds.limits.idle, anext(events), silent=silent)
    except StopAsyncIteration:
        return None


class LLMError(Exception):
    """A failed model call, with the kind that decides its recovery (docs/architecture.md)."""

    def __init__(
        self,
        kind: str,
        message: str,
        retry_after: float | None = None,
        *,
        tools_refused: bool = False,
    ) -> None:
        super().__init__(message)
        self.kind = Failure(kind)
        self.message = message
        self.retry_after = retry_after
        self.tools_refused = tools_refused
        """The server refused the tool declarations themselves, as it will every time (not
        a model output that failed to parse as a tool call, which may parse next time)."""


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
        return LLMError(
            "tools_unsupported", f"the model does not accept tools: {text}", tools_refused=True
        )
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
    """One shape for the ones seen in the wild.

    OpenAI-style (llama.cpp, vLLM, OpenRouter, LiteLLM): ``prompt_tokens`` counts the whole
    prompt, cached part included, which comes as ``prompt_tokens_details.cached_tokens`` or
    (LiteLLM) ``cache_read_input_tokens``. Some servers count only the uncached part in
    ``prompt_tokens``: when it is smaller than the cached count, the two are added.
    Anthropic-style (``input_tokens`` without ``prompt_tokens``): the prompt is
    ``input_tokens`` plus the cache reads and writes, which it leaves out (Anthropic's
    prompt caching docs, "Tracking cache performance"). The local estimate is a floor.
    """
    if not raw:
        return None
    details = raw.get("prompt_tokens_details") or {}
    cached = int(raw.get("cache_read_input_tokens") or details.get("cached_tokens") or 0)
    if raw.get("prompt_tokens") is None and raw.get("input_tokens") is not None:
        written = int(raw.get("cache_creation_input_tokens") or 0)
        prompt = int(raw["input_tokens"]) + cached + written
    else:
        prompt = int(raw.get("prompt_tokens") or 0)
        if prompt < cached:
            prompt += cached
    cost = raw.get("cost")
    return Usage(
        prompt_tokens=max(prompt, floor_prompt_tokens),
        completion_tokens=int(raw.get("completion_tokens") or raw.get("output_tokens") or 0),
        cached_tokens=cached,
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


# Wrappers models put around a tool call they write as text: Hermes / Qwen templates
# (<tool_call>...</tool_call>, vllm tool_parsers/hermes_tool_parser.py), Mistral
# ([TOOL_CALLS][...], mistral_tool_parser.py), Llama 3.x (<|python_tag|> and ";" between
# calls, llama_tool_parser.py), or a markdown code fence.
TEXT_CALL_OPENERS = ("<tool_call>", "[TOOL_CALLS]", "<|python_tag|>", "```json", "```")
TEXT_CALL_WRAPPERS = re.compile(r"</?tool_call>|\[TOOL_CALLS\]|<\|python_tag\|>")
TEXT_CALL_FENCE = re.compile(r"```(?:json)?\s*(.*?)\s*```", re.S)
HOLD_LIMIT = 4000
"""Characters of content held back at most while it may be a tool call written as text."""


def declared_tools(payload: dict[str, Any]) -> frozenset[str]:
    return frozenset(
        tool.get("function", {}).get("name", "")
        for tool in payload.get("tools") or []
        if isinstance(tool, dict)
    )


def could_be_call(text: str) -> bool:
    """Whether content that starts like this may still turn out to be a JSON tool call."""
    rest = text.lstrip()
    for opener in TEXT_CALL_OPENERS:
        if opener.startswith(rest):
            return True
        if rest.startswith(opener):
            rest = rest[len(opener) :].lstrip()
            break
    if rest.startswith("["):
        rest = rest[1:].lstrip()
    if not rest:
        return True
    if rest[0] != "{":
        return False
    rest = rest[1:].lstrip()
    return not rest or rest[0] == '"'


def json_values(text: str) -> list[Any] | None:
    """Every JSON value in the text, lists flattened, separated by spaces, ";" or ","."""
    decoder = json.JSONDecoder()
    values: list[Any] = []
    at = 0
    while True:
        while at < len(text) and text[at] in " \t\r\n;,":
            at += 1
        if at == len(text):
            return values
        try:
            value, at = decoder.raw_decode(text, at)
        except ValueError:
            return None
        values.extend(value if isinstance(value, list) else [value])


def text_call(value: Any, declared: frozenset[str]) -> ToolCall | None:
    """{"name": ..., "arguments" or "parameters": {...}}, bare or under "function"."""
    if not isinstance(value, dict):
        return None
    function = value["function"] if isinstance(value.get("function"), dict) else value
    name = function.get("name")
    arguments = function.get("arguments", function.get("parameters", {}))
    if name not in declared:
        return None
    if isinstance(arguments, dict):
        arguments = json.dumps(arguments, ensure_ascii=False)
    if not isinstance(arguments, str):
        return None
    return ToolCall(id=f"call_{secrets.token_hex(6)}", name=name, arguments=arguments)


def parse_text_calls(text: str, declared: frozenset[str]) -> list[ToolCall]:
    """The tool calls a whole answer consists of, or none when it is anything else."""
    body = TEXT_CALL_WRAPPERS.sub(" ", text).strip()
    if fenced := TEXT_CALL_FENCE.fullmatch(body):
        body = fenced.group(1)
    values = json_values(body)
    calls = [text_call(value, declared) for value in values or []]
    return [c for c in calls if c is not None] if calls and None not in calls else []


@dataclass
class TextToolCalls:
    """Content held back while it may be a tool call the model wrote as text instead of as
    ``tool_calls`` (small models do, on Ollama and vLLM without a matching tool parser).
    Only when tools were declared; an answer that starts like prose is never held."""

    declared: frozenset[str]
    held: str = ""
    holding: bool = True
    raw: str = ""
    """The text the calls were parsed from, once found."""

    def feed(self, text: str) -> str:
        """The content to show now: nothing while it may still be a call."""
        if not self.declared or not self.holding:
            return text
        self.held += text
        if len(self.held) <= HOLD_LIMIT and could_be_call(self.held):
            return ""
        self.holding = False
        return self.release()

    def finish(self, *, parse: bool) -> tuple[str, list[ToolCall]]:
        """At the stream's end: the calls the held content is, or the content to show."""
        calls = parse_text_calls(self.held, self.declared) if parse and self.held else []
        if calls:
            self.raw = self.release()
            return "", calls
        return self.release(), []

    def release(self) -> str:
        held, self.held = self.held, ""
        return held


@dataclass
class Event:
    """One thing the stream said: ``reasoning`` / ``delta`` text, ``tool_calls``,
    ``finish`` (with the reason) or ``usage`` (once per request, before ``finish``).

    ``tool_calls`` with ``text`` set are calls the model wrote as text in its answer
    instead of as ``tool_calls`` (``text`` is what it wrote, never shown as a delta)."""

    type: str
    text: str = ""
    tool_calls: list[ToolCall] = field(default_factory=list)
    usage: dict[str, Any] | None = None


async def request_body(body: dict[str, Any]) -> bytes:
    """The request's JSON. A long history (megabytes) is encoded in a thread, a message at
    a time: encoding it whole is one C call that holds the GIL, and so the event loop and
    every other stream."""
    messages = body.get("messages") or []
    if sum(len(str(m.get("content") or "")) for m in messages) < LARGE_REQUEST_CHARS:
        return jsoncodec.dumps(body)
    return await asyncio.to_thread(encode_in_parts, body)


def encode_in_parts(body: dict[str, Any]) -> bytes:
    others = jsoncodec.dumps({k: v for k, v in body.items() if k != "messages"})[1:-1]
    parts = b",".join(jsoncodec.dumps(m) for m in body["messages"])
    return b"{" + others + (b"," if others else b"") + b'"messages":[' + parts + b"]}"


class ModelClient:
    """One OpenAI-compatible server (``LLM_BASE_URL`` ends with ``/v1``)."""

    def __init__(self, base_url: str, api_key: str = "", *, limits: Limits | None = None) -> None:
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self.base_url = base_url.rstrip("/")
        self.limits = limits or Limits()
        self.ollama_windows: dict[str, OllamaWindow] = {}
        """What Ollama last said of each model's window (read_window), for the context bar."""
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

    async def stream(self, payload: dict[str, Any]) -> AsyncIterator[Event]:
        """Stream one completion. Closing this iterator closes the upstream connection,
        which is how Stop reaches the model server.

        The stream must end with a ``finish_reason`` or ``[DONE]``: one that just stops
        is a lost connection (kind ``network``), never a complete answer."""
        body = {**payload, "stream": True, "stream_options": {"include_usage": True}}
        tools = ToolCallAssembler()
        written = TextToolCalls(declared_tools(payload))
        usage: dict[str, Any] | None = None
        finish: str | None = None
        bounds = Bounds(self.limits)
        try:
            async with AsyncExitStack() as stack:
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
                    silent=f"no answer within {self.limits.first_byte:g} s "
                    "(LLM_FIRST_BYTE_TIMEOUT)",
                )
                response = source.response
                if response.status_code != 200:
                    await bounds.step(
                        self.limits.idle,
                        response.aread(),
                        silent="the error body did not arrive",
                    )
                    raise classify(response.status_code, safe_json(response), response.headers)
                events = source.aiter_sse()
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
                                yield Event("delta", text=shown)
                        else:
                            yield event
        except SSEError as exc:
            raise LLMError(
                "upstream", f"the model server did not answer with an event stream: {exc}"
            ) from exc
        except httpx.ConnectError as exc:
            raise LLMError(
                "network", f"cannot reach the model server at {self.base_url}: {exc}"
            ) from exc
        except httpx.TimeoutException as exc:
            raise LLMError(
                "network", f"the model server timed out ({exc.__class__.__name__})"
            ) from exc
        except (httpx.TransportError, httpx.StreamError) as exc:
            raise LLMError(
                "network",
                f"lost the connection to the model server: {exc or exc.__class__.__name__}",
            ) from exc
        finally:
            bounds.close()
        if finish is None:
            raise LLMError(
                "network",
                "the model server ended the stream before the answer finished "
                "(no finish_reason, no [DONE])",
            )
        if finish == "error":  # OpenRouter's mark of a failure mid-answer, when no error came
            raise LLMError("upstream", "the model server stopped the answer with an error")
        shown, from_text = written.finish(parse=not tools.calls)
        if shown:
            yield Event("delta", text=shown)
        if usage is not None:
            yield Event("usage", usage=usage)
        if tools.calls:
            yield Event("tool_calls", tool_calls=tools.result())
        elif from_text:
            yield Event("tool_calls", tool_calls=from_text, text=written.raw)
        yield Event("finish", text=finish)

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

    async def complete(self, payload: dict[str, Any]) -> tuple[str, dict[str, Any] | None]:
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
                "upstream",
                f"no answer from the model server within {self.limits.total:g} s "
                "(LLM_TOTAL_TIMEOUT)",
            ) from None
        except httpx.HTTPError as exc:
            raise LLMError("network", f"the model server is unreachable: {exc}") from exc
        if response.status_code != 200:
            raise classify(response.status_code, safe_json(response), response.headers)
        try:
            data = response.json()
            message = (data.get("choices") or [{}])[0].get("message") or {}
            text = message.get("content") or ""
            if not isinstance(text, str):
                raise TypeError("content is not text")
        except (ValueError, TypeError, AttributeError, IndexError) as exc:
            raise LLMError(
                "upstream", f"the model server's answer is not a chat completion ({exc})"
            ) from exc
        return text, data.get("usage")

    async def models(self) -> list[str] | None:
        """Model ids the server lists: empty when it lists none, None when unreachable."""
        try:
            async with asyncio.timeout(self.limits.probe(MODELS_PROBE_SECONDS)):
                response = await self.http.get(f"{self.base_url}/models")
        except (httpx.HTTPError, TimeoutError):
            return None
        try:
            return [m["id"] for m in response.json().get("data", []) if m.get("id")]
        except (ValueError, KeyError, TypeError, AttributeError):
            return []

    async def served_window(self, model: str) -> int | None:
        """The context window the server actually runs with, where it says so:
        llama.cpp's ``/props``, Ollama's (OllamaWindow.served), LM Studio's loaded context
        length. All the asks together take at most WINDOW_PROBE_SECONDS: a hung server
        costs the turn that, not more, and is asked again only after a while
        (Services.served_window)."""
        try:
            async with asyncio.timeout(self.limits.probe(WINDOW_PROBE_SECONDS)):
                return await self.read_window(model)
        except (httpx.HTTPError, TimeoutError, ValueError, TypeError, AttributeError):
            return None

    @property
    def root(self) -> str:
        """The server's own address, for the APIs it serves beside /v1."""
        return self.base_url.removesuffix("/v1")

    async def read_window(self, model: str) -> int | None:
        props = await self.http.get(f"{self.root}/props")
        if props.status_code == 200:
            data = props.json()
            n_ctx = data.get("n_ctx") or (data.get("default_generation_settings") or {}).get(
                "n_ctx"
            )
            if n_ctx:
                return int(n_ctx)
        ollama = await self.ollama_window(model)
        if ollama is not None:
            self.ollama_windows[model] = ollama
            return ollama.served
        return await self.lmstudio_window(model)

    async def ollama_window(self, model: str) -> OllamaWindow | None:
        """What Ollama says of the model's window, or None when this is not Ollama.

        Ollama never takes a window size through /v1 (its docs: "The OpenAI API does not
        have a way of setting the context size"), so this is all the service can know."""
        show = await self.http.post(f"{self.root}/api/show", json={"model": model})
        if show.status_code != 200:
            return None
        shown = show.json()
        match = re.search(r"num_ctx\s+(\d+)", shown.get("parameters") or "")
        info = shown.get("model_info") or {}
        trained = next((v for k, v in info.items() if k.endswith(".context_length")), None)
        version, running = await asyncio.gather(
            self.http.get(f"{self.root}/api/version"), self.http.get(f"{self.root}/api/ps")
        )
        loaded = [
            m.get("context_length")
            for m in (running.json().get("models") if running.status_code == 200 else None) or []
            if same_ollama_model(m.get("model") or m.get("name") or "", model)
        ]
        return OllamaWindow(
            version=str(version.json().get("version", "")) if version.status_code == 200 else "",
            modelfile=int(match.group(1)) if match else None,
            loaded=int(loaded[0]) if loaded and loaded[0] else None,
            trained=int(trained) if isinstance(trained, int) else None,
        )

    async def lmstudio_window(self, model: str) -> int | None:
        """LM Studio's native API: a loaded instance's context_length (docs: developer/rest,
        "List your models"). Not loaded: LM Studio loads it on the first request with the
        length set in its app, so nothing is known yet."""
        listed = await self.http.get(f"{self.root}/api/v1/models")
        if listed.status_code != 200:
            return None
        for entry in listed.json().get("models") or []:
            if entry.get("key") == model:
                for instance in entry.get("loaded_instances") or []:
                    length = (instance.get("config") or {}).get("context_length")
                    if length:
                        return int(length)
        return None


def same_ollama_model(listed: str, asked: str) -> bool:
    """Ollama names a model with or without its ":latest" tag."""
    return listed.removesuffix(":latest") == asked.removesuffix(":latest")


OLLAMA_DEFAULT_WINDOW = 4096
"""Ollama's window for a model without num_ctx, unless OLLAMA_CONTEXT_LENGTH says otherwise:
4096 since 0.6.7 (envconfig/config.go, commit 44b466e). Since 0.15.5 it depends on the GPU's
memory (4k below 24 GiB, then 32k, 256k; docs/context-length.mdx); 4096 is the least."""
OLLAMA_OLD_DEFAULT_WINDOW = 2048
"""The same before Ollama 0.6.7."""


@dataclass(frozen=True)
class OllamaWindow:
    """An Ollama model's windows: the one it is loaded with (``/api/ps`` context_length),
    the Modelfile's ``PARAMETER num_ctx`` (``/api/show`` parameters) and the one it was
    trained for (``/api/show`` model_info ``<arch>.context_length``), which Ollama does
    not use unless told to."""

    version: str
    modelfile: int | None
    loaded: int | None
    trained: int | None

    @property
    def default(self) -> int:
        """The window Ollama gives a model without num_ctx, as far as this server can say
        (OLLAMA_CONTEXT_LENGTH on the server raises it and is visible only once loaded)."""
        parts = tuple(int(p) for p in re.findall(r"\d+", self.version)[:3])
        old = len(parts) == 3 and parts < (0, 6, 7)
        return OLLAMA_OLD_DEFAULT_WINDOW if old else OLLAMA_DEFAULT_WINDOW

    @property
    def served(self) -> int:
        """What a prompt must fit: Ollama cuts a longer one silently, keeping its end."""
        return self.loaded or self.modelfile or self.default

    @property
    def assumed(self) -> bool:
        """The window is our guess of Ollama's default, not one Ollama reported: a model that
        is not loaded may still get a larger one from OLLAMA_CONTEXT_LENGTH."""
        return self.loaded is None and self.modelfile is None

    @property
    def runs_default(self) -> bool:
        """Served with Ollama's small default window: nobody set num_ctx or raised it."""
        return self.modelfile is None and self.served <= self.default


def safe_json(response: httpx.Response) -> Any:
    try:
        return response.json()
    except ValueError:
        return response.text[:500]


def parse_chunk(data: str) -> dict[str, Any]:
    """One stream chunk's JSON object; anything else is the server's fault (upstream)."""
    try:
        chunk = jsoncodec.loads(data)
    except ValueError:
        chunk = None
    if not isinstance(chunk, dict):
        raise LLMError(
            "upstream", f"the model server sent a stream chunk that is not JSON: {data[:200]!r}"
        )
    return chunk


def chunk_events(chunk: dict[str, Any], tools: ToolCallAssembler) -> list[Event]:
    """Events of one streamed chunk; tool-call deltas go to the assembler. A chunk of
    another shape fails as upstream rather than as a crash in the middle of the turn."""
    try:
        return shaped_events(chunk, tools)
    except (AttributeError, TypeError) as exc:
        raise LLMError(
            "upstream", f"the model server sent a stream chunk of an unknown shape ({exc})"
        ) from exc


def shaped_events(chunk: dict[str, Any], tools: ToolCallAssembler) -> list[Event]:
    events = []
    if chunk.get("usage"):
        events.append(Event("usage", usage=chunk["usage"]))
    for choice in chunk.get("choices") or []:
        delta = choice.get("delta") or {}
        reasoning = delta.get("reasoning_content") or delta.get("reasoning")
        if reasoning:
            events.append(Event("reasoning", text=text_of(reasoning)))
        if delta.get("content"):
            events.append(Event("delta", text=text_of(delta["content"])))
        for call in delta.get("tool_calls") or []:
            tools.add(call)
        if choice.get("finish_reason"):
            events.append(Event("finish", text=text_of(choice["finish_reason"])))
    return events


def text_of(value: Any) -> str:
    if not isinstance(value, str):
        raise TypeError(f"{type(value).__name__} where text was expected")
    return value
