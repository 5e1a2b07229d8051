"""Talking to the chat service as the page does: JSON calls and SSE turns."""

from __future__ import annotations

import json
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
    """POST and read the SSE events; `stop` returning True hangs up, like the Stop button."""
    # In-process, leaving early cancels the app's task instead of the hang-up the service
    # sees on a socket, which is what a test of Stop is about.
    assert stop is None or chat.socket, "a test that hangs up needs the `socket` mark"
    events: Events = []
    with chat.http.stream("POST", path, json=body or {}, headers=headers) as response:
        assert response.status_code == 200, response.read()
        for line in response.iter_lines():
            if line.startswith("data: "):
                events.append(json.loads(line[len("data: ") :]))
                if stop and stop(events):
                    break
    return events


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
