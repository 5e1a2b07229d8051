"""The MCP server's Streamable HTTP transport at /mcp (for Open WebUI and remote agents).

The SDK's transport is Starlette, hence here, in the web layer. It runs stateless, each
answer one JSON body, a tool call that asks for progress an SSE stream
(app/api/mcp_transport.py): the tools keep nothing between calls, and a restart loses no
session.
The checks of app/api/access.py come first, as for every path: the Host (DNS rebinding,
421), the Origin and Sec-Fetch-Site (another site's page, 403), the body's size and shape,
and the bearer token when AUTH_TOKEN is set (401). The SDK's own Host and Origin check is
off: it knows neither ALLOWED_HOSTS nor our own origin.

The SDK (25 MB of memory, seconds of imports on a loaded machine) is loaded when the
first /mcp request arrives, in a thread, not when the service starts: its session manager
then runs in a task of its own until the service stops."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING

from starlette.routing import Route

from app.api.access import MCP_METHODS, MCP_PATH, Receive, Scope, Send, refuse, state_person
from app.chat.services import Services
from app.mcp.asker import ASKER

if TYPE_CHECKING:
    from app.api.mcp_transport import Transports

logger = logging.getLogger(__name__)

Build = Callable[[Services], "Transports"]


def load_sdk() -> Build:
    """The SDK's import, on first use (in a thread: it takes seconds when the machine is
    busy, which the event loop must not wait for)."""
    from app.api.mcp_transport import transports

    return transports


class McpEndpoint:
    """The ASGI endpoint at /mcp; its session manager, once started, runs as long as the
    app does."""

    def __init__(self) -> None:
        self.manager: Transports | None = None
        self.services: Services | None = None
        self.runner: asyncio.Task[None] | None = None
        self.ready: asyncio.Future[None] | None = None
        self.stop: asyncio.Event | None = None

    @asynccontextmanager
    async def running(self, services: Services) -> AsyncIterator[None]:
        self.services, self.stop = services, asyncio.Event()
        try:
            yield
        finally:
            self.services = None
            self.stop.set()
            if self.runner is not None:
                await asyncio.gather(self.runner, return_exceptions=True)
            self.runner = self.ready = None

    async def started(self) -> Transports | None:
        """The session manager, started by the first request (the others wait for it)."""
        if self.manager is not None or self.services is None or self.stop is None:
            return self.manager
        if self.ready is None:
            self.ready = asyncio.get_running_loop().create_future()
            self.runner = asyncio.create_task(self.serve(self.services, self.stop, self.ready))
        try:
            await asyncio.shield(self.ready)
        except Exception:
            return None
        return self.manager

    async def serve(
        self, services: Services, stop: asyncio.Event, ready: asyncio.Future[None]
    ) -> None:
        """The session manager's lifetime, in a task of its own: its task group is entered
        and left in the same task, at the first request and when the service stops."""
        try:
            build = await asyncio.to_thread(load_sdk)
            manager = build(services)
            async with manager.run():
                self.manager = manager
                ready.set_result(None)
                await stop.wait()
        except Exception as error:
            logger.error("the MCP server could not start", exc_info=error)
            if not ready.done():
                ready.set_exception(error)
        finally:
            self.manager = None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        manager = await self.started()
        if manager is None:
            await refuse(send, 503, "the MCP server is not running")
            return
        # The tools run in tasks this request starts, which inherit its context.
        person = state_person(scope)
        ASKER.set(person.id if person is not None else None)
        await manager.handle_request(scope, receive, send)

    def route(self) -> Route:
        return Route(MCP_PATH, endpoint=self, methods=sorted(MCP_METHODS))
