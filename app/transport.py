"""httpx's client API over aiohttp's connections, for the service's hot requests: the model
server's streams and SearXNG's answers.

httpx parses HTTP in pure Python (h11): about 1.5 ms of CPU for a 27-event stream and 0.7 ms
for a SearXNG answer, against 0.7 and 0.5 ms with aiohttp's C parser underneath
(bench/turn_cpu.py measures the whole turn). On two shared cores that is a third of a
search turn's CPU. The callers keep httpx's requests, responses, httpx-sse and httpx's
exceptions; this module only carries the bytes and says what went wrong in httpx's terms,
so "connection refused", "timed out" and "cut mid-body" stay three different messages.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import aiohttp
import certifi
import httpx

from app.tls import tls_context

MAX_CONNECTIONS = 100  # httpx's default

# aiohttp's exception -> httpx's, the most specific first (each aiohttp class is a subclass
# of the ones below it).
ERRORS: tuple[tuple[type[Exception], type[httpx.TransportError]], ...] = (
    (aiohttp.ConnectionTimeoutError, httpx.ConnectTimeout),
    (aiohttp.ServerTimeoutError, httpx.ReadTimeout),
    (aiohttp.ClientConnectorError, httpx.ConnectError),
    (aiohttp.ServerDisconnectedError, httpx.RemoteProtocolError),
    (aiohttp.ClientPayloadError, httpx.RemoteProtocolError),
    (aiohttp.ClientResponseError, httpx.RemoteProtocolError),
    (aiohttp.NonHttpUrlClientError, httpx.UnsupportedProtocol),
    (aiohttp.ClientConnectionError, httpx.ReadError),
    (aiohttp.ClientError, httpx.TransportError),
)


def as_httpx_error(exc: aiohttp.ClientError, request: httpx.Request) -> httpx.TransportError:
    """The httpx exception that says what `exc` means."""
    ours = next(ours for theirs, ours in ERRORS if isinstance(exc, theirs))
    return ours(str(exc) or exc.__class__.__name__, request=request)


class AiohttpStream(httpx.AsyncByteStream):
    """A response body as aiohttp receives it, each piece as soon as it arrives (an event
    stream must not wait for a buffer to fill)."""

    def __init__(self, response: aiohttp.ClientResponse, request: httpx.Request) -> None:
        self.response = response
        self.request = request

    async def __aiter__(self) -> AsyncIterator[bytes]:
        try:
            async for piece in self.response.content.iter_any():
                yield piece
        except aiohttp.ClientError as exc:
            raise as_httpx_error(exc, self.request) from exc

    async def aclose(self) -> None:
        # A body read to its end leaves the connection for the next request; one left
        # unread (Stop) closes it, which is how the server learns the client is gone.
        self.response.release()


class Response(httpx.Response):
    """httpx's client binds each response to its own stream (the stream refers back to the
    response): a reference cycle per request, left to the garbage collector, whose full
    passes then took 10-18 ms with the loop held at 50 streams. Closed, a response lets go
    of its stream and is freed at once."""

    async def aclose(self) -> None:
        await super().aclose()
        self.stream = CLOSED


CLOSED = httpx.ByteStream(b"")


class AiohttpTransport(httpx.AsyncBaseTransport):
    """One aiohttp session, made on the first request (aiohttp wants a running loop)."""

    def __init__(self) -> None:
        # Asked for now, at start, not by the first request on the loop.
        self.ssl_context = tls_context(certifi.where())
        self.session: aiohttp.ClientSession | None = None

    def open_session(self) -> aiohttp.ClientSession:
        connector = aiohttp.TCPConnector(limit=MAX_CONNECTIONS, ssl=self.ssl_context)
        # Cookies and decompression stay httpx's work, as with its own transport.
        return aiohttp.ClientSession(
            connector=connector, cookie_jar=aiohttp.DummyCookieJar(), auto_decompress=False
        )

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        if self.session is None:
            self.session = self.open_session()
        timeouts = request.extensions.get("timeout", {})
        try:
            response = await self.session.request(
                request.method,
                str(request.url),
                headers=request.headers.multi_items(),
                data=await request.aread() or None,
                allow_redirects=False,
                timeout=aiohttp.ClientTimeout(
                    total=None,
                    sock_connect=timeouts.get("connect"),
                    sock_read=timeouts.get("read"),
                ),
            )
        except aiohttp.ClientError as exc:
            raise as_httpx_error(exc, request) from exc
        return Response(
            status_code=response.status,
            headers=response.raw_headers,
            stream=AiohttpStream(response, request),
            request=request,
            extensions={
                "http_version": b"HTTP/1.1",
                "reason_phrase": (response.reason or "").encode(),
            },
        )

    async def aclose(self) -> None:
        if self.session is not None:
            await self.session.close()
