"""Time to first token through the chat service vs the model server called directly, and
Stop latency (client abort to upstream connection closed). Everything on loopback: the
fake model server, a real SearXNG with the fake Brave API, the real service.

Run: .venv/bin/python bench/chat_latency.py [TURNS]
"""

from __future__ import annotations

import json
import statistics
import sys
import tempfile
import time
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


def stop_latency(http: httpx.Client, chat: Service, llm: FakeLLM, conversation: str) -> float:
    llm.script(SLOW)
    url = f"{chat.url}/api/conversations/{conversation}/chat"
    with http.stream("POST", url, json={"message": "write a lot"}) as response:
        for line in response.iter_lines():
            if line.startswith("data: ") and json.loads(line[6:])["type"] == "delta":
                break
        aborted = time.monotonic()
    hung_up = llm.wait_hung_up(timeout=10)
    if hung_up is None:
        raise RuntimeError("the model server never saw the abort")
    time.sleep(0.2)  # let the service store the interrupted turn before the next one
    return hung_up - aborted


def main(turns: int) -> None:
    with (
        FakeLLM() as llm,
        FakeBrave(api_key=API_KEY) as brave,
        EmbeddedSearxng(SERVER_LOCALE, environ=searxng_env(brave)) as searxng,
        tempfile.TemporaryDirectory() as data,
        service({**chat_env(llm, Path(data)), "SEARXNG_URL": searxng.url}) as chat,
    ):
        llm.default = ANSWER
        with httpx.Client(timeout=60) as http:
            settings = {"web_search": False, "web_fetch": False}
            conversation = http.post(
                f"{chat.url}/api/conversations", json={"settings": settings}
            ).json()["id"]
            direct, through = [], []
            for _ in range(turns):
                through.append(first_delta_service(http, chat, conversation) * 1000)
                payload = {**llm.requests[-1].body}
                direct.append(first_delta_direct(http, llm, payload) * 1000)
            stops = [
                stop_latency(http, chat, llm, conversation) * 1000
                for _ in range(max(5, turns // 5))
            ]
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
    print(f"\nStop: client abort -> upstream closed, {len(stops)} aborts")
    print(f"median {statistics.median(stops):.1f} ms, max {max(stops):.1f} ms")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 100)
