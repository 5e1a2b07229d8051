"""The MCP SDK's Streamable HTTP session manager over our tools, for /mcp (app/api/mcp.py).

A module of its own because importing the SDK costs the service 25 MB of memory at start
(docs/performance.md): app/api/mcp.py imports this one when the first /mcp request
arrives, so a service that never serves /mcp never loads the SDK."""

from __future__ import annotations

from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from mcp.server.transport_security import TransportSecuritySettings

from app.chat.services import Services
from app.mcp.server import build_server
from app.mcp.tools import WebTools


def session_manager(services: Services) -> StreamableHTTPSessionManager:
    """Stateless, each answer one JSON body: the tools keep nothing between calls, and a
    restart loses no session. The SDK's own Host and Origin check is off: it knows
    neither ALLOWED_HOSTS nor our own origin (app/api/access.py checks them first)."""
    tools = WebTools(services.searcher, services.settings, services.extraction)
    server = build_server(tools)
    server.streamable_http_app(
        stateless_http=True,
        json_response=True,
        transport_security=TransportSecuritySettings(enable_dns_rebinding_protection=False),
    )
    return server.session_manager
