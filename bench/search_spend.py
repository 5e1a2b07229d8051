"""Brave queries spent by a scripted session, with the search cache and without it (issue 25).

The session: 5 conversations asking overlapping questions (each question drawn from one
pool of 24 searches), 100 turns in all, 30 of them a Regenerate of the turn before, and
one locale comparison in the lab on a query the conversations searched. Every question
makes the model search once (the scripted model of bench/common.py). The same session
runs against two services, one with the cache (SEARCH_CACHE_TTL=3600) and one without
(SEARCH_CACHE_TTL=0); the fake Brave API counts the queries each spent.

SEARCH_RATE is raised to 20 for both: this measures what is spent, not the pacing (at the
free plan's 1 a second the session takes as many seconds as it spends queries).

Then the time of a search served from the cache against one through SearXNG.

Run: .venv/bin/python bench/search_spend.py [--seed 25] [--timing 100]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import statistics
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from app.search.client import Searxng  # noqa: E402
from app.search.governor import Governor  # noqa: E402
from app.search.searcher import Searcher  # noqa: E402
from app.store.storage import Storage  # noqa: E402
from bench.common import (  # noqa: E402
    SEARCH,
    Stack,
    bench_stack,
    chat_turn,
    client,
    new_conversation,
    percentile,  # noqa: E402
)
from bench.common import service as running_service  # noqa: E402
from tests.fakes.brave_api import SEARCH_PATH  # noqa: E402
from tests.fakes.llm_server import Reply  # noqa: E402

TOPICS = (
    "pierogi czas gotowania", "docker compose volumes", "rust async runtime",
    "nginx reverse proxy", "postgres vacuum", "python asyncio timeout",
    "linux kernel 6.12", "kafka consumer lag", "redis eviction policy", "git rebase onto",
    "llama.cpp context size", "ollama num_ctx", "searxng brave engine", "sqlite wal mode",
    "systemd restart policy", "ssh key ed25519", "vim macros", "tls certificate renewal",
    "zfs snapshots", "wireguard setup", "kubernetes probes", "prometheus alerting",
    "grafana dashboards", "cron syntax",
)  # fmt: skip
CONVERSATIONS = 5
TURNS = 100
REGENERATES = 30
LOCALES = "all,pl,pl-PL"


@dataclass(frozen=True)
class Step:
    conversation: int
    question: str | None
    """None: a Regenerate of the conversation's last turn."""


def session(seed: int) -> list[Step]:
    """The script: which conversation asks what, in what order, and where a Regenerate
    comes (never first in a conversation)."""
    rng = random.Random(seed)
    regenerate_at = set(rng.sample(range(CONVERSATIONS, TURNS), REGENERATES))
    steps = []
    for position in range(TURNS):
        conversation = position % CONVERSATIONS
        if position in regenerate_at:
            steps.append(Step(conversation, None))
        else:
            steps.append(Step(conversation, rng.choice(TOPICS)))
    return steps


async def regenerate(http: httpx.AsyncClient, url: str, conversation: str) -> None:
    path = f"{url}/api/conversations/{conversation}/regenerate"
    async with http.stream("POST", path, json={}) as response:
        async for line in response.aiter_lines():
            if line.startswith("data: ") and json.loads(line[6:])["type"] == "error":
                raise RuntimeError(f"a regenerate failed: {line}")


async def play(url: str, steps: list[Step]) -> int:
    """The session against one service; how many of its searches were served from cache."""
    cached = 0
    async with client() as http:
        ids = [await new_conversation(http, url) for _ in range(CONVERSATIONS)]
        for step in steps:
            if step.question is None:
                await regenerate(http, url, ids[step.conversation])
                continue
            turn = await chat_turn(http, url, ids[step.conversation], f"{SEARCH} {step.question}")
            if turn.error or not turn.tools:
                raise RuntimeError(f"a turn did not search: {turn.error or turn.types}")
            cached += sum("cached_age" in event for event in turn.tools)
        asked = [s.question for s in steps if s.question]
        measured = await http.get(
            f"{url}/api/lab/measure", params={"q": asked[0], "locales": LOCALES, "top": "20"}
        )
        measured.raise_for_status()
    return cached


def spent(stack: Stack, name: str, ttl: str, steps: list[Step]) -> tuple[int, int]:
    env = stack.service_env(name, SEARCH_CACHE_TTL=ttl, SEARCH_RATE="20")
    before = sum(r.path == SEARCH_PATH for r in stack.brave.requests)
    with running_service(env) as service:
        cached = asyncio.run(play(service.url, steps))
    return sum(r.path == SEARCH_PATH for r in stack.brave.requests) - before, cached


async def served_times(stack: Stack, rounds: int) -> tuple[list[float], list[float]]:
    """Milliseconds of a search served from the cache (chat.db, through Storage's thread)
    and of one through SearXNG, as the service's Searcher makes them."""
    storage = Storage(stack.scratch / "timing")
    storage.open()
    governor = Governor(lambda: 1000.0)
    cached, through = [], []
    try:
        async with Searcher(Searxng(stack.searxng.url), governor, storage, ttl=3600) as searcher:
            for n in range(rounds):
                started = time.perf_counter()
                await searcher.search(f"timing {n}", locale="pl-PL")
                through.append((time.perf_counter() - started) * 1000)
                started = time.perf_counter()
                response = await searcher.search(f"timing {n}", locale="pl-PL")
                cached.append((time.perf_counter() - started) * 1000)
                assert response.cached_age is not None
    finally:
        storage.close()
    return cached[5:], through[5:]  # the first few warm up connections and imports


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=25)
    parser.add_argument("--timing", type=int, default=100, help="searches timed, each way")
    args = parser.parse_args()
    steps = session(args.seed)
    distinct = len({s.question for s in steps if s.question})
    with bench_stack(Reply(text="An answer [1].")) as stack:
        without, _ = spent(stack, "without", "0", steps)
        with_cache, cached = spent(stack, "with", "3600", steps)
        from_cache, through = asyncio.run(served_times(stack, args.timing + 5))
    print(
        f"session: {TURNS} turns in {CONVERSATIONS} conversations ({REGENERATES} Regenerate, "
        f"{distinct} distinct questions), one lab comparison of {LOCALES}"
    )
    print(f"{'':24} {'Brave queries':>14}")
    print(f"{'without the cache':24} {without:>14}")
    print(f"{'with the cache':24} {with_cache:>14}")
    print(f"fewer with the cache: {1 - with_cache / without:.0%} ({cached} turns' searches cached)")
    print(f"\n{args.timing} searches, each through SearXNG then again from the cache:")
    print(f"{'':24} {'median ms':>10} {'p95 ms':>10}")
    for name, values in (("through SearXNG", through), ("from the cache", from_cache)):
        print(f"{name:24} {statistics.median(values):10.2f} {percentile(values, 0.95):10.2f}")


if __name__ == "__main__":
    main()
