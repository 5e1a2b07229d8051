"""What one turn costs the service in a conversation of 10 messages and in one of 1,000: the
user message and the answer are saved whatever the storage is, and a store that rewrites the
whole conversation pays for its length on every turn.

Measured through the HTTP API, against `python -m app serve` in its own process, so the same
script measures the JSON files of today and any storage that replaces them; the storage's own
Python API is not used because it is what changes. Each measured turn is followed by a rewind
(POST /rewind) so the conversation keeps its size. Per turn:
- service time: POST until `done`, minus the fake model server's own time to stream the
  same payload when called directly;
- last delta until `done`: the answer's final save happens there (the outcome is written
  before `done` is sent), with nothing of the model in it;
- the service's CPU (utime + stime from /proc) and the event loop's worst lag meanwhile
  (LOOP_LAG_PROBE=1), which is what every other stream feels.

Run: .venv/bin/python bench/save_cost.py [--sizes 10,1000] [--turns 30]
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from dataclasses import dataclass, field
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.common import (  # noqa: E402
    ScriptedLLM,
    Service,
    app_root_argument,
    bench_stack,
    chat_turn,
    client,
    code_version,
    direct_whole,
    machine_load,
    new_conversation,
    percentile,
    service,
)
from tests.fakes.llm_server import Reply  # noqa: E402

# A typical exchange: a question of a few lines, an answer of about 1,500 characters.
ANSWER = Reply(text=[f"Sentence {n} of a typical answer, about pierogi. " for n in range(30)])
QUESTION = "How long do pierogi with potato and cheese boil, and why does the filling matter? "


@dataclass
class Size:
    messages: int
    stored_bytes: int = 0
    service: list[float] = field(default_factory=list)  # s
    final_save: list[float] = field(default_factory=list)  # s, last delta -> done
    first_delta: list[float] = field(default_factory=list)  # s
    cpu: float = 0.0  # s over all measured turns
    lags: list[float] = field(default_factory=list)  # ms
    failures: int = 0


async def grow(http: httpx.AsyncClient, url: str, conversation: str, messages: int) -> None:
    """Fill the conversation through the API: a question and an answer per turn."""
    for n in range(messages // 2):
        turn = await chat_turn(http, url, conversation, f"{n}: {QUESTION * 3}")
        if turn.done is None:
            raise RuntimeError(f"turn {n} did not finish while filling: {turn}")


async def lag(http: httpx.AsyncClient, url: str) -> float:
    return (await http.get(f"{url}/healthz")).json()["loop_lag_ms"]


async def measure(svc: Service, llm: ScriptedLLM, messages: int, turns: int) -> Size:
    size = Size(messages)
    async with client() as http:
        conversation = await new_conversation(http, svc.url, web_search=False, web_fetch=False)
        await grow(http, svc.url, conversation, messages)
        stored = await http.get(f"{svc.url}/api/conversations/{conversation}")
        size.stored_bytes = len(stored.content)
        for n in range(turns):
            text = f"measured {n}: {QUESTION * 3}"
            await lag(http, svc.url)  # forget the lag of what came before
            before = svc.cpu_seconds()
            turn = await chat_turn(http, svc.url, conversation, text)
            size.cpu += svc.cpu_seconds() - before
            size.lags.append(await lag(http, svc.url))
            payload = llm.first_requests.pop(text, None)
            if turn.done is None or turn.error or turn.last_delta is None or payload is None:
                size.failures += 1
                continue
            model = await direct_whole(http, llm.api_base, payload)
            size.service.append(turn.done - model)
            size.final_save.append(turn.done - turn.last_delta)
            size.first_delta.append(turn.first_delta)
            rewound = await http.post(f"{svc.url}/api/conversations/{conversation}/rewind")
            size.failures += rewound.status_code != 200
    return size


def ms(values: list[float], fraction: float) -> str:
    return f"{percentile(values, fraction) * 1000:8.1f}" if values else "       -"


def report(size: Size, turns: int) -> None:
    print(
        f"{size.messages:>8} {size.stored_bytes / 1000:9.0f} {ms(size.service, 0.5)} "
        f"{ms(size.service, 0.9)} {ms(size.final_save, 0.5)} {ms(size.final_save, 0.9)} "
        f"{ms(size.first_delta, 0.5)} {size.cpu * 1000 / turns:8.1f} "
        f"{percentile(size.lags, 0.5):8.1f} {max(size.lags):8.1f} {size.failures:>8}"
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="10,1000", help="conversation sizes in messages")
    parser.add_argument("--turns", type=int, default=30, help="measured turns per size")
    app_root_argument(parser)
    args = parser.parse_args()
    print(f"{code_version(args.app_root)}; {machine_load()} at start")
    print(
        f"{'messages':>8} {'stored':>9} {'service time':>17} {'last delta->done':>17} "
        f"{'ttft':>8} {'cpu':>8} {'loop lag':>17} {'failures':>8}\n"
        f"{'':>8} {'KB':>9} {'p50 ms':>8} {'p90 ms':>8} {'p50 ms':>8} {'p90 ms':>8} "
        f"{'p50 ms':>8} {'ms/turn':>8} {'p50 ms':>8} {'max ms':>8}"
    )
    failures = 0
    with bench_stack(ANSWER) as stack:
        for messages in (int(n) for n in args.sizes.split(",") if n):
            env = stack.service_env(f"size-{messages}", LOOP_LAG_PROBE="1")
            with service(env, args.app_root) as svc:
                size = asyncio.run(measure(svc, stack.llm, messages, args.turns))
            report(size, args.turns)
            failures += size.failures
    print(f"{machine_load()} at end")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
