"""First-token overhead of /v1 (the OpenAI-compatible endpoint: Chat Completions, and the
Responses API's first text delta) against the fake model server called directly, and a
search answer's overhead (one web_search round, then the answer). Everything on loopback:
the fake model server, a real SearXNG on the fake Brave API, the real service in its own
process.

Run: .venv/bin/python bench/openai_v1.py [REQUESTS]
"""

from __future__ import annotations

import statistics
import sys
import tempfile
import time
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from app.search.embedded import EmbeddedSearxng  # noqa: E402
from bench.common import machine_load, percentile, service  # noqa: E402
from tests.conftest import API_KEY, SERVER_LOCALE, chat_env, searxng_env  # noqa: E402
from tests.fakes.brave_api import FakeBrave  # noqa: E402
from tests.fakes.llm_server import FakeLLM, Reply, ToolCall  # noqa: E402

ANSWER = Reply(text="A short answer of a few words, streamed in pieces.", split=6)
SLOW = Reply(text="word " * 2000, split=5, chunk_delay=0.02)
QUESTION = [{"role": "user", "content": "hello"}]


def has_content(line: str) -> bool:
    """A Chat Completions chunk with content, or the Responses API's text delta."""
    squeezed = line.replace(" ", "")
    if '"type":"response.output_text.delta"' in squeezed:
        return True
    return '"content":"' in squeezed and '"content":""' not in squeezed


def first_content(http: httpx.Client, url: str, body: dict) -> float:
    """Seconds from the request to the first event with content; the stream read to its end."""
    started = time.perf_counter()
    elapsed = None
    with http.stream("POST", url, json=body) as response:
        assert response.status_code == 200, response.read()
        for line in response.iter_lines():
            if elapsed is None and has_content(line):
                elapsed = time.perf_counter() - started
    if elapsed is None:
        raise RuntimeError("no content")
    return elapsed


def stop_latency(http: httpx.Client, url: str, llm: FakeLLM, body: dict) -> float:
    """Seconds from the client's hang-up, after the first content, to the model server
    seeing its connection closed."""
    llm.script(SLOW)
    with http.stream("POST", url, json=body) as response:
        for line in response.iter_lines():
            if '"content":"' in line.replace(" ", "") and '"content":""' not in line:
                break
        aborted = time.monotonic()
    hung_up = llm.wait_hung_up(timeout=10)
    if hung_up is None:
        raise RuntimeError("the model server never saw the hang-up")
    return hung_up - aborted


def row(name: str, values: list[float]) -> None:
    print(f"{name:34} {statistics.median(values):10.1f} {percentile(values, 0.99):10.1f}")


def main(requests: int) -> None:
    with (
        FakeLLM() as llm,
        FakeBrave(api_key=API_KEY) as brave,
        EmbeddedSearxng(SERVER_LOCALE, environ=searxng_env(brave)) as searxng,
        tempfile.TemporaryDirectory() as data,
        service({**chat_env(llm, Path(data)), "SEARXNG_URL": searxng.url}) as chat,
    ):
        llm.default = ANSWER
        v1 = f"{chat.url}/v1/chat/completions"
        body = {"model": "fake-model", "messages": QUESTION, "stream": True}
        responses = f"{chat.url}/v1/responses"
        asked = {"model": "fake-model", "input": "hello", "stream": True}
        with httpx.Client(timeout=60) as http:
            first_content(http, v1, body)  # warm: connections, the window probe, the models
            first_content(http, responses, asked)
            direct, through, items, plain, searching = [], [], [], [], []
            for number in range(requests):
                through.append(first_content(http, v1, body) * 1000)
                sent = {**llm.requests[-1].body}
                direct.append(first_content(http, f"{llm.api_base}/chat/completions", sent) * 1000)
                items.append(first_content(http, responses, asked) * 1000)
                plain.append(first_content(http, v1, {**body, "web_search": False}) * 1000)
                query = {"query": f"question {number}"}  # a new query: not a repeat
                llm.script(Reply(tool_calls=[ToolCall("web_search", query)]), ANSWER)
                searching.append(first_content(http, v1, body) * 1000)
            stops = [stop_latency(http, v1, llm, body) * 1000 for _ in range(20)]
    added = [t - d for t, d in zip(through, direct, strict=True)]
    print(f"requests: {requests}, loopback, fake model server; {machine_load()}")
    print(f"{'time to first token':34} {'median ms':>10} {'p99 ms':>10}")
    row("model server directly", direct)
    row("through /v1", through)
    row("added by /v1", added)
    row("through /v1/responses", items)
    row("added by /v1/responses", [i - d for i, d in zip(items, direct, strict=True)])
    # The goal: the Responses API within 1 ms of Chat Completions (interleaved pairs).
    row("/v1/responses minus /v1", [i - t for i, t in zip(items, through, strict=True)])
    row("through /v1, web_search off", plain)
    row("added, web_search off", [p - d for p, d in zip(plain, direct, strict=True)])
    row("through /v1, one search first", searching)
    row("a search answer's overhead", [s - d for s, d in zip(searching, direct, strict=True)])
    print(f"\nStop: client hang-up -> upstream closed, {len(stops)} hang-ups")
    print(f"median {statistics.median(stops):.1f} ms, max {max(stops):.1f} ms")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 100)
