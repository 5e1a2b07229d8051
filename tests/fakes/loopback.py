"""The loopback HTTP server plumbing the fakes share: server, handler base and lifecycle.

Every fake is a real socket server on 127.0.0.1, so clients run their real HTTP stack against
it. What they need from the server side is the same each time: a threaded server that a test
can stop at once, even with keep-alive connections or endless streams still open; a handler
that speaks HTTP/1.1 without cluttering test output; and start()/stop() and ``with`` so a
fixture never leaves a thread or a port behind. What a fake answers stays in the fake.
"""

from __future__ import annotations

import socket
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any, ClassVar, Generic, Self, TypeVar

FakeT = TypeVar("FakeT")


class LoopbackServer(ThreadingHTTPServer, Generic[FakeT]):
    """A threaded server that knows its fake and its open connections.

    Connections are tracked because shutdown() only stops accepting: without cutting them,
    a keep-alive connection or a stream in progress would outlive stop().
    """

    daemon_threads = True  # a handler thread stuck on a client never blocks the test run
    allow_reuse_address = True  # a fixed --port can be reused right after a restart
    # Errors that mean the client hung up: expected (clients abort on purpose), so not printed.
    quiet_errors: ClassVar[tuple[type[BaseException], ...]] = (ConnectionError, TimeoutError)

    def __init__(
        self,
        address: tuple[str, int],
        handler: type[BaseHTTPRequestHandler],
        fake: FakeT,
    ) -> None:
        super().__init__(address, handler)
        self.fake = fake
        self.stopping = False  # set by stop(), so handlers can tell a hang-up from a shutdown
        self.connections: set[socket.socket] = set()
        self.connections_lock = threading.Lock()

    def handle_error(self, request: Any, client_address: Any) -> None:
        """Stay quiet when a client hangs up; anything else is a bug worth printing."""
        if not isinstance(sys.exc_info()[1], self.quiet_errors):
            super().handle_error(request, client_address)

    def close_connections(self) -> None:
        """Cut every open connection; their handlers then fail fast and end."""
        with self.connections_lock:
            for conn in list(self.connections):
                try:
                    conn.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass


class LoopbackHandler(BaseHTTPRequestHandler):
    """A quiet HTTP/1.1 handler that registers its connection with the server."""

    server: LoopbackServer[Any]
    protocol_version = "HTTP/1.1"  # keep-alive and chunked bodies, as real servers speak
    timeout = 30  # idle keep-alive connections go away on their own
    disable_nagle_algorithm = True  # headers and body are separate writes; avoid 40 ms stalls

    def setup(self) -> None:
        super().setup()
        with self.server.connections_lock:
            self.server.connections.add(self.connection)

    def finish(self) -> None:
        with self.server.connections_lock:
            self.server.connections.discard(self.connection)
        super().finish()

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - stdlib signature
        """No request log: test output stays readable and benchmarks stay fast."""


class DispatchingHandler(LoopbackHandler):
    """A handler that sends GET, POST, PUT and DELETE to one `_dispatch`.

    For fakes of APIs that answer a wrong method or path with their own error body, rather
    than the stdlib's 501 page: `_dispatch` routes on ``self.command`` and the path.
    """

    def do_GET(self) -> None:  # noqa: N802 - stdlib naming
        self._dispatch()

    def do_POST(self) -> None:  # noqa: N802
        self._dispatch()

    def do_PUT(self) -> None:  # noqa: N802
        self._dispatch()

    def do_DELETE(self) -> None:  # noqa: N802
        self._dispatch()

    def _dispatch(self) -> None:
        raise NotImplementedError


class LoopbackFake:
    """Start, stop and ``with`` for a fake served by a `LoopbackServer` in a daemon thread.

    A subclass names its handler class and thread name; it may override `_listen` (to use its
    own server class or wrap the socket) and `_serving_at` (to note more of the address).
    """

    _handler_class: ClassVar[type[LoopbackHandler]]
    _thread_name: ClassVar[str]  # the port is appended, which tells threads apart in a dump

    def __init__(self) -> None:
        self.url = ""
        self._server: LoopbackServer[Any] | None = None
        self._thread: threading.Thread | None = None

    def start(self, port: int = 0, host: str = "127.0.0.1") -> str:
        """Serve in a daemon thread; port 0 picks a free one. Returns the base URL."""
        if self._server is not None:
            return self.url
        self._server = self._listen((host, port))
        bound_host, bound_port = self._server.server_address[:2]
        self.url = self._serving_at(str(bound_host), int(bound_port))
        self._thread = threading.Thread(
            target=self._server.serve_forever,
            kwargs={"poll_interval": 0.05},  # shutdown() waits at most this long
            name=f"{self._thread_name}-{bound_port}",
            daemon=True,
        )
        self._thread.start()
        return self.url

    def stop(self) -> None:
        """Stop serving and cut open connections (streams included), so nothing lingers."""
        server, self._server = self._server, None
        if server is None:
            return
        server.stopping = True
        server.shutdown()
        server.close_connections()
        server.server_close()
        if self._thread is not None:
            self._thread.join(timeout=2)
            self._thread = None

    def serve_until_interrupted(self) -> None:
        """Block until Ctrl-C, then stop: what a fake's ``__main__`` does after start()."""
        try:
            threading.Event().wait()
        except KeyboardInterrupt:
            pass
        finally:
            self.stop()

    def __enter__(self) -> Self:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    def _listen(self, address: tuple[str, int]) -> LoopbackServer[Any]:
        """The bound server, not yet serving."""
        return LoopbackServer(address, self._handler_class, self)

    def _serving_at(self, host: str, port: int) -> str:
        """The base URL for the bound address."""
        return f"http://{host}:{port}"
