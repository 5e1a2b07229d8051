"""Time to first token through the chat service vs the model server called directly; Stop
latency (POST .../stop to the model server's connection closed), asked on the turn's own
replica and on another sharing its database (SQLite's DATA_DIR); and the service's CPU for
one turn followed by 1 and by 100 readers. Everything on loopback: the fake model server,
a real SearXNG with the fake Brave API, the real service (two processes).

Run: .venv/bin/python bench/chat_latency.py [TURNS]
"""

from __future__ import annotations

import json
import statistics
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from app.search.embedded import EmbeddedSearxng  # noqa: E402
from bench.common import Service, service  # noqa: E402
from tests.conftest import API_KEY, SERVER_LOCALE, chat_env, searxng_env  # noqa: E402
from tests.fakes.brave_api import FakeBrave  # noqa: E402
from tests.fakes.llm_server import FakeLLM, Reply  # noqa: E402

ANSWER = Reply(text="A short answer of a few words, streamed in pieces.", split=6)
SLOW = Reply(text="word " * 2000, split=5, chunk_delay=0.02)
READ_PIECES = 400
READ = Reply(text="word " * READ_PIECES, split=5, chunk_delay=0.01)


def percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(fraction * (len(ordered) - 1)))]


def first_delta_direct(http: httpx.Client, llm: FakeLLM, payload: dict) -> float:
    started = time.perf_counter()
    with http.stream("POST", f"{llm.api_base}/chat/completions", json=payload) as response:
        for line in response.iter_lines():
            if '"content":"' in line.replace(" ", "") and '"content":""' not in line.replace(
                " ", ""
            ):
                return time.perf_counter() - started
    raise RuntimeError("no content")


def first_delta_service(http: httpx.Client, chat: Service, conversation: str) -> float:
    started = time.perf_counter()
    url = f"{chat.url}/api/conversations/{conversation}/chat"
    with http.stream("POST", url, json={"message": "hello", "model": "fake-model"}) as response:
        lines = response.iter_lines()
        for line in lines:
            if line.startswith("data: ") and json.loads(line[6:])["type"] == "delta":
                elapsed = time.perf_counter() - started
                for _ in lines:  # read the turn to its end before the next one
                    pass
                return elapsed
    raise RuntimeError("no delta")


def stop_latency(http: httpx.Client, chat: Service, llm: FakeLLM, stopper: Service) -> float:
    """Stop asked on `stopper` (the turn's replica, or another sharing its database) ->
    the model server sees its connection close."""
    llm.script(SLOW)
    conversation = new_conversation(http, chat)
    url = f"{chat.url}/api/conversations/{conversation}/chat"
    with http.stream("POST", url, json={"message": "write a lot"}) as response:
        for line in response.iter_lines():
            if line.startswith("data: ") and json.loads(line[6:])["type"] == "delta":
                break
        asked = time.monotonic()
        http.post(f"{stopper.url}/api/conversations/{conversation}/stop").raise_for_status()
    hung_up = llm.wait_hung_up(timeout=10)
    if hung_up is None:
        raise RuntimeError("the model server never saw the stop")
    return hung_up - asked


def readers_cost(
    http: httpx.Client, chat: Service, llm: FakeLLM, readers: int, reader: Service
) -> float:
    """The CPU seconds of `reader` (the turn's replica or another) for one slow turn
    followed there by `readers` clients at once (GET .../events from its first event to
    its end), its starter gone."""
    llm.script(READ)
    conversation = new_conversation(http, chat)
    url = f"{chat.url}/api/conversations/{conversation}/chat"
    before = reader.cpu_seconds()
    with http.stream("POST", url, json={"message": "write a lot"}) as response:
        next(response.iter_lines())

    def follow() -> None:
        with httpx.Client(timeout=60) as own:
            events = f"{reader.url}/api/conversations/{conversation}/events"
            with own.stream("GET", events) as stream:
                lines = [line for line in stream.iter_lines() if line.startswith("data: ")]
        if json.loads(lines[-1][6:])["type"] != "done":
            raise RuntimeError("a reader did not see the turn's end")

    with ThreadPoolExecutor(max_workers=readers) as pool:
        for done in [pool.submit(follow) for _ in range(readers)]:
            done.result()
    return reader.cpu_seconds() - before


def new_conversation(http: httpx.Client, chat: Service) -> str:
    settings = {"web_search": False, "web_fetch": False}
    created = http.post(f"{chat.url}/api/conversations", json={"settings": settings})
    return str(created.json()["id"])


def main(turns: int) -> None:
    with (
        FakeLLM() as llm,
        FakeBrave(api_key=API_KEY) as brave,
        EmbeddedSearxng(SERVER_LOCALE, environ=searxng_env(brave)) as searxng,
        tempfile.TemporaryDirectory() as data,
        service({**chat_env(llm, Path(data)), "SEARXNG_URL": searxng.url}) as chat,
        service({**chat_env(llm, Path(data)), "SEARXNG_URL": searxng.url}) as other,
    ):
        llm.default = ANSWER
        with httpx.Client(timeout=60) as http:
            conversation = new_conversation(http, chat)
            direct, through = [], []
            for _ in range(turns):
                through.append(first_delta_service(http, chat, conversation) * 1000)
                payload = {**llm.requests[-1].body}
                direct.append(first_delta_direct(http, llm, payload) * 1000)
            stops = {
                where: [
                    stop_latency(http, chat, llm, stopper) * 1000 for _ in range(max(5, turns // 5))
                ]
                for where, stopper in (("its replica", chat), ("another replica", other))
            }
            cpu = {
                (where, n): readers_cost(http, chat, llm, n, reader)
                for where, reader in (("its replica", chat), ("another replica", other))
                for n in (1, 100)
            }
    added = [t - d for t, d in zip(through, direct, strict=True)]
    print(f"turns: {turns}, loopback, fake model server, history growing to {turns} turns")
    print(f"{'time to first token':28} {'median ms':>10} {'p99 ms':>10}")
    rows = (
        ("model server directly", direct),
        ("through the service", through),
        ("added by the service", added),
    )
    for name, values in rows:
        print(f"{name:28} {statistics.median(values):10.1f} {percentile(values, 0.99):10.1f}")
    for where, values in stops.items():
        print(f"\nStop (POST .../stop on {where}) -> upstream closed, {len(values)} stops")
        print(f"median {statistics.median(values):.1f} ms, max {max(values):.1f} ms")
    print(f"\nOne turn of {READ_PIECES} pieces followed by N readers: the readers' replica's CPU")
    for (where, n), seconds in cpu.items():
        print(f"{n:4} readers on {where}: {seconds:.2f} s, {seconds / n * 1000:.1f} ms a reader")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 100)
