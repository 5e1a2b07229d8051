"""The MCP server's Streamable HTTP transport at /mcp (for Open WebUI and remote agents).

The SDK's transport is Starlette, hence here, in the web layer. It runs stateless, each
answer one JSON body: the tools keep nothing between calls, and a restart loses no session.
The checks of app/api/access.py come first, as for every path: the Host (DNS rebinding,
421), the Origin and Sec-Fetch-Site (another site's page, 403), the body's size and shape,
and the bearer token when AUTH_TOKEN is set (401). The SDK's own Host and Origin check is
off: it knows neither ALLOWED_HOSTS nor our own origin."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from mcp.server.transport_security import TransportSecuritySettings
from starlette.routing import Route

from app.api.access import MCP_METHODS, MCP_PATH, Receive, Scope, Send, refuse
from app.chat.services import Services
from app.mcp.server import build_server
from app.mcp.tools import WebTools


class McpEndpoint:
    """The ASGI endpoint at /mcp; its session manager runs as long as the app."""

    def __init__(self) -> None:
        self.manager: StreamableHTTPSessionManager | None = None

    @asynccontextmanager
    async def running(self, services: Services) -> AsyncIterator[None]:
        tools = WebTools(services.searcher, services.settings, services.extraction)
        server = build_server(tools)
        server.streamable_http_app(
            stateless_http=True,
            json_response=True,
            transport_security=TransportSecuritySettings(enable_dns_rebinding_protection=False),
        )
        self.manager = server.session_manager
        try:
            async with self.manager.run():
                yield
        finally:
            self.manager = None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if self.manager is None:
            await refuse(send, 503, "the MCP server is not running")
            return
        await self.manager.handle_request(scope, receive, send)

    def route(self) -> Route:
        return Route(MCP_PATH, endpoint=self, methods=sorted(MCP_METHODS))
