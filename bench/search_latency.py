"""Added latency of a search through SearXNG and our engine, vs the Brave API called directly.

Both paths hit the same fake Brave API on loopback with the same parameters, so the
difference is SearXNG plus our engine. Run: .venv/bin/python bench/search_latency.py [N]
"""

from __future__ import annotations

import os
import statistics
import sys
import time
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from app.search.embedded import EmbeddedSearxng  # noqa: E402
from tests.fakes.brave_api import FakeBrave  # noqa: E402

WORDS = "docker python linux rust postgres kernel nginx redis kafka vim git llama".split()


def percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(fraction * (len(ordered) - 1)))]


def main(rounds: int) -> None:
    with FakeBrave(api_key="bench") as brave:
        env = {**os.environ, "BRAVE_API_URL": brave.url, "BRAVE_API_KEY": "bench"}
        with EmbeddedSearxng("pl-PL", environ=env) as searxng, httpx.Client(timeout=30) as http:
            through, direct = [], []
            for i in range(rounds + 5):
                query = f"{WORDS[i % len(WORDS)]} {i}"
                started = time.perf_counter()
                http.get(
                    f"{searxng.url}/search", params={"q": query, "format": "json"}
                ).raise_for_status()
                elapsed_through = time.perf_counter() - started
                params = brave.requests[-1].params
                started = time.perf_counter()
                http.get(
                    brave.endpoint, params=params, headers={"X-Subscription-Token": "bench"}
                ).raise_for_status()
                elapsed_direct = time.perf_counter() - started
                if i >= 5:  # the first few warm up connections and imports
                    through.append(elapsed_through * 1000)
                    direct.append(elapsed_direct * 1000)
    added = [t - d for t, d in zip(through, direct, strict=True)]
    print(f"searches: {rounds} (20 results each), sequential, loopback")
    print(f"{'':22} {'median ms':>10} {'p95 ms':>10}")
    for name, values in (("direct to Brave API", direct), ("through SearXNG", through)):
        print(f"{name:22} {statistics.median(values):10.1f} {percentile(values, 0.95):10.1f}")
    print(
        f"{'added by SearXNG':22} {statistics.median(added):10.1f} {percentile(added, 0.95):10.1f}"
    )


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 200)
