"""Load: 1, 10 and 50 conversations streaming at once, each several turns, among them a
web_search and a web_fetch, through `python -m app serve` (its own process, LOOP_LAG_PROBE=1)
against the fakes. Per level: lost or duplicated messages (each conversation read back
after), 5xx answers, time to first token through the service against the model server called
directly with the same payload in the same run (on the turns that answer without a tool), the
event loop's worst lag (/healthz), the service's CPU time per turn (all its threads) and its
memory. Each service gets one turn of each kind first, unmeasured (`warm_up`).

Then a run at one level where, during the load, a conversation of about 6 MB gets a turn
(so it is read and saved) and a page of a few MB is fetched and extracted: the loop's lag
while each of those runs.

With --own-core the service runs on a core of its own and everything else on the others:
what the service does to its loop, without the load generator taking its CPU (the client
and the fakes use about twice the service's CPU at 50 streams).

Run: .venv/bin/python bench/load.py [--levels 1,10,50] [--turns 8] [--big-level 10] [--own-core]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.common import (  # noqa: E402
    FETCH,
    SEARCH,
    LagWatch,
    Service,
    Stack,
    Turn,
    app_root_argument,
    bench_stack,
    chat_turn,
    client,
    code_version,
    direct_first_delta,
    machine_load,
    new_conversation,
    percentile,
    run_yielding,
    service,
    stolen_seconds,
    watching_lag,
)
from tests.fakes.llm_server import Reply  # noqa: E402

# About 40 tokens/s for 25 deltas, a local model's pace: streams really overlap.
ANSWER = Reply(text=[f"word{n} " for n in range(25)], chunk_delay=0.02)
KINDS = ("plain", "search", "fetch", "plain")
ALONE_TURNS = 40  # one conversation alone gets more turns, for a p99 worth the name
BIG_MESSAGE_CHARS = 180_000
BIG_BYTES = 6_000_000
FILLER = "Zażółć gęślą jaźń: pierogi z kapustą i grzybami, lepione ręcznie w Łodzi. "


@dataclass
class Sent:
    kind: str
    message: str
    turn: Turn
    overhead: float | None = None  # first delta through the service minus directly, s
    direct: float | None = None


@dataclass
class Outcome:
    level: int
    sent: list[list[Sent]] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    lag: LagWatch = field(default_factory=LagWatch)
    memory: dict[str, float] = field(default_factory=dict)
    seconds: float = 0.0
    cpu: float = 0.0
    """The service's CPU time (all its threads) while the conversations ran, s."""
    stolen: float = 0.0
    """CPU time the hypervisor took for other machines meanwhile, s (stolen_seconds)."""


def message(stack: Stack, conversation: int, turn: int, kind: str) -> str:
    tag = f"conversation {conversation} turn {turn}:"
    if kind == "search":
        return f"{tag} {SEARCH} pierogi ruskie {conversation}-{turn}"
    if kind == "fetch":
        return f"{tag} please read {FETCH} {stack.pages.url}/article"
    return f"{tag} how long do pierogi boil?"


async def converse(
    http: httpx.AsyncClient, url: str, stack: Stack, index: int, turns: int
) -> tuple[str, list[Sent]]:
    conversation = await new_conversation(http, url)
    sent = []
    for number in range(turns):
        kind = KINDS[number % len(KINDS)]
        text = message(stack, index, number, kind)
        item = Sent(kind, text, await chat_turn(http, url, conversation, text))
        payload = stack.llm.first_requests.pop(text, None)
        if kind == "plain" and item.turn.first_delta is not None and payload is not None:
            item.direct = await direct_first_delta(http, stack.llm.api_base, payload)
            item.overhead = item.turn.first_delta - item.direct
        sent.append(item)
    return conversation, sent


async def check(
    http: httpx.AsyncClient, url: str, conversation: str, sent: list[Sent]
) -> list[str]:
    """What went wrong in one conversation, as stored and as streamed."""
    problems = []
    for item in sent:
        if item.turn.status >= 500:
            problems.append(f"HTTP {item.turn.status} for {item.message!r}")
        elif item.turn.error or item.turn.done is None:
            problems.append(f"no clean end for {item.message!r}: {item.turn.error}")
        elif item.turn.text != "".join(ANSWER.text):
            problems.append(f"streamed answer differs for {item.message!r}")
        tools = [e for e in item.turn.tools if e["type"] in ("search", "fetch")]
        if item.kind != "plain" and (len(tools) != 1 or tools[0].get("error")):
            problems.append(f"the {item.kind} of {item.message!r} failed: {tools}")
    response = await http.get(f"{url}/api/conversations/{conversation}")
    if response.status_code != 200:
        return [*problems, f"reading {conversation} back: HTTP {response.status_code}"]
    stored = response.json()["messages"]
    users = Counter(m["content"] for m in stored if m["role"] == "user")
    for item in sent:
        if users[item.message] != 1:
            problems.append(f"{item.message!r} stored {users[item.message]} times")
    answers = [m for m in stored if m["role"] == "assistant"]
    if len(answers) != len(sent):
        problems.append(f"{len(answers)} answers stored for {len(sent)} turns")
    problems += [
        f"answer stored as {m['status']}" for m in answers if m.get("status") != "complete"
    ]
    return problems


async def warm_up(http: httpx.AsyncClient, url: str, stack: Stack) -> None:
    """One turn of each kind before measuring, as a service that has been running has had:
    the first page read starts the extraction worker (a third of a second of imports), a
    cost paid once per process, not per turn."""
    conversation = await new_conversation(http, url)
    for kind in dict.fromkeys(KINDS):
        await chat_turn(http, url, conversation, message(stack, -1, 0, kind))


async def load_level(stack: Stack, svc: Service, level: int, turns: int) -> Outcome:
    outcome = Outcome(level)
    async with client() as http:
        await warm_up(http, svc.url, stack)
        started, cpu, stolen = time.perf_counter(), svc.cpu_seconds(), stolen_seconds()
        async with watching_lag(http, svc.url) as outcome.lag:
            runs = await asyncio.gather(
                *(converse(http, svc.url, stack, n, turns) for n in range(level))
            )
        outcome.seconds = time.perf_counter() - started
        outcome.cpu = svc.cpu_seconds() - cpu
        outcome.stolen = stolen_seconds() - stolen
        for conversation, sent in runs:
            outcome.sent.append(sent)
            outcome.problems += await check(http, svc.url, conversation, sent)
    outcome.memory = svc.memory_mb()
    return outcome


def optional(value: float | None) -> str:
    return f"{value:7.1f}" if value is not None else "      -"


def ms(values: list[float], fraction: float) -> str:
    return f"{percentile(values, fraction) * 1000:7.1f}" if values else "      -"


def report_level(outcome: Outcome) -> None:
    items = [item for sent in outcome.sent for item in sent]
    plain = [i for i in items if i.overhead is not None]
    through = [i.turn.first_delta for i in plain]
    direct = [i.direct for i in plain]
    added = [i.overhead for i in plain]
    server_errors = sum(1 for i in items if i.turn.status >= 500)
    tool_turns = [i.turn.done for i in items if i.kind != "plain" and i.turn.done]
    print(
        f"{outcome.level:>5} {len(items):>6} {server_errors:>4} {len(outcome.problems):>8} "
        f"{len(plain):>4} {ms(through, 0.5)} {ms(through, 0.99)} {ms(direct, 0.5)} "
        f"{ms(direct, 0.99)} {ms(added, 0.5)} {ms(added, 0.99)} "
        f"{ms(tool_turns, 0.5)} {outcome.lag.worst():9.1f} {optional(outcome.lag.worst_own())} "
        f"{outcome.memory.get('VmRSS', 0):6.0f} {outcome.memory.get('VmHWM', 0):6.0f} "
        f"{outcome.seconds:6.1f} {outcome.cpu / len(items) * 1000:6.1f} "
        f"{outcome.stolen * 1000:6.0f}"
    )
    for problem in outcome.problems[:10]:
        print(f"      problem: {problem}")


HEADER = (
    "level  turns  5xx problems    n   ttft50  ttft99 direct50 direct99  added50  added99 "
    "tool50 worst_lag own_lag   rss    hwm   wall cpu/turn stolen\n"
    "                                     ms      ms       ms       ms       ms       ms "
    "    ms        ms      ms    MB     MB      s     ms     ms"
)


async def seed_big(http: httpx.AsyncClient, url: str) -> tuple[str, int]:
    """A conversation of about BIG_BYTES, written through the API (as a user would get one,
    and whatever the storage); its size as the API returns it."""
    conversation = await new_conversation(http, url, web_search=False, web_fetch=False)
    text = (FILLER * (BIG_MESSAGE_CHARS // len(FILLER) + 1))[:BIG_MESSAGE_CHARS]
    written = 0
    while written < BIG_BYTES:
        turn = await chat_turn(http, url, conversation, f"{written}: {text}")
        if turn.done is None:
            raise RuntimeError(f"seeding the big conversation failed: {turn.error or turn.types}")
        written += len(text.encode())
    response = await http.get(f"{url}/api/conversations/{conversation}")
    return conversation, len(response.content)


async def big_run(stack: Stack, svc: Service, level: int, turns: int) -> None:
    """Load at `level`, and meanwhile one turn in a ~6 MB conversation, then one reading
    a page of a few MB: the loop's worst lag while each runs."""
    async with client() as http:
        await warm_up(http, svc.url, stack)
        big, size = await seed_big(http, svc.url)
        reader = await new_conversation(http, svc.url)
        page = f"{stack.big_page.url}/long"
        async with watching_lag(http, svc.url) as lag:
            load = asyncio.gather(*(converse(http, svc.url, stack, n, turns) for n in range(level)))
            await asyncio.sleep(1.0)  # the load is streaming
            windows = {}
            for name, conversation, text in (
                (f"turn in the {size / 1e6:.1f} MB conversation", big, "one more question"),
                (
                    f"fetch of a {len(stack.big_page.body) / 1e6:.1f} MB page",
                    reader,
                    f"please read {FETCH} {page}",
                ),
            ):
                turn = await chat_turn(http, svc.url, conversation, text)
                windows[name] = (turn, turn.started, time.perf_counter())
                await asyncio.sleep(0.5)
            runs = await load
            after = time.perf_counter()
    problems = 0
    async with client() as http:
        for conversation, sent in runs:
            problems += len(await check(http, svc.url, conversation, sent))
    first = min(start for _, start, _ in windows.values())
    calm = max((r.lag for r in lag.readings if r.end <= first), default=0.0)
    print(f"\nDuring load at {level} conversations ({problems} problems in them):")
    print(f"  worst loop lag before the big turns (readings ending before them): {calm:.1f} ms")
    for name, (turn, start, end) in windows.items():
        tools = [e for e in turn.tools if e.get("error")]
        state = "done" if turn.done and not turn.error and not tools else f"FAILED {turn.error}"
        print(
            f"  {name}: {state} in {(end - start) * 1000:.0f} ms, worst loop lag meanwhile "
            f"{lag.worst(start, end):.1f} ms (own {optional(lag.worst_own(start, end)).strip()})"
        )
    print(
        f"  worst loop lag overall: {lag.worst(0, after):.1f} ms "
        f"(own {optional(lag.worst_own(0, after)).strip()})"
    )
    memory = svc.memory_mb()
    print(f"  service memory: RSS {memory['VmRSS']:.0f} MB, peak {memory['VmHWM']:.0f} MB")


def own_core(parser: argparse.ArgumentParser) -> list[str]:
    """This process (and so the fakes and SearXNG it starts) leaves the first core to the
    service; the service's command, started on that core."""
    first, *others = sorted(os.sched_getaffinity(0))
    if not others:
        parser.error("--own-core needs at least two cores")
    os.sched_setaffinity(0, others)  # before any thread starts: they inherit it
    print(f"the service on core {first}, the rest on {','.join(map(str, others))}")
    return ["taskset", "--cpu-list", str(first), sys.executable]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--levels", default="1,10,50")
    parser.add_argument("--turns", type=int, default=8, help="turns per conversation")
    parser.add_argument("--big-level", type=int, default=10, help="0: skip the big run")
    parser.add_argument(
        "--own-core",
        action="store_true",
        help="the service on a core of its own, the client, fakes and SearXNG on the others: "
        "its lag without the load generator's CPU",
    )
    app_root_argument(parser)
    args = parser.parse_args()
    levels = [int(n) for n in args.levels.split(",") if n]
    print(f"{code_version(args.app_root)}; {machine_load()} at start")
    wrapper = None
    if args.own_core:
        wrapper = own_core(parser)
    print(
        f"each conversation: turns {', '.join(KINDS)} repeated; answers of {len(ANSWER.text)} "
        f"deltas {ANSWER.chunk_delay * 1000:.0f} ms apart; 1 conversation alone: "
        f"{max(args.turns, ALONE_TURNS)} turns"
    )
    problems = 0
    with bench_stack(ANSWER) as stack:
        print(HEADER)
        for level in levels:
            turns = max(args.turns, ALONE_TURNS) if level == 1 else args.turns
            env = stack.service_env(f"level-{level}", LOOP_LAG_PROBE="1")
            with service(env, args.app_root, wrapper=wrapper) as svc:
                outcome = run_yielding(load_level(stack, svc, level, turns))
            report_level(outcome)
            problems += len(outcome.problems)
        if args.big_level:
            env = stack.service_env("big", LOOP_LAG_PROBE="1")
            with service(env, args.app_root, wrapper=wrapper) as svc:
                run_yielding(big_run(stack, svc, args.big_level, args.turns))
    print(f"{machine_load()} at end")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
