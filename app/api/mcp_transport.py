"""The MCP SDK's Streamable HTTP session managers over our tools, for /mcp (app/api/mcp.py).

A module of its own because importing the SDK costs the service 25 MB of memory at start
(docs/performance.md): app/api/mcp.py imports this one when the first /mcp request
arrives, so a service that never serves /mcp never loads the SDK."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass

from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from mcp.server.transport_security import TransportSecuritySettings

from app import jsoncodec
from app.api.access import Receive, Scope, Send, replay
from app.chat.services import Services
from app.mcp.research import ResearchTool
from app.mcp.server import build_server
from app.mcp.tools import WebTools

LONG_TOOLS = frozenset({"research"})


@dataclass
class Transports:
    """Two stateless managers over one server: the tools keep nothing between calls, and
    a restart loses no session. Each answer is one JSON body, but for a tool call that
    asks for progress (a progressToken in its _meta) or runs for minutes (research),
    answered as an SSE stream: the only answer that carries notifications before the
    result, and one whose closing the SDK hears, cancelling the call (a JSON answer is
    waited for whatever the client does, and a stateless server cannot match a
    notifications/cancelled sent apart to the call it names)."""

    answers: StreamableHTTPSessionManager
    streams: StreamableHTTPSessionManager

    @asynccontextmanager
    async def run(self) -> AsyncIterator[None]:
        async with self.answers.run(), self.streams.run():
            yield

    async def handle_request(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["method"] != "POST":
            await self.answers.handle_request(scope, receive, send)
            return
        body = await whole_body(receive)
        streamed = streamed_call(body) and accepts_events(scope)
        manager = self.streams if streamed else self.answers
        await manager.handle_request(scope, replay(body, receive), send)


async def whole_body(receive: Receive) -> bytes:
    """The request's body (app/api/access.py has read it whole, within its bounds)."""
    chunks = []
    while True:
        message = await receive()
        chunks.append(message.get("body", b""))
        if not message.get("more_body"):
            return b"".join(chunks)


def streamed_call(body: bytes) -> bool:
    """Whether the body is a tool call with a progressToken, or of a tool that runs for
    minutes (the SDK checks the rest)."""
    try:
        message = jsoncodec.loads(body)
    except ValueError:
        return False
    if not isinstance(message, dict) or message.get("method") != "tools/call":
        return False
    params = message.get("params")
    if not isinstance(params, dict):
        return False
    meta = params.get("_meta")
    asked = isinstance(meta, dict) and meta.get("progressToken") is not None
    return asked or params.get("name") in LONG_TOOLS


def accepts_events(scope: Scope) -> bool:
    accept = dict(scope["headers"]).get(b"accept", b"")
    return b"text/event-stream" in accept


def transports(services: Services) -> Transports:
    """The server's managers. The SDK's own Host and Origin check is off: it knows
    neither ALLOWED_HOSTS nor our own origin (app/api/access.py checks them first)."""
    tools = WebTools(services.searcher, services.settings, services.extraction)
    researcher = ResearchTool(
        services.searcher, services.settings, services.model, services.extraction
    )
    lowlevel = build_server(tools, researcher)._lowlevel_server
    security = TransportSecuritySettings(enable_dns_rebinding_protection=False)
    return Transports(
        StreamableHTTPSessionManager(
            lowlevel, json_response=True, stateless=True, security_settings=security
        ),
        StreamableHTTPSessionManager(lowlevel, stateless=True, security_settings=security),
    )
