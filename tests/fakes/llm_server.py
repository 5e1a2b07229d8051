"""A scripted fake of an OpenAI-compatible model server, served on loopback.

Tests point the chat service at this server instead of llama-server, Ollama, vLLM or a hosted
API, so the streaming client, the tool loop, Stop and the failure handling run against a real
HTTP peer, offline and deterministically. Each chat request takes the next scripted `Reply`.

It is a real socket server on purpose: streams go out as HTTP/1.1 chunked Server-Sent Events
flushed one event at a time, a client hang-up is noticed the way a real server notices it (a
failed write, or end-of-file seen on the socket while waiting between chunks), and a crash is a
connection closed in the middle of a chunked body. Mocking the HTTP client would hide exactly
the bugs these tests exist to find.

Shapes follow what real servers send:
- stream chunks as OpenAI sends them: the first delta carries ``role``; tool calls arrive as a
  first delta with ``index``, ``id``, ``type`` and ``function.name`` and then ``index`` plus
  argument fragments; with ``stream_options.include_usage`` every chunk has ``"usage": null``
  and a last chunk has ``"choices": []`` and the usage;
- reasoning as ``delta.reasoning_content`` (llama.cpp, DeepSeek) or ``delta.reasoning``
  (Ollama's /v1, OpenRouter);
- error bodies in the OpenAI shape, plus helpers below for the llama.cpp and Ollama variants;
- ``GET /props`` as llama.cpp serves it and ``POST /api/show`` as Ollama serves it, so the
  service can read the window the server actually runs with; or, with ``anything``, the same
  JSON with 200 on every other path, as a server that takes anything answers.

Other servers' conventions (Ollama, vLLM, LM Studio, OpenRouter...) are replayed exactly by
the builders in tests/fakes/conventions.py: a `Reply` with ``wire`` sends the events they
build for the request, and ``FakeLLM(routes=...)`` serves their side APIs.

Faults a `Reply` can script, for the failure tests: an error status, a crash mid-body
(``break_after``), silence after accepting (``silent``), a stall with the connection open
(``stall_after``), a body that ends cleanly without ``finish_reason`` or ``[DONE]``
(``end_after``), a cut in the middle of an event (``cut_after``), an event that is not JSON
(``malformed_after``) and a stream that never ends (``endless``).

Structured output: ``response_format`` is taken by default (the scripted answer is sent as
it is: the fake constrains nothing). ``FakeLLM(response_formats=("json_object",))`` takes
only those types and refuses any other as the server says it: OpenAI's 400 naming the
parameter, or llama.cpp's ``response_format_refusal="llamacpp"`` 400 listing the types it
takes; ``response_formats=()`` is a server without JSON mode.
"""

from __future__ import annotations

import itertools
import json
import re
import select
import socket
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote, urlsplit

from tests.fakes.loopback import DispatchingHandler, LoopbackFake, LoopbackServer

CHAT_PATHS = ("/v1/chat/completions", "/chat/completions")  # llama.cpp serves both
MODELS_PATHS = ("/v1/models", "/models")
SSE_CONTENT_TYPE = "text/event-stream; charset=utf-8"  # what OpenAI sends, charset included
JSON_CONTENT_TYPE = "application/json"
OLLAMA_TRAINED_CONTEXT = 131072  # model_info holds the trained window, not the served one
OLLAMA_PARAM_WIDTH = 30  # `ollama show` pads parameter names to this width
HOLD_POLL_SECONDS = 0.1  # a held connection checks this often whether the fake is stopping

Wire = Callable[[dict], "list[dict | str] | dict"]
"""A server's exact answer to one request body: a stream's events (a dict is one `data:` JSON
event, "[DONE]" the end marker, a str starting with ":" an SSE comment line) or, for a
non-streamed request, the whole JSON body."""
Route = Callable[[bytes], "tuple[int, dict[str, Any]]"]
"""A side API of a server (its window, its version): request body in, status and JSON out."""


# --------------------------------------------------------------------------------------------
# The script


@dataclass
class ToolCall:
    """One tool call the scripted model makes; its arguments stream out in fragments."""

    name: str
    arguments: dict | str  # a dict is JSON-dumped; a str is sent as is (it may be broken JSON)
    id: str | None = None  # default "call_<n>", unique for the life of the fake
    fragment: int = 7


@dataclass
class Reply:
    """One scripted answer to one POST /v1/chat/completions."""

    text: str | list[str] = ""  # content; a list = the exact content deltas to send
    reasoning: str | list[str] = ""  # sent before content, under the key reasoning_field
    reasoning_field: str = "reasoning_content"  # or "reasoning"
    tool_calls: list[ToolCall] = field(default_factory=list)
    finish_reason: str | None = None  # default "tool_calls" if tool_calls else "stop"
    usage: dict | None = None  # sent as given; default estimated from the request and reply
    status: int = 200  # non-200: the error body goes out before any stream starts
    error: dict | None = None  # the JSON error body for non-200 (default: realistic for status)
    headers: dict[str, str] = field(default_factory=dict)  # e.g. {"Retry-After": "7"}
    chunk_delay: float = 0.0  # seconds between chunks; non-stream: per delta, before answering
    break_after: int | None = None  # crash after this many content deltas (no finish, no [DONE])
    split: int = 4  # when text or reasoning is a str, deltas of this many characters
    # Faults of a server or a proxy that has gone wrong. Each *_after counts content deltas
    # like break_after, except that 0 strikes before the first event, right after the
    # headers. Set one fault per Reply. A non-streamed request with any of them gets silence.
    silent: bool = False  # accept and read the request, then send not a byte (headers neither)
    stall_after: int | None = None  # then send nothing more, keeping the connection open
    end_after: int | None = None  # then end the body cleanly: no finish_reason, no [DONE]
    cut_after: int | None = None  # then send half of the next event and drop the connection
    malformed_after: int | None = None  # then one event whose data is not JSON, then the rest
    endless: bool = False  # repeat `text` forever, never finishing (pace it with chunk_delay)
    # A server's own shapes, replayed as built (tests/fakes/conventions.py); the fields
    # above that shape a stream are then unused, the pacing and break_after still apply.
    wire: Wire | None = None
    # An answer made when the request comes, from its body: the Reply returned is sent in
    # this one's place (e.g. `obeying`, a model that does what the page it read says).
    reply_to: Callable[[dict], Reply] | None = None


@dataclass
class Recorded:
    """One chat-completion request as the fake received it, and how its answer went."""

    body: dict  # the request JSON ({} when it did not parse)
    headers: dict[str, str]  # lower-cased names
    path: str
    received_at: float  # time.monotonic()
    hung_up_at: float | None = None  # when the server noticed the client had gone, else None
    completed: bool = False  # the whole answer was sent (set just before its last bytes go out)
    client_port: int = 0  # the connection it came on: requests on one kept-alive share it


# --------------------------------------------------------------------------------------------
# Ready-made failures, worded the way real servers word them


def openai_error(
    status: int,
    message: str,
    type_: str | None = "invalid_request_error",
    code: str | None = None,
    param: str | None = None,
    headers: dict[str, str] | None = None,
) -> Reply:
    """A Reply failing with an OpenAI-shaped error body."""
    body = {"error": {"message": message, "type": type_, "param": param, "code": code}}
    return Reply(status=status, error=body, headers=dict(headers or {}))


def invalid_api_key() -> Reply:
    """OpenAI's answer to a wrong key (401, code invalid_api_key)."""
    return Reply(status=401, error=_default_error(401, "fake-model", {}))


def rate_limited(retry_after: int = 7) -> Reply:
    """A 429 announcing when to retry, in the header and in the message, as OpenAI does."""
    headers = {"Retry-After": str(retry_after)}
    return Reply(status=429, error=_default_error(429, "fake-model", headers), headers=headers)


def context_length_exceeded(n_ctx: int = 8192, n_prompt: int = 9000) -> Reply:
    """OpenAI's (and vLLM's) context overflow: 400 with code context_length_exceeded."""
    message = (
        f"This model's maximum context length is {n_ctx} tokens. However, your messages "
        f"resulted in {n_prompt} tokens. Please reduce the length of the messages."
    )
    return openai_error(400, message, code="context_length_exceeded", param="messages")


def llamacpp_context_exceeded(n_ctx: int = 4096, n_prompt: int = 4476) -> Reply:
    """llama-server's context overflow: numeric code, its own type, and the two counts."""
    message = (
        f"request ({n_prompt} tokens) exceeds the available context size ({n_ctx} tokens), "
        "try increasing it"
    )
    error = {
        "code": 400,
        "message": message,
        "type": "exceed_context_size_error",
        "n_prompt_tokens": n_prompt,
        "n_ctx": n_ctx,
    }
    return Reply(status=400, error={"error": error})


def content_filtered(code: str = "content_filter") -> Reply:
    """A prompt refused by a safety system: Azure says content_filter, OpenAI
    content_policy_violation."""
    message = (
        "The response was filtered due to the prompt triggering the content management "
        "policy. Please modify your prompt and retry."
    )
    return openai_error(400, message, code=code, param="prompt")


def tools_unsupported(model: str = "fake-model", server: str = "ollama") -> Reply:
    """A server refusing the `tools` field: Ollama's 400, or llama-server without --jinja (500)."""
    if server == "llamacpp":
        error = {
            "code": 500,
            "message": "tools param requires --jinja flag",
            "type": "server_error",
        }
        return Reply(status=500, error={"error": error})
    message = f"registry.ollama.ai/library/{model} does not support tools"
    # Ollama's openai.NewError types a 400 as invalid_request_error (openai/openai.go).
    return openai_error(400, message)


CONVERSATION_PLACEHOLDER = "[the user's memory and last message]"
"""What a hostile page asks a model to put in an address it reads (see `obeying`)."""
MEMORY_HEADING = "What you know about the user (long-term memory):\n"
ORDER = re.compile(r"https?://\S*?" + re.escape(CONVERSATION_PLACEHOLDER) + r"\S*")


def obeying(body: dict) -> Reply:
    """A hijacked model, for ``Reply(reply_to=obeying)``: it reads the first address in the
    last message (a tool's result) that holds CONVERSATION_PLACEHOLDER, filled with what it
    knows of the user, the memory in its system prompt and the last user message: in hex as
    a DNS label when it stands in the host name, percent-encoded elsewhere. With no such
    order, it answers."""
    messages = body.get("messages") or [{}]
    order = ORDER.search(str(messages[-1].get("content") or ""))
    if order is None:
        return Reply(text="Nothing to do.")
    system = str(messages[0].get("content") or "") if messages[0].get("role") == "system" else ""
    memory = system.partition(MEMORY_HEADING)[2].partition("\n\n")[0]
    asked = next((str(m["content"]) for m in reversed(messages) if m.get("role") == "user"), "")
    secret = f"{memory} {asked}".strip()
    before, _, after = order.group(0).partition(CONVERSATION_PLACEHOLDER)
    in_host = "/" not in before.split("://", 1)[1]
    filled = secret.encode().hex()[:63] if in_host else quote(secret, safe="")
    return Reply(tool_calls=[ToolCall("web_fetch", {"url": before + filled + after})])


def server_error(status: int = 500) -> Reply:
    """An upstream failure with the default body for its status (500, 502, 503...)."""
    return Reply(status=status)


def _default_error(status: int, model: str, headers: dict[str, str]) -> dict[str, Any]:
    """The OpenAI error body a hosted API sends for this status, so no test has to write one."""
    retry = next((v for k, v in headers.items() if k.lower() == "retry-after"), "20")
    table: dict[int, tuple[str, str, str | None]] = {
        400: ("Invalid request.", "invalid_request_error", None),
        401: (
            "Incorrect API key provided: sk-fake***. You can find your API key at "
            "https://platform.openai.com/account/api-keys.",
            "invalid_request_error",
            "invalid_api_key",
        ),
        403: ("You are not allowed to sample from this model.", "invalid_request_error", None),
        404: (
            f"The model `{model}` does not exist or you do not have access to it.",
            "invalid_request_error",
            "model_not_found",
        ),
        429: (
            f"Rate limit reached for {model} on requests per min (RPM): Limit 3, Used 3, "
            f"Requested 1. Please try again in {retry}s.",
            "requests",
            "rate_limit_exceeded",
        ),
        500: (
            "The server had an error while processing your request. Sorry about that!",
            "server_error",
            None,
        ),
        502: ("Bad gateway.", "server_error", None),
        503: ("The engine is currently overloaded, please try again later.", "server_error", None),
    }
    fallback_type = "server_error" if status >= 500 else "invalid_request_error"
    message, type_, code = table.get(status, (f"HTTP {status}", fallback_type, None))
    return {"error": {"message": message, "type": type_, "param": None, "code": code}}


# --------------------------------------------------------------------------------------------
# Building answers


def _pieces(value: str | list[str], size: int) -> Iterator[str]:
    """The deltas for a text: a list is taken verbatim, a str is cut every `size` characters.

    Lazy, so a long scripted text starts streaming at once instead of being cut up first.
    """
    if isinstance(value, list):
        yield from value
        return
    step = max(1, size)
    for start in range(0, len(value), step):
        yield value[start : start + step]


def _whole(value: str | list[str]) -> str:
    """A scripted text as the client ends up with it."""
    return value if isinstance(value, str) else "".join(value)


def _arguments(call: ToolCall) -> str:
    """A call's arguments as the wire carries them: a JSON string."""
    if isinstance(call.arguments, str):
        return call.arguments
    return json.dumps(call.arguments, ensure_ascii=False)


def _finish_reason(reply: Reply) -> str:
    return reply.finish_reason or ("tool_calls" if reply.tool_calls else "stop")


def _estimate_usage(body: dict, reply: Reply) -> dict[str, int]:
    """Rough counts (4 characters a token) so a test that does not care still gets usage."""
    prompt = len(json.dumps(body.get("messages", []), ensure_ascii=False)) // 4
    produced = _whole(reply.text) + _whole(reply.reasoning)
    produced += "".join(_arguments(c) for c in reply.tool_calls)
    completion = len(produced) // 4 + 1
    return {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
    }


def _tool_call_deltas(index: int, call_id: str, call: ToolCall) -> list[dict[str, Any]]:
    """One call as OpenAI streams it: name and id first, then bare argument fragments."""
    first = {
        "index": index,
        "id": call_id,
        "type": "function",
        "function": {"name": call.name, "arguments": ""},
    }
    args = _arguments(call)
    step = max(1, call.fragment)
    rest = [
        {"index": index, "function": {"arguments": args[i : i + step]}}
        for i in range(0, len(args), step)
    ]
    return [{"tool_calls": [first]}] + [{"tool_calls": [d]} for d in rest]


@dataclass
class _Answer:
    """A reply resolved for one request: ids and usage fixed, ready to stream or to send whole."""

    reply: Reply
    ident: str
    created: int
    model: str
    call_ids: list[str]
    usage: dict
    include_usage: bool
    body: dict = field(default_factory=dict)

    def envelope(self, choices: list[dict[str, Any]]) -> dict[str, Any]:
        chunk: dict[str, Any] = {
            "id": self.ident,
            "object": "chat.completion.chunk",
            "created": self.created,
            "model": self.model,
            "choices": choices,
        }
        if self.include_usage:
            chunk["usage"] = None  # OpenAI: every chunk but the last carries a null usage
        return chunk

    def deltas(self) -> Iterator[tuple[str, dict[str, Any]]]:
        """The stream's deltas in order, each tagged with what it carries."""
        reply = self.reply
        yield "role", {"role": "assistant", "content": ""}
        for piece in _pieces(reply.reasoning, reply.split):
            yield "reasoning", {reply.reasoning_field: piece}
        pieces = _pieces(reply.text, reply.split)
        for piece in itertools.cycle(list(pieces)) if reply.endless else pieces:
            yield "content", {"content": piece}
        for index, (call, call_id) in enumerate(zip(reply.tool_calls, self.call_ids, strict=True)):
            for delta in _tool_call_deltas(index, call_id, call):
                yield "tool", delta

    def frames(self) -> Iterator[tuple[str, bytes]]:
        """Every SSE event of the stream, made as it is sent so the first goes out at once."""
        if self.reply.wire is not None:
            yield from _replayed(self.reply.wire(self.body))
            return
        for kind, delta in self.deltas():
            yield kind, _sse(self.envelope([{"index": 0, "delta": delta, "finish_reason": None}]))
        finish = {"index": 0, "delta": {}, "finish_reason": _finish_reason(self.reply)}
        yield "finish", _sse(self.envelope([finish]))
        if self.include_usage:
            yield "usage", _sse({**self.envelope([]), "usage": self.usage})
        yield "done", b"data: [DONE]\n\n"

    def delta_count(self) -> int:
        """How many deltas a stream would carry: the pacing of a non-streamed answer."""
        return sum(kind != "role" for kind, _ in self.deltas())

    def completion(self) -> dict[str, Any]:
        """The whole answer as one chat.completion object (usage always present)."""
        reply = self.reply
        if reply.wire is not None:
            whole = reply.wire(self.body)
            assert isinstance(whole, dict), "this wire has no non-streamed answer"
            return whole
        text = _whole(reply.text)
        message: dict[str, Any] = {"role": "assistant", "content": text or None}
        reasoning = _whole(reply.reasoning)
        if reasoning:
            message[reply.reasoning_field] = reasoning
        if reply.tool_calls:
            message["tool_calls"] = [
                {
                    "id": cid,
                    "type": "function",
                    "function": {"name": c.name, "arguments": _arguments(c)},
                }
                for c, cid in zip(reply.tool_calls, self.call_ids, strict=True)
            ]
        choice = {
            "index": 0,
            "message": message,
            "logprobs": None,
            "finish_reason": _finish_reason(reply),
        }
        return {
            "id": self.ident,
            "object": "chat.completion",
            "created": self.created,
            "model": self.model,
            "choices": [choice],
            "usage": self.usage,
        }


def _sse(event: dict[str, Any]) -> bytes:
    return b"data: " + json.dumps(event, ensure_ascii=False).encode("utf-8") + b"\n\n"


def _replayed(events: list[dict | str] | dict) -> Iterator[tuple[str, bytes]]:
    """A built stream as frames: JSON events count as content, "[DONE]" ends the answer."""
    assert isinstance(events, list), "this wire has no streamed answer"
    for event in events:
        if isinstance(event, dict):
            yield "content", _sse(event)
        elif event == "[DONE]":
            yield "done", b"data: [DONE]\n\n"
        else:
            yield "comment", event.encode("utf-8") + b"\n\n"


def _breaks_before(kind: str, content_sent: int, limit: int) -> bool:
    """With break_after, die at the limit, or where content ends if it is shorter than that."""
    if kind in ("role", "reasoning", "comment"):
        return False
    return kind != "content" or content_sent >= limit


MALFORMED_EVENT = b'data: {"id": "chatcmpl-fake", "choices": [{"delta": {"content": "x"\n\n'


def _fault(reply: Reply) -> tuple[str, int] | None:
    """The stream fault the reply asks for, with the content deltas sent before it."""
    faults = (
        ("stall", reply.stall_after),
        ("end", reply.end_after),
        ("cut", reply.cut_after),
        ("malformed", reply.malformed_after),
    )
    return next(((name, limit) for name, limit in faults if limit is not None), None)


def _strikes(kind: str, content_sent: int, limit: int) -> bool:
    """A fault strikes at its limit like break_after; a limit of 0 before any event."""
    return limit == 0 or _breaks_before(kind, content_sent, limit)


# --------------------------------------------------------------------------------------------
# Noticing a client that has gone


def _peer_state(sock: socket.socket, timeout: float) -> str:
    """Whether the peer hung up ("closed"), sent bytes ("data") or neither ("idle") in `timeout`.

    A closed peer makes the socket readable with end-of-file, which select() reports at once, so
    a wait between chunks ends the moment the client goes instead of at the next write.
    """
    try:
        readable, _, _ = select.select([sock], [], [], max(0.0, timeout))
        if not readable:
            return "idle"
        return "closed" if sock.recv(1, socket.MSG_PEEK) == b"" else "data"
    except (OSError, ValueError):
        return "closed"


def _wait_unless_closed(sock: socket.socket, seconds: float) -> bool:
    """Sleep `seconds`, waking early when the peer hangs up; True if it did."""
    deadline = time.monotonic() + seconds
    while True:
        remaining = deadline - time.monotonic()
        state = _peer_state(sock, remaining)
        if state == "closed":
            return True
        if remaining <= 0:
            return False
        if state == "data":  # unexpected bytes: do not spin on a readable socket
            time.sleep(min(remaining, 0.01))


def _read_chunked(rfile: Any) -> bytes:
    """A chunked request body, for clients that stream their uploads."""
    parts: list[bytes] = []
    while True:
        size = int(rfile.readline().split(b";")[0].strip() or b"0", 16)
        if size == 0:
            while rfile.readline() not in (b"\r\n", b"\n", b""):
                pass  # trailers
            return b"".join(parts)
        parts.append(rfile.read(size))
        rfile.readline()


# --------------------------------------------------------------------------------------------
# The server


class _Handler(DispatchingHandler):
    server: LoopbackServer[FakeLLM]
    server_version = "FakeLLM/1.0"

    # -- routing -----------------------------------------------------------------------------

    def _dispatch(self) -> None:
        raw = self._read_body()
        path = urlsplit(self.path).path
        headers = {k.lower(): v for k, v in self.headers.items()}
        fake = self.server.fake
        if path in CHAT_PATHS and self.command == "POST":
            self._chat(path, headers, raw)
            return
        status, body = fake._route(self.command, path, headers, raw)
        self._send_json(status, body, {})

    def _read_body(self) -> bytes:
        if "chunked" in (self.headers.get("Transfer-Encoding") or "").lower():
            return _read_chunked(self.rfile)
        length = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(length) if length else b""

    def _chat(self, path: str, headers: dict[str, str], raw: bytes) -> None:
        fake = self.server.fake
        body, problem = _parse_chat(raw)
        recorded = fake._record(body, headers, path, self.client_address[1])
        # auth is checked first, as OpenAI does
        refusal = fake._auth_error(headers) or problem or fake._format_refusal(body)
        if refusal is not None:
            fake._set_completed(recorded)
            self._send_json(refusal[0], refusal[1], {})
            return
        reply = fake._next_reply()
        if reply.reply_to is not None:
            reply = reply.reply_to(body)
        model = str(body.get("model") or fake.models[0])
        if reply.status != 200:
            error = reply.error or _default_error(reply.status, model, reply.headers)
            fake._set_completed(recorded)
            self._send_json(reply.status, error, reply.headers)
            return
        if reply.silent:
            self._hold(recorded)
            return
        answer = fake._resolve(reply, body, model)
        if body.get("stream"):
            self._stream(recorded, answer)
        else:
            self._complete(recorded, answer)

    # -- answering ---------------------------------------------------------------------------

    def _stream(self, recorded: Recorded, answer: _Answer) -> None:
        """Send the SSE stream chunk by chunk, stopping the moment the client is gone."""
        reply = answer.reply
        try:
            self.send_response(200)
            self.send_header("Content-Type", SSE_CONTENT_TYPE)
            self.send_header("Cache-Control", "no-cache")
            self.send_header("Transfer-Encoding", "chunked")
            for name, value in reply.headers.items():
                self.send_header(name, value)
            self.end_headers()
        except OSError:
            self._hung_up(recorded)
            return
        content_sent = 0
        fault = _fault(reply)
        for n, (kind, data) in enumerate(answer.frames()):
            limit = reply.break_after
            if limit is not None and _breaks_before(kind, content_sent, limit):
                self._crash()
                return
            if fault is not None and _strikes(kind, content_sent, fault[1]):
                if not self._strike(recorded, fault[0], data):
                    return
                fault = None  # a malformed event strikes once; the stream goes on
            gone = (
                _wait_unless_closed(self.connection, reply.chunk_delay)
                if n and reply.chunk_delay > 0
                else _peer_state(self.connection, 0) == "closed"
            )
            if gone:
                self._hung_up(recorded)
                return
            last = kind == "done"
            if last:
                self.server.fake._set_completed(recorded)  # before the client can see [DONE]
            try:
                self._write_chunk(data, last)
            except OSError:
                self._hung_up(recorded)
                return
            content_sent += kind == "content"

    def _strike(self, recorded: Recorded, fault: str, frame: bytes) -> bool:
        """Do what the fault does to the stream; True when the stream goes on after it."""
        try:
            if fault == "malformed":
                self._write_chunk(MALFORMED_EVENT, last=False)
                return True
            if fault == "stall":
                self._hold(recorded)
            elif fault == "end":
                self.wfile.write(b"0\r\n\r\n")  # the body's proper end, mid-answer
                self.wfile.flush()
            elif fault == "cut":
                self._write_chunk(frame[: len(frame) // 2], last=False)
                self._crash()
        except OSError:
            self._hung_up(recorded)
        return False

    def _hold(self, recorded: Recorded) -> None:
        """Send nothing and keep the connection open until the client hangs up or the
        fake stops: a server that is stuck, not one that is gone."""
        self.close_connection = True
        while not self.server.stopping:
            if _wait_unless_closed(self.connection, HOLD_POLL_SECONDS):
                self._hung_up(recorded)
                return

    def _complete(self, recorded: Recorded, answer: _Answer) -> None:
        """A non-streamed answer: paced like the stream it stands for, then sent whole."""
        reply = answer.reply
        if reply.endless or _fault(reply) is not None:
            self._hold(recorded)  # no whole answer can come of these
            return
        pause = reply.chunk_delay * answer.delta_count()
        if pause > 0 and _wait_unless_closed(self.connection, pause):
            self._hung_up(recorded)
            return
        if reply.break_after is not None:
            self._crash()  # a server dying mid-generation sends no response at all
            return
        self.server.fake._set_completed(recorded)
        try:
            self._send_json(200, answer.completion(), reply.headers)
        except OSError:
            self._hung_up(recorded)

    def _write_chunk(self, data: bytes, last: bool) -> None:
        """One HTTP chunk per SSE event, written straight to the socket (no buffering)."""
        out = b"%x\r\n%s\r\n" % (len(data), data)
        if last:
            out += b"0\r\n\r\n"
        self.wfile.write(out)
        self.wfile.flush()

    def _hung_up(self, recorded: Recorded) -> None:
        self.close_connection = True
        if not self.server.stopping:
            self.server.fake._mark_hung_up(recorded)

    def _crash(self) -> None:
        """Drop the connection mid-body, the way a server that died would."""
        self.close_connection = True
        try:
            self.connection.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass

    def _send_json(self, status: int, body: dict[str, Any], headers: dict[str, str]) -> None:
        data = json.dumps(body, ensure_ascii=False).encode("utf-8")
        self.send_response(status)
        self.send_header("Content-Type", JSON_CONTENT_TYPE)
        for name, value in headers.items():
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)
        self.wfile.flush()


def _parse_chat(raw: bytes) -> tuple[dict, tuple[int, dict[str, Any]] | None]:
    """The request JSON, or the 400 OpenAI sends for a body it cannot use."""
    try:
        body = json.loads(raw or b"null")
    except ValueError:
        body = None
    if not isinstance(body, dict):
        message = (
            "We could not parse the JSON body of your request. (HINT: This likely means you "
            "aren't using your HTTP library correctly. The OpenAI API expects a JSON payload.)"
        )
        return {}, (400, _error_body(message, None, None))
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        message = "Missing required parameter: 'messages'."
        return body, (400, _error_body(message, "missing_required_parameter", "messages"))
    return body, None


def _error_body(message: str, code: str | None, param: str | None) -> dict[str, Any]:
    error = {"message": message, "type": "invalid_request_error", "param": param, "code": code}
    return {"error": error}


class FakeLLM(LoopbackFake):
    """The fake model server. Use ``with FakeLLM() as llm:`` or start()/stop().

    Queue answers with ``script(Reply(...), ...)``; each chat request takes the next one, and
    ``default`` answers when the queue is empty. ``requests`` records every chat request, with
    when the server noticed a hang-up and whether the answer went out whole.
    """

    _handler_class = _Handler
    _thread_name = "fake-llm"

    def __init__(
        self,
        models: Sequence[str] = ("fake-model",),
        api_key: str | None = None,
        n_ctx: int | None = None,
        ollama_num_ctx: int | None = None,
        routes: Mapping[tuple[str, str], Route] | None = None,
        response_formats: Sequence[str] | None = None,
        response_format_refusal: str = "openai",
        anything: dict[str, Any] | None = None,
    ) -> None:
        super().__init__()
        self.response_formats = response_formats
        """The response_format types taken (None: any); another is refused."""
        self.response_format_refusal = response_format_refusal
        """How a refusal is worded: "openai" or "llamacpp"."""
        self.routes = dict(routes or {})  # (method, path) -> answer, before the built-in ones
        self.anything = anything
        """A server that takes anything: this JSON with 200 on every path it serves nothing
        else on, instead of a 404 (a catch-all proxy, another kind of server)."""
        self.models = list(models)
        self.api_key = api_key
        self.n_ctx = n_ctx
        self.ollama_num_ctx = ollama_num_ctx
        self.default = Reply(text="OK")
        self.requests: list[Recorded] = []
        self._queue: deque[Reply] = deque()
        self._lock = threading.Lock()
        self._changed = threading.Condition(self._lock)
        self._answers = 0
        self._calls = 0
        self._created = int(time.time())

    @property
    def api_base(self) -> str:
        """What an OpenAI client takes as its base URL."""
        return self.url + "/v1"

    # -- test controls -----------------------------------------------------------------------

    def script(self, *replies: Reply) -> None:
        """Queue answers; chat requests take them one each, in order."""
        with self._lock:
            self._queue.extend(replies)

    def clear(self) -> None:
        """Forget recorded requests and queued replies (the `requests` list object is kept)."""
        with self._lock:
            self.requests.clear()
            self._queue.clear()
            self._calls = 0
            self.response_formats = None
            self.response_format_refusal = "openai"

    def wait_hung_up(self, index: int = -1, timeout: float = 5.0) -> float | None:
        """Block until the server noticed that request's client hang up; its hung_up_at, or None.

        A Stop test needs this because the server notices the disconnect on its own thread, a
        moment after the client closed.
        """
        deadline = time.monotonic() + timeout
        with self._changed:
            while True:
                recorded = self._at(index)
                if recorded is not None and recorded.hung_up_at is not None:
                    return recorded.hung_up_at
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return None
                self._changed.wait(remaining)

    # -- called from server threads ----------------------------------------------------------

    def _at(self, index: int) -> Recorded | None:
        try:
            return self.requests[index]
        except IndexError:
            return None

    def _record(self, body: dict, headers: dict[str, str], path: str, port: int) -> Recorded:
        recorded = Recorded(body, headers, path, time.monotonic(), client_port=port)
        with self._changed:
            self.requests.append(recorded)
            self._changed.notify_all()
        return recorded

    def _next_reply(self) -> Reply:
        with self._lock:
            return self._queue.popleft() if self._queue else self.default

    def _resolve(self, reply: Reply, body: dict, model: str) -> _Answer:
        """Fix what must be unique or computed once: the completion id, call ids, usage."""
        with self._lock:
            self._answers += 1
            ident = f"chatcmpl-fake{self._answers}"
            call_ids = []
            for call in reply.tool_calls:
                self._calls += 1
                call_ids.append(call.id or f"call_{self._calls}")
        options = body.get("stream_options")
        include_usage = isinstance(options, dict) and bool(options.get("include_usage"))
        usage = reply.usage if reply.usage is not None else _estimate_usage(body, reply)
        return _Answer(reply, ident, self._created, model, call_ids, usage, include_usage, body)

    def _set_completed(self, recorded: Recorded) -> None:
        with self._changed:
            recorded.completed = True
            self._changed.notify_all()

    def _mark_hung_up(self, recorded: Recorded) -> None:
        with self._changed:
            if recorded.hung_up_at is None:
                recorded.hung_up_at = time.monotonic()
            recorded.completed = False
            self._changed.notify_all()

    def _auth_error(self, headers: dict[str, str]) -> tuple[int, dict[str, Any]] | None:
        """OpenAI's 401s: one for a missing key, another for a wrong one."""
        if self.api_key is None:
            return None
        given = headers.get("authorization", "")
        if not given.startswith("Bearer ") or not given[len("Bearer ") :].strip():
            message = (
                "You didn't provide an API key. You need to provide your API key in an "
                "Authorization header using Bearer auth (i.e. Authorization: Bearer YOUR_KEY)."
            )
            return 401, _error_body(message, None, None)
        if given[len("Bearer ") :].strip() != self.api_key:
            return 401, _default_error(401, self.models[0], {})
        return None

    def _format_refusal(self, body: dict) -> tuple[int, dict[str, Any]] | None:
        """A response_format this server does not take, refused as the server words it."""
        wanted = body.get("response_format")
        if self.response_formats is None or not isinstance(wanted, dict):
            return None
        kind = str(wanted.get("type", ""))
        if kind in self.response_formats or kind == "text":
            return None
        if self.response_format_refusal == "llamacpp":
            # llama-server's own words for a type it lacks (before json_schema came)
            message = (
                f'response_format type must be one of "text" or "json_object", but got: {kind}'
            )
            return 400, {
                "error": {"code": 400, "message": message, "type": "invalid_request_error"}
            }
        message = (
            f"Invalid parameter: 'response_format' of type '{kind}' is not supported with "
            "this model."
        )
        return 400, _error_body(message, None, "response_format")

    def _route(
        self, method: str, path: str, headers: dict[str, str], raw: bytes
    ) -> tuple[int, dict[str, Any]]:
        """Everything but chat: the model list, llama.cpp's /props, Ollama's /api/show."""
        if path in MODELS_PATHS or path == "/props":
            refusal = self._auth_error(headers)
            if refusal is not None:
                return refusal
        if (method, path) in self.routes:
            return self.routes[method, path](raw)
        if path in MODELS_PATHS and method == "GET":
            return 200, self._models_body()
        if path == "/props" and method == "GET" and self.n_ctx is not None:
            return 200, self._props_body(self.n_ctx)
        if path == "/api/show" and method == "POST" and self.ollama_num_ctx is not None:
            return self._show(raw, self.ollama_num_ctx)
        if self.anything is not None:
            return 200, self.anything
        return 404, _error_body(f"Invalid URL ({method} {path})", None, None)

    def _models_body(self) -> dict[str, Any]:
        data = [
            {"id": m, "object": "model", "created": self._created, "owned_by": "fake"}
            for m in self.models
        ]
        return {"object": "list", "data": data}

    def _props_body(self, n_ctx: int) -> dict[str, Any]:
        """llama-server's /props: n_ctx under default_generation_settings, and at the top too."""
        model = self.models[0]
        return {
            "default_generation_settings": {
                "id": 0,
                "id_task": -1,
                "n_ctx": n_ctx,
                "speculative": False,
                "is_processing": False,
                "params": {"n_predict": -1, "temperature": 0.8, "top_k": 40, "top_p": 0.95},
            },
            "total_slots": 1,
            "model_alias": model,
            "model_path": f"/models/{model}.gguf",
            "modalities": {"vision": False, "audio": False},
            "chat_template": "{% for message in messages %}{{ message.content }}{% endfor %}",
            "bos_token": "<bos>",
            "eos_token": "<eos>",
            "build_info": "b0000-fake",
            "n_ctx": n_ctx,
            "is_sleeping": False,
        }

    def _show(self, raw: bytes, num_ctx: int) -> tuple[int, dict[str, Any]]:
        """Ollama's /api/show: the served window in `parameters`, the trained one in model_info."""
        try:
            request = json.loads(raw or b"{}")
        except ValueError:
            return 400, {"error": "invalid character in request body"}
        if not isinstance(request, dict):
            request = {}
        name = str(request.get("model") or request.get("name") or "")
        if not name:
            return 400, {"error": "model is required"}
        known = {m.removesuffix(":latest") for m in self.models}
        if name.removesuffix(":latest") not in known:
            return 404, {"error": f"model '{name}' not found"}
        parameters = "\n".join(
            f"{key:<{OLLAMA_PARAM_WIDTH}} {value}"
            for key, value in (("num_ctx", num_ctx), ("stop", '"<|eot_id|>"'))
        )
        return 200, {
            "license": "",
            "modelfile": f"FROM /models/blobs/sha256-fake\nPARAMETER num_ctx {num_ctx}",
            "parameters": parameters,
            "template": "{{ .Prompt }}",
            "details": {
                "parent_model": "",
                "format": "gguf",
                "family": "llama",
                "families": ["llama"],
                "parameter_size": "8.0B",
                "quantization_level": "Q4_K_M",
            },
            "model_info": {
                "general.architecture": "llama",
                "general.parameter_count": 8030261248,
                "llama.context_length": max(OLLAMA_TRAINED_CONTEXT, num_ctx),
                "llama.embedding_length": 4096,
            },
            "capabilities": ["completion", "tools"],
            "modified_at": "2026-01-01T00:00:00.000000000Z",
        }
