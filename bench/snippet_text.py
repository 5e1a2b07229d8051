"""Text per result: our engine (description + extra snippets + date) vs the description
alone, which is what a stock engine keeps.

Through a real SearXNG against the fake Brave API, and on the recorded Brave response
in ../shared when it is there. Run: .venv/bin/python bench/snippet_text.py
"""

from __future__ import annotations

import importlib.util
import json
import os
import sys
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from app import config  # noqa: E402
from app.search.embedded import EmbeddedSearxng  # noqa: E402
from tests.fakes.brave_api import FakeBrave  # noqa: E402

RECORDED = ROOT.parent / "shared" / "corpus" / "brave" / "bestak_kotlin_coroutines_en.json"
QUERIES = ["docker compose volumes", "python asyncio", "konfiguracja sieci", "base de données"]


def load_engine():
    spec = importlib.util.spec_from_file_location("brave_api", config.ENGINE_FILE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def through_searxng(engine) -> tuple[int, float, float]:
    ours = stock = 0
    count = 0
    with FakeBrave(api_key="bench") as brave:
        env = {**os.environ, "BRAVE_API_URL": brave.url, "BRAVE_API_KEY": "bench"}
        with EmbeddedSearxng("all", environ=env) as searxng:
            for query in QUERIES:
                for locale in ("all", "pl-PL", "fr-FR"):
                    results = httpx.get(
                        f"{searxng.url}/search",
                        params={"q": query, "format": "json", "language": locale},
                        timeout=30,
                    ).json()["results"]
                    raw = httpx.get(
                        brave.endpoint,
                        params=brave.requests[-1].params,
                        headers={"X-Subscription-Token": "bench"},
                    ).json()["web"]["results"]
                    description = {r["url"]: engine.clean_text(r["description"]) for r in raw}
                    for result in results:
                        ours += len(result["content"])
                        stock += len(description[result["url"]])
                        count += 1
    return count, ours / count, stock / count


def main() -> None:
    engine = load_engine()
    count, ours, stock = through_searxng(engine)
    print(f"{'source':34} {'results':>7} {'ours chars':>10} {'stock chars':>11} {'ratio':>6}")
    row = "{:34} {:7} {:10.0f} {:11.0f} {:5.1f}x"
    print(row.format("fake Brave API through SearXNG", count, ours, stock, ours / stock))
    if RECORDED.exists():
        results = json.loads(RECORDED.read_text())["web"]["results"]
        ours = sum(len(engine.format_result(r)["content"]) for r in results) / len(results)
        stock = sum(len(engine.clean_text(r["description"])) for r in results) / len(results)
        name = "recorded Brave response (Kotlin)"
        print(row.format(name, len(results), ours, stock, ours / stock))
    else:
        print(f"(no {RECORDED}: the recorded response sits beside the checkout only in CI)")


if __name__ == "__main__":
    main()
