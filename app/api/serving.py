"""How the service listens: uvicorn (httptools on uvloop), with the limits it lacks against
slow clients (docs/security.md, "Slow clients").

uvicorn closes a connection idle between two requests (`timeout_keep_alive`), but nothing
bounds the wait for a request's headers: a socket that sends half a request line and then
a header every few seconds is kept forever, and each costs a file descriptor. Once the
process runs out of them, every new connection is accepted and dropped at once, the
owner's among them. uvicorn's `limit_concurrency` does not help: it counts those sockets
too, and answers every request beyond it, the owner's, with a 503. So `GuardedHttp`:

- gives each request HEADER_TIMEOUT seconds for its headers, from the connection's start
  or the previous answer's end, and at most MAX_HEADER_BYTES of them (what h11's
  `max_incomplete_event_size` bounds; httptools has no such limit of its own);
- gives a request BODY_TIMEOUT seconds more for its body: a body trickled a byte at a
  time would hold its connection (and the handler reading it) forever, and such a
  connection is busy with a request, so no new one makes room by closing it;
- keeps at most MAX_CONNECTIONS connections: one more closes the connection that has
  waited longest for its headers (a slow client's, or an idle kept-alive one, which a
  browser opens again at no cost), so a request that comes whole is always served; when
  every connection is busy with a request, the new one is closed instead;
- logs what it closed: the first of each kind at once, then a count every
  LOG_EVERY_SECONDS.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import resource
import sys
from collections import Counter
from dataclasses import dataclass
from typing import Any

import uvicorn
from uvicorn.config import STARTUP_FAILURE
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from app import config

logger = logging.getLogger(__name__)

KEEP_ALIVE_SECONDS = 5
"""An idle kept-alive connection is closed after this (uvicorn's default, stated)."""
MAX_HEADER_BYTES = 64 * 1024
FILES_RESERVED = 300
"""File descriptors kept for the service's own use (the model server's and SearXNG's
connection pools, the database, the extraction worker, logs): connections get the rest."""
LOG_EVERY_SECONDS = 10.0


@dataclass(frozen=True)
class ConnectionLimits:
    header_timeout: float
    max_connections: int
    body_timeout: float


class ClosedLog:
    """What the limits closed, logged without flooding the log: the first closure of each
    kind in full, the rest counted and said every LOG_EVERY_SECONDS while they go on."""

    def __init__(self) -> None:
        self.counts: Counter[str] = Counter()
        self.flushing: asyncio.TimerHandle | None = None

    def add(self, reason: str, client: tuple[str, int] | None) -> None:
        if reason in self.counts:
            self.counts[reason] += 1
            return
        logger.warning("closed a connection from %s: %s", client[0] if client else "?", reason)
        self.counts[reason] = 0
        if self.flushing is None:
            loop = asyncio.get_running_loop()
            self.flushing = loop.call_later(LOG_EVERY_SECONDS, self.flush)

    def flush(self) -> None:
        self.flushing = None
        for reason, count in self.counts.items():
            if count:
                logger.warning(
                    "closed %d more connections in %g s: %s", count, LOG_EVERY_SECONDS, reason
                )
        self.counts.clear()


class ServiceConfig(uvicorn.Config):
    """uvicorn's Config with the limits, and what every connection of the server shares."""

    def __init__(self, app: Any, *, limits: ConnectionLimits, **options: Any) -> None:
        super().__init__(app, http=GuardedHttp, timeout_keep_alive=KEEP_ALIVE_SECONDS, **options)
        self.limits = limits
        self.waiting: dict[GuardedHttp, None] = {}
        """Connections waiting for a request's headers, the longest-waiting first."""
        self.closed = ClosedLog()


class GuardedHttp(HttpToolsProtocol):
    """uvicorn's httptools protocol with a deadline and a size for each request's headers,
    and room made for a new connection (the module's docstring)."""

    config: ServiceConfig

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self.header_deadline: asyncio.TimerHandle | None = None
        self.body_deadline: asyncio.TimerHandle | None = None
        self.header_bytes = 0
        self.await_headers()
        self.make_room()

    def data_received(self, data: bytes) -> None:
        super().data_received(data)
        if self.header_deadline is None or self.transport.is_closing():
            return
        self.header_bytes += len(data)  # still no whole header block after these bytes
        if self.header_bytes > MAX_HEADER_BYTES:
            self.transport.write(
                b"HTTP/1.1 431 Request Header Fields Too Large\r\n"
                b"content-length: 0\r\nconnection: close\r\n\r\n"
            )
            self.close(f"sent over {MAX_HEADER_BYTES:,} bytes of headers")

    def on_headers_complete(self) -> None:
        self.headers_arrived()
        super().on_headers_complete()
        self.body_deadline = self.loop.call_later(self.config.limits.body_timeout, self.body_late)

    def on_message_complete(self) -> None:
        self.body_arrived()
        super().on_message_complete()

    def on_response_complete(self) -> None:
        super().on_response_complete()
        if self.timeout_keep_alive_task is not None:  # kept alive, waiting for a request
            self.await_headers()

    def connection_lost(self, exc: Exception | None) -> None:
        self.headers_arrived()
        self.body_arrived()
        super().connection_lost(exc)

    def await_headers(self) -> None:
        self.header_bytes = 0
        self.config.waiting[self] = None
        self.header_deadline = self.loop.call_later(
            self.config.limits.header_timeout, self.headers_late
        )

    def headers_arrived(self) -> None:
        if self.header_deadline is not None:
            self.header_deadline.cancel()
            self.header_deadline = None
        self.config.waiting.pop(self, None)

    def body_arrived(self) -> None:
        if self.body_deadline is not None:
            self.body_deadline.cancel()
            self.body_deadline = None

    def body_late(self) -> None:
        self.body_deadline = None
        if not self.cycle.response_started:  # else the 408 would follow another answer
            self.transport.write(
                b"HTTP/1.1 408 Request Timeout\r\ncontent-length: 0\r\nconnection: close\r\n\r\n"
            )
        self.close(f"its request's body did not come within {self.config.limits.body_timeout:g} s")

    def headers_late(self) -> None:
        self.close(
            f"its request's headers did not come within {self.config.limits.header_timeout:g} s"
        )

    def make_room(self) -> None:
        """Beyond MAX_CONNECTIONS: the connection that has waited longest for its headers
        goes; this new one only when every other is busy with a request."""
        limit = self.config.limits.max_connections
        if len(self.connections) <= limit:
            return
        oldest = next(iter(self.config.waiting))
        if oldest is self:
            self.close(f"{limit} connections are busy with requests (MAX_CONNECTIONS)")
        else:
            oldest.close(f"made room for a new connection ({limit}, MAX_CONNECTIONS)")

    def close(self, reason: str) -> None:
        self.headers_arrived()
        self.config.closed.add(reason, self.client)
        self.transport.close()


def open_files_limit() -> int:
    """The process's open-file limit, raised to the most it may have (often 1,024 of a
    hard 524,288 under systemd and Docker)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard == resource.RLIM_INFINITY or soft < hard:
        wanted = hard if hard != resource.RLIM_INFINITY else max(soft, 65536)
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (wanted, hard))
            soft = wanted
        except (ValueError, OSError):
            pass
    return soft


def connection_limits(settings: config.Settings) -> ConnectionLimits:
    """MAX_CONNECTIONS, lowered to what the open-file limit leaves for connections."""
    room = open_files_limit() - FILES_RESERVED
    limit = max(1, min(settings.max_connections, room))
    if limit < settings.max_connections:
        logger.warning(
            "serving at most %d connections, not MAX_CONNECTIONS=%d: the open-file limit "
            "leaves no more (raise it: ulimit -n, or LimitNOFILE= under systemd)",
            limit,
            settings.max_connections,
        )
    return ConnectionLimits(settings.header_timeout, limit, settings.body_timeout)


def server_config(
    app: Any, settings: config.Settings, host: str, port: int, **options: Any
) -> ServiceConfig:
    """How `serve` (and the tests' services on a socket) listen."""
    return ServiceConfig(
        app,
        limits=connection_limits(settings),
        host=host,
        port=port,
        # uvicorn believes X-Forwarded-For from 127.0.0.1 unless told otherwise: any
        # local process could then pose as any client (the login limit is per client).
        # The app reads it from TRUSTED_PROXIES itself (access.Forwarded), keeping the
        # connection's own address, which household mode's header is believed from.
        proxy_headers=False,
        **options,
    )


def run(served: ServiceConfig) -> None:
    """Serve until stopped, as uvicorn.run does: Ctrl-C is a normal end, a server that
    could not start (its port taken) exits with uvicorn's status 3."""
    server = uvicorn.Server(served)
    with contextlib.suppress(KeyboardInterrupt):
        server.run()
    if not server.started:
        sys.exit(STARTUP_FAILURE)
