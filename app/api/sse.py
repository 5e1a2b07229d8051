"""A turn's answer as Server-Sent Events: `data: {json}` per event (with its `id:` when it
has one: a page's turn, app/chat/runs.py), a comment line every PING_SECONDS so proxies
keep an idle stream open, and the client's hang-up cancels the stream where it waits (for
/v1 that is Stop; a page's turn runs on without its reader).

One task streams and one listens: a response per turn on two shared cores is worth
keeping lean (sse-starlette runs four tasks in a task group, a fifth of a short turn's
CPU here, bench/turn_cpu.py)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator, Awaitable, Callable, Mapping
from contextlib import aclosing
from typing import Any

import anyio
from starlette.responses import Response
from starlette.types import Receive, Scope, Send

from app import jsoncodec
from app.chat.runs import Numbered

PING_SECONDS = 15.0
PING = b": ping\n\n"


def encode(event: Mapping[str, Any] | Numbered) -> bytes:
    if isinstance(event, Numbered):
        return b"id: %d\ndata: %s\n\n" % (event.id, jsoncodec.dumps(event.event))
    return b"data: " + jsoncodec.dumps(event) + b"\n\n"


async def nothing() -> None:
    """The end of a stream that holds nothing to release."""


def encode_named(event: Mapping[str, Any] | Numbered) -> bytes:
    """An event with its type as the SSE event name too, as the Responses API sends it."""
    body = event.event if isinstance(event, Numbered) else event
    return b"event: " + str(body["type"]).encode() + b"\n" + encode(event)


class EventStream(Response):
    """Streams `events`, closing the generator before `closed` runs, once, however the
    stream ends (also when the client left before it started)."""

    media_type = "text/event-stream"

    def __init__(
        self,
        events: AsyncGenerator[Mapping[str, Any], None] | AsyncGenerator[Numbered, None],
        closed: Callable[[], Awaitable[None]] = nothing,
        end: bytes = b"",
        named: bool = False,
    ) -> None:
        self.events = events
        self.closed = closed
        self.end = end
        """Sent after the last event of a stream that was not stopped (/v1's [DONE])."""
        self.encode = encode_named if named else encode
        self.status_code = 200
        self.background = None
        # no-store: an answer is never replayed from a cache; X-Accel-Buffering: nginx
        # would otherwise hold the events back until its buffer fills.
        self.init_headers({"cache-control": "no-store", "x-accel-buffering": "no"})

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            await send({"type": "http.response.start", "status": 200, "headers": self.raw_headers})
            with anyio.CancelScope() as stream:
                listener = asyncio.create_task(listen(receive, send, stream))
                try:
                    async with aclosing(self.events) as events:
                        async for event in events:
                            await send(
                                {
                                    "type": "http.response.body",
                                    "body": self.encode(event),
                                    "more_body": True,
                                }
                            )
                finally:
                    listener.cancel()
        finally:
            await self.closed()
        # After `closed`: a client that sends again the moment this stream ends finds
        # what it released free.
        if not stream.cancel_called:
            await send({"type": "http.response.body", "body": self.end, "more_body": False})


async def listen(receive: Receive, send: Send, stream: anyio.CancelScope) -> None:
    """Pings while the stream is open; cancels it when the client hangs up."""
    while True:
        try:
            with anyio.fail_after(PING_SECONDS):
                message = await receive()
        except TimeoutError:
            await send({"type": "http.response.body", "body": PING, "more_body": True})
            continue
        if message["type"] == "http.disconnect":
            stream.cancel()
            return
