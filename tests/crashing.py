"""Crash cycles, shared by tests/test_crash.py (a few) and bench/crash.py (200).

Each cycle starts `python -m app serve` as a user runs it, checks what the previous cycle's
SIGKILL left, then streams several turns at once while another client keeps changing a
conversation's settings, memory.md and the model list, and kills the service (SIGKILL) at a
random moment. What must hold after each restart:
- the database passes `PRAGMA integrity_check`;
- every user message whose request got its first event is stored exactly once, and no
  message is stored twice;
- an answer is a prefix of what its client received, and marked interrupted unless the
  client saw it end;
- no lease blocks the next turn (the dead owner's are taken over at once);
- memory.md, the models and the settings read back as the last acknowledged write or the
  one in flight at the kill, never anything else.
"""

from __future__ import annotations

import json
import random
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import httpx

from app.store.files import memory_text
from tests.conftest import TLS
from tests.serving import serve

STREAMS = 3
STORY = [f"Sentence {n} of the story. " for n in range(2000)]


@dataclass
class Sent:
    """One chat request as its client saw it."""

    conversation_id: str
    message: str
    first_event: bool = False
    ended: bool = False
    refused: int | None = None
    received: str = ""
    first_at: float | None = None
    """time.monotonic() at the first event."""


@dataclass
class Written:
    """A value written over and over: the last acknowledged one, and the one in flight."""

    acknowledged: object = None
    in_flight: object = None

    def allows(self, value: object) -> bool:
        return value in (self.acknowledged, self.in_flight)


@dataclass
class Writes:
    memory: Written = field(default_factory=Written)
    models: Written = field(default_factory=Written)
    max_uses: Written = field(default_factory=Written)


def stream_turn(url: str, sent: Sent) -> None:
    path = f"{url}/api/conversations/{sent.conversation_id}/chat"
    try:
        with httpx.stream(
            "POST", path, json={"message": sent.message}, timeout=30, verify=TLS
        ) as response:
            if response.status_code != 200:
                sent.refused = response.status_code
                return
            for line in response.iter_lines():
                if line.startswith("data: "):
                    event = json.loads(line[len("data: ") :])
                    if not sent.first_event:
                        sent.first_event, sent.first_at = True, time.monotonic()
                    if event["type"] == "delta":
                        sent.received += event["text"]
                    sent.ended = event["type"] in ("done", "error")
    except httpx.HTTPError:
        pass  # the kill


def writes_as_read(url: str, conversation_id: str) -> Writes:
    """The values as they read before a cycle, as its last acknowledged writes: a kill
    before the cycle's first write reaches the service leaves these."""
    writes = Writes()
    writes.memory.acknowledged = httpx.get(f"{url}/api/memory", verify=TLS).json()["text"]
    writes.models.acknowledged = httpx.get(f"{url}/api/config", verify=TLS).json()["models"][
        "added"
    ]
    settings = httpx.get(f"{url}/api/conversations/{conversation_id}", verify=TLS).json()[
        "settings"
    ]
    writes.max_uses.acknowledged = settings["search_max_uses"]
    return writes


def keep_writing(url: str, conversation_id: str, writes: Writes, stop: threading.Event) -> None:
    n = 0
    with httpx.Client(timeout=10, verify=TLS) as client:
        while not stop.is_set():
            n += 1
            try:
                writes.memory.in_flight = f"- write {n} {random.random()}\n"
                client.put(f"{url}/api/memory", json={"text": writes.memory.in_flight})
                writes.memory.acknowledged = writes.memory.in_flight
                writes.models.in_flight = [f"model-{n}", "kept"]
                client.put(f"{url}/api/models", json={"models": writes.models.in_flight})
                writes.models.acknowledged = writes.models.in_flight
                writes.max_uses.in_flight = n % 7
                settings = {"search_max_uses": n % 7}
                client.patch(
                    f"{url}/api/conversations/{conversation_id}", json={"settings": settings}
                )
                writes.max_uses.acknowledged = writes.max_uses.in_flight
            except httpx.HTTPError:
                return


def check(
    url: str, data: Path, sent: list[Sent], writes: Writes, *, sqlite: bool = True
) -> tuple[int, list[str]]:
    """What the last kill left; how many streamed characters were kept, and the problems.
    With `sqlite` false (the service's database is elsewhere, e.g. PostgreSQL), no
    integrity_check, and memory.md is read through the API."""
    problems = []
    if sqlite:
        with sqlite3.connect(data / "chat.db") as db:
            integrity = db.execute("PRAGMA integrity_check").fetchone()[0]
        if integrity != "ok":
            problems.append(f"integrity_check: {integrity}")
    kept = 0
    for request in sent:
        messages = httpx.get(
            f"{url}/api/conversations/{request.conversation_id}", verify=TLS
        ).json()["messages"]
        places = [i for i, m in enumerate(messages) if m["content"] == request.message]
        if len(places) > 1 or (request.first_event and not places):
            problems.append(f"{request.message!r} stored {len(places)} times")
        answer = messages[places[0] + 1] if places and places[0] + 1 < len(messages) else None
        if answer and answer["role"] == "assistant":
            kept += len(answer["content"])
            if not request.received.startswith(answer["content"]):
                problems.append(f"the answer to {request.message!r} is not what was received")
            if answer["status"] == "complete" and not request.ended:
                problems.append(f"the answer to {request.message!r} is complete but was cut")
        contents = [m["content"] for m in messages if m["role"] == "user"]
        if len(contents) != len(set(contents)):
            problems.append(f"a message of {request.conversation_id} is stored twice")
    memory = None
    if writes.memory.in_flight and sqlite:
        # No file when the kill came before the first write reached the disk: empty, as the
        # service reads it.
        memory = memory_text(data / "memory.md")
    elif writes.memory.in_flight:
        memory = httpx.get(f"{url}/api/memory", verify=TLS).json()["text"]
    if memory is not None and not writes.memory.allows(memory):
        problems.append(f"memory.md holds {memory!r}, not {writes.memory}")
    models = httpx.get(f"{url}/api/config", verify=TLS).json()["models"]["added"]
    if writes.models.in_flight and not writes.models.allows(models):
        problems.append(f"the models read {models}, not {writes.models}")
    first = httpx.get(f"{url}/api/conversations/{sent[0].conversation_id}", verify=TLS).json()
    max_uses = first["settings"]["search_max_uses"]
    if writes.max_uses.in_flight is not None and not writes.max_uses.allows(max_uses):
        problems.append(f"search_max_uses reads {max_uses}, not {writes.max_uses}")
    if list(data.glob(".*.tmp")):
        problems.append("a temporary file was left")
    return kept, problems


def cycle(
    url: str, process: subprocess.Popen, conversations: list[str], number: int
) -> tuple[list[Sent], Writes]:
    """Streams on each conversation and the writer, then SIGKILL at a random moment."""
    sent = [Sent(c, f"cycle {number} stream {k}") for k, c in enumerate(conversations)]
    writes, stop = writes_as_read(url, conversations[0]), threading.Event()
    threads = [threading.Thread(target=stream_turn, args=(url, s)) for s in sent]
    threads.append(
        threading.Thread(target=keep_writing, args=(url, conversations[0], writes, stop))
    )
    for thread in threads:
        thread.start()
    time.sleep(random.uniform(0.2, 3.0))
    process.send_signal(signal.SIGKILL)
    process.wait(timeout=10)
    stop.set()
    for thread in threads:
        thread.join(timeout=30)
    return sent, writes


@dataclass
class Report:
    cycles: int = 0
    kept: int = 0
    received: int = 0
    problems: list[str] = field(default_factory=list)


def run(env: dict[str, str], cycles: int, progress: bool = False) -> Report:
    """`cycles` kills, each checked after the restart that follows it."""
    data = Path(env["DATA_DIR"])
    report = Report()
    sent: list[Sent] = []
    writes = Writes()
    conversations: list[str] = []
    for number in range(cycles + 1):
        with serve(env, ending=signal.SIGKILL) as served:
            url = served.url
            if number:
                kept, problems = check(url, data, sent, writes)
                report.kept += kept
                report.received += sum(len(s.received) for s in sent)
                refused = [s for s in sent if s.refused]
                problems += [f"{s.message!r} refused with {s.refused}" for s in refused]
                report.problems += [f"cycle {number - 1}: {p}" for p in problems]
                report.cycles += 1
                if progress:
                    print(f"cycle {number - 1}: {len(problems)} problems", file=sys.stderr)
            if number == cycles:
                break
            while len(conversations) < STREAMS:
                created = httpx.post(f"{url}/api/conversations", json={}, verify=TLS)
                conversations.append(created.json()["id"])
            sent, writes = cycle(url, served.process, conversations, number)
    return report
