"""Searches of 5 conversations at once, at the free plan's 1 query a second (issue 25).

Five conversations send their turns at the same time, each turn making the model search
once (the scripted model of bench/common.py), through the real service and SearXNG against
a fake Brave that, like the real one on the free plan, refuses with HTTP 429 RATE_LIMITED a
query arriving less than a second after the one before it. The service runs with the
plan's rate read from Brave's headers (SEARCH_RATE unset; --rate sets it) and the cache off,
so every search goes to Brave.

Reported: the rate-limit refusals Brave gave, the rate-limit errors that reached the model
(a search event carrying an error) or the user (a turn's error event), the smallest gap
between two queries at Brave, and the longest wait a search had for the plan's rate (the
``waited`` of its search event: the trail's "waited 3.2 s for the search plan's rate"), and
how many searches were told waiting before they ended (a ``search_wait`` event first).

Run: .venv/bin/python bench/search_pacing.py [--turns 4]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import threading
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.common import (  # noqa: E402
    SEARCH,
    Turn,
    bench_stack,
    chat_turn,
    client,
    code_version,
    machine_load,
    new_conversation,
    service,
)
from tests.conftest import ROOT  # noqa: E402
from tests.fakes.brave_api import SEARCH_PATH, FakeBrave, RecordedRequest  # noqa: E402
from tests.fakes.llm_server import Reply  # noqa: E402

CONVERSATIONS = 5
WINDOW = 1.0
"""Seconds: the free plan's 1 query a second."""


class StrictBrave(FakeBrave):
    """The fake Brave API refusing queries beyond 1 a second, as the free plan does."""

    def __init__(self, api_key: str = "test-key") -> None:
        super().__init__(api_key)
        self.last_query = float("-inf")
        self.refused = 0
        self.pace_lock = threading.Lock()

    def _answer(
        self, method: str, request: RecordedRequest
    ) -> tuple[int, dict[str, Any], dict[str, str]]:
        if request.path == SEARCH_PATH and method == "GET":
            with self.pace_lock:
                if request.at - self.last_query < WINDOW:
                    self.refused += 1
                    self.fail_next(429, "RATE_LIMITED")
                else:
                    self.last_query = request.at
        return super()._answer(method, request)


async def converse(url: str, turns: int, name: int) -> list[Turn]:
    async with client() as http:
        conversation = await new_conversation(http, url, web_search=True, web_fetch=False)
        return [
            await chat_turn(http, url, conversation, f"{SEARCH} question {name}.{n}")
            for n in range(turns)
        ]


async def session(url: str, turns: int) -> list[Turn]:
    runs = await asyncio.gather(*(converse(url, turns, c) for c in range(CONVERSATIONS)))
    return [turn for run in runs for turn in run]


def rate_errors(turns: list[Turn]) -> tuple[int, int]:
    """Rate-limit errors that reached the model (a search event's error) and the user."""
    to_model = sum(
        "error" in event and "rate" in str(event["error"]).lower()
        for turn in turns
        for event in turn.tools
    )
    to_user = sum(turn.error is not None for turn in turns)
    return to_model, to_user


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=4, help="turns per conversation")
    parser.add_argument(
        "--rate",
        default="",
        help="SEARCH_RATE for the service (default: the plan's rate); "
        "e.g. 20 to see what the pacing prevents",
    )
    args = parser.parse_args()
    print(f"{code_version(ROOT)}; {machine_load()} at start")
    with bench_stack(Reply(text="An answer [1]."), StrictBrave) as stack:
        brave = stack.brave
        assert isinstance(brave, StrictBrave)
        env = stack.service_env("pacing", SEARCH_CACHE_TTL="0", SEARCH_RATE=args.rate)
        with service(env) as svc:
            started = time.monotonic()
            turns = asyncio.run(session(svc.url, args.turns))
            wall = time.monotonic() - started
        queries = sorted(r.at for r in brave.requests if r.path == SEARCH_PATH)
    gaps = [b - a for a, b in zip(queries, queries[1:], strict=False)]
    waits = [float(e.get("waited", 0.0)) for turn in turns for e in turn.tools] or [0.0]
    to_model, to_user = rate_errors(turns)
    searched = sum(len(turn.tools) for turn in turns)
    told = sum(
        turn.types.index("search_wait") < turn.types.index("search")
        for turn in turns
        if "search_wait" in turn.types and "search" in turn.types
    )
    print(f"{CONVERSATIONS} conversations at once, {len(turns)} turns, {searched} searches")
    print(f"Brave queries {len(queries)}, refused for the rate (429): {brave.refused}")
    print(f"rate-limit errors reaching the model: {to_model}, the user: {to_user}")
    print(
        f"gap between queries at Brave: min {min(gaps):.3f} s, median "
        f"{statistics.median(gaps):.3f} s"
    )
    print(
        f"wait for the plan's rate: longest {max(waits):.2f} s, median "
        f"{statistics.median(waits):.2f} s (waits under 0.1 s are not in the events)"
    )
    print(f"searches the trail told waiting before they ended (search_wait first): {told}")
    print(f"session {wall:.1f} s; {machine_load()} at end")
    return 1 if brave.refused or to_model or to_user else 0


if __name__ == "__main__":
    sys.exit(main())
