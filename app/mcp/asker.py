"""Who a request to /mcp came as, for its tools: a module of its own, without the SDK, so
that the web layer can set it without loading the SDK at start."""

from __future__ import annotations

from contextvars import ContextVar

ASKER: ContextVar[int | None] = ContextVar("mcp_asker", default=None)
"""Household mode: the person a request to /mcp came as (their personal token, their
session), set by the endpoint for the tools its request runs, which inherit its context:
their own search cache. None: no one named (AUTH_TOKEN, the single-user modes, stdio)."""
