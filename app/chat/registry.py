"""The registry of our tools: the model's declarations, the tool note's uses left, the MCP
server's web tools and the command line's search and fetch all come from here. A new tool
is one module (like app/chat/web_search.py) and one line below."""

from __future__ import annotations

from typing import Any

from app.chat.tool import Tool
from app.chat.web_fetch import WEB_FETCH
from app.chat.web_search import WEB_SEARCH

REGISTRY: tuple[Tool[Any], ...] = (WEB_SEARCH, WEB_FETCH)
"""In the order the model is offered them."""
TOOLS: dict[str, Tool[Any]] = {tool.name: tool for tool in REGISTRY}
