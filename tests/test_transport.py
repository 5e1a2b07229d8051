"""The model server's and SearXNG's requests go over aiohttp under httpx's API
(app.transport): each way a connection fails keeps its own httpx error, and a finished
request leaves nothing for the garbage collector."""

from __future__ import annotations

import asyncio
import gc
import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager

import httpx
import pytest

from app.model.client import ModelClient
from app.transport import AiohttpTransport
from tests.fakes.llm_server import FakeLLM, Reply

PAYLOAD = {"model": "fake-model", "messages": [{"role": "user", "content": "hi"}]}


def fetch(url: str, *, read_timeout: float | None = None) -> httpx.Response:
    async def get() -> httpx.Response:
        timeout = httpx.Timeout(read_timeout, connect=2)
        async with httpx.AsyncClient(transport=AiohttpTransport(), timeout=timeout) as client:
            response = await client.get(url)
            await response.aread()
            return response

    return asyncio.run(get())


@contextmanager
def raw_server(answer: bytes | None, *, hold: float = 0.0) -> Iterator[str]:
    """A socket that reads each request, waits `hold` seconds, sends `answer` (None:
    nothing) and closes: the failures of a server that crashed or a proxy that gave up.
    (aiohttp sends a GET again once when its connection closes unanswered, as RFC 9112
    allows for an idempotent request; the second try meets the same end.)"""
    listener = socket.create_server(("127.0.0.1", 0))
    listener.settimeout(0.1)
    done = threading.Event()

    def serve() -> None:
        while not done.is_set():
            try:
                connection, _ = listener.accept()
            except TimeoutError:
                continue
            with connection:
                connection.recv(65536)
                done.wait(hold)
                if answer:
                    connection.sendall(answer)

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{listener.getsockname()[1]}/"
    finally:
        done.set()
        thread.join(5)
        listener.close()


def test_a_refused_connection_is_a_connect_error():
    with socket.create_server(("127.0.0.1", 0)) as taken:
        port = taken.getsockname()[1]
    with pytest.raises(httpx.ConnectError):
        fetch(f"http://127.0.0.1:{port}/")


def test_a_server_that_closes_without_answering_broke_the_protocol():
    with raw_server(None) as url, pytest.raises(httpx.RemoteProtocolError):
        fetch(url)


def test_a_body_cut_short_broke_the_protocol():
    cut = b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nonly part of it"
    with raw_server(cut) as url, pytest.raises(httpx.RemoteProtocolError):
        fetch(url)


def test_a_server_silent_past_the_read_timeout_timed_out():
    with raw_server(None, hold=5) as url, pytest.raises(httpx.ReadTimeout):
        fetch(url, read_timeout=0.3)


def test_a_whole_answer_arrives_with_its_status_and_headers():
    answer = b"HTTP/1.1 201 Created\r\nContent-Length: 5\r\nX-Seen: yes\r\n\r\nhello"
    with raw_server(answer) as url:
        response = fetch(url)
    assert (response.status_code, response.reason_phrase) == (201, "Created")
    assert response.headers["x-seen"] == "yes"
    assert response.text == "hello"


def test_streamed_answers_leave_no_garbage_and_share_a_connection():
    """A reference cycle per request made full garbage collections stall every stream for
    10-18 ms at 50 streams; a connection per request would cost a connect each turn."""

    async def stream_ten(llm: FakeLLM) -> list[object]:
        client = ModelClient(llm.api_base)
        try:
            async for _ in client.stream(PAYLOAD):
                pass
            gc.collect()
            gc.set_debug(gc.DEBUG_SAVEALL)
            try:
                for _ in range(10):
                    async for _ in client.stream(PAYLOAD):
                        pass
                gc.collect()
                return list(gc.garbage)
            finally:
                gc.set_debug(0)
                gc.garbage.clear()
        finally:
            await client.aclose()

    with FakeLLM() as llm:
        llm.default = Reply(text="a few words of an answer")
        garbage = asyncio.run(stream_ten(llm))
    assert [type(o).__name__ for o in garbage] == []
    assert len({r.client_port for r in llm.requests}) == 1
