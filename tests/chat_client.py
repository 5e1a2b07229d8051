"""Talking to the chat service as the page does: JSON calls and SSE turns."""

from __future__ import annotations

import json
import socket
import time
from collections.abc import Callable
from typing import Any

Events = list[dict[str, Any]]


def new_conversation(chat, **settings: Any) -> str:
    response = chat.http.post("/api/conversations", json={"settings": settings})
    assert response.status_code == 201, response.text
    return response.json()["id"]


def get_conversation(chat, conversation_id: str) -> dict[str, Any]:
    return chat.http.get(f"/api/conversations/{conversation_id}").json()


def stream(
    chat,
    path: str,
    body: dict | None = None,
    stop: Callable[[Events], bool] | None = None,
    headers: dict[str, str] | None = None,
) -> Events:
    """POST and read the SSE events; `stop` returning True stops the turn as the Stop
    button does: a page's turn with POST .../stop (then the stream is left), a /v1 answer
    by hanging up."""
    # In-process, leaving early cancels the app's task instead of the hang-up the service
    # sees on a socket, which is what a test of /v1's Stop is about.
    assert stop is None or chat.socket, "a test that hangs up needs the `socket` mark"
    events: Events = []
    with chat.http.stream("POST", path, json=body or {}, headers=headers) as response:
        assert response.status_code == 200, response.read()
        for line in response.iter_lines():
            if line.startswith("data: "):
                events.append(json.loads(line[len("data: ") :]))
                if stop and stop(events):
                    press_stop(chat, path, headers)
                    break
    return events


def press_stop(chat, path: str, headers: dict[str, str] | None = None) -> None:
    """Stop of the turn a page's POST started (a /v1 answer's Stop is the hang-up)."""
    if path.startswith("/api/conversations/"):
        conversation = path.split("/")[3]
        stopped = chat.http.post(f"/api/conversations/{conversation}/stop", headers=headers)
        assert stopped.status_code == 200, stopped.text


def send(chat, conversation_id: str, message: str, **body: Any) -> Events:
    return stream(chat, f"/api/conversations/{conversation_id}/chat", {"message": message, **body})


def done(events: Events) -> dict[str, Any]:
    """The turn's last event, which must be its `done`."""
    assert events and events[-1]["type"] == "done", events[-3:]
    return events[-1]


def event_types(events: Events) -> list[str]:
    """The event types in order, runs of the same type collapsed (deltas come in many)."""
    collapsed: list[str] = []
    for event in events:
        if not collapsed or collapsed[-1] != event["type"]:
            collapsed.append(event["type"])
    return collapsed


Numbered = list[tuple[int, dict[str, Any]]]


def follow(
    chat, conversation_id: str, after: int | None = None, last_event_id: int | None = None
) -> Numbered:
    """GET .../events: the turn's events with their ids, after `after` (a query parameter)
    or `last_event_id` (the header a reconnecting EventSource sends), to the turn's end."""
    params = {} if after is None else {"after": after}
    headers = {} if last_event_id is None else {"Last-Event-ID": str(last_event_id)}
    path = f"/api/conversations/{conversation_id}/events"
    with chat.http.stream("GET", path, params=params, headers=headers) as response:
        assert response.status_code == 200, response.read()
        return numbered(response)


def leave_after(chat, path: str, body: dict, seconds: float) -> Numbered:
    """POST a turn and read its events with their ids for `seconds`, then leave at its
    next piece of text (mid-answer, however slow the steps before it), as a closed tab or
    a reload does."""
    leaving = time.monotonic() + seconds
    with chat.client() as client, client.stream("POST", path, json=body) as response:
        assert response.status_code == 200, response.read()
        return numbered(
            response, until=lambda event: event["type"] == "delta" and time.monotonic() >= leaving
        )


def numbered(response, until: Callable[[dict[str, Any]], bool] | None = None) -> Numbered:
    """The SSE events of a response with their `id:`, to its end or until `until(event)`."""
    events: Numbered = []
    ident = None
    for line in response.iter_lines():
        if line.startswith("id: "):
            ident = int(line[len("id: ") :])
        elif line.startswith("data: "):
            assert ident is not None, "an event without its id"
            events.append((ident, json.loads(line[len("data: ") :])))
            ident = None
            if until and until(events[-1][1]):
                break
    return events


def raw_request(url: str, path: str, header: bytes) -> int:
    """A GET with one header of arbitrary bytes (httpx refuses some); its status."""
    host, port = url.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=5) as sock:
        request = f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\n".encode()
        sock.sendall(request + header + b"\r\nConnection: close\r\n\r\n")
        return int(sock.recv(64).split(b" ")[1])
