"""The chat service's own CPU time per turn: utime + stime of its process (from /proc, all its
threads) over sequential short turns in one conversation (no tools), then over turns with a
search. SearXNG runs in its own process and the fakes in this one, so neither counts. Then a
short turn's time to first token with 50 streams at once, against one alone.

With --py-spy PATH, each phase is also sampled with py-spy (all threads, the service is not
paused) and each thread's share and the top functions are printed in milliseconds of CPU
per turn. py-spy sees only Python holding the GIL: the kernel's time (the "sys" column) and
SQLite's own are missing from its figures.

Last, the same short turns through bench/floor_app.py, a bare proxy on the same web stack
(FastAPI, app.api.sse, httpx over app.transport): the part of the CPU that is the stack's, not ours.

The benchmark's client and the fakes run at lower priority (bench.common.run_yielding), so
the times to first token are the service's. The machine is shared and its speed drifts
between runs (the same commit measured 3.8 and
4.5 ms a turn a minute apart): each sequential phase runs --repeat times on the same service,
each time in a new conversation, and the run with the median CPU is the figure.

Run: .venv/bin/python bench/turn_cpu.py [--short 100] [--search 30] [--streams 50] [--repeat 3]
"""

from __future__ import annotations

import argparse
import asyncio
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.common import (  # noqa: E402
    FLOOR,
    SEARCH,
    Service,
    app_root_argument,
    bench_stack,
    chat_turn,
    client,
    code_version,
    machine_load,
    new_conversation,
    percentile,
    run_yielding,
    service,
)
from tests.fakes.llm_server import Reply  # noqa: E402

ANSWER = Reply(text=[f"word{n} " for n in range(12)])  # instant: only the service's time
WARM_UP = 5
STREAM_TURNS = 4  # turns per conversation when many stream at once
SAMPLES_PER_SECOND = 500
TOP = 25


@dataclass
class Phase:
    name: str
    turns: int
    cpu: float  # seconds, user + system
    system: float  # seconds in the kernel (syscalls, fsync, thread hand-offs)
    wall: float  # seconds
    first_deltas: list[float]
    failures: int


def spent(svc: Service, before: tuple[float, float]) -> tuple[float, float]:
    """(user + system, system) seconds of CPU the service spent since `before`."""
    user, system = (now - then for now, then in zip(svc.cpu_times(), before, strict=True))
    return user + system, system


async def sequential(svc: Service, turns: int, *, search: bool) -> Phase:
    tools = {"web_search": search, "web_fetch": False}
    async with client() as http:
        conversation = await new_conversation(http, svc.url, **tools)
        for n in range(WARM_UP):
            await chat_turn(http, svc.url, conversation, f"warm-up {n} {SEARCH if search else ''}")
        before, started = svc.cpu_times(), time.perf_counter()
        firsts, failures = [], 0
        for n in range(turns):
            text = f"turn {n}: {SEARCH} pierogi {n}" if search else f"turn {n}: how long to boil?"
            turn = await chat_turn(http, svc.url, conversation, text)
            failures += turn.done is None or turn.error is not None
            failures += search and (len(turn.tools) != 1 or "error" in turn.tools[0])
            firsts += [turn.first_delta] if turn.first_delta is not None else []
        (cpu, system), wall = spent(svc, before), time.perf_counter() - started
    name = "turn with a search" if search else "short turn (no tools)"
    return Phase(name, turns, cpu, system, wall, firsts, failures)


async def floor(svc: Service, turns: int) -> Phase:
    """The same short turns through bench/floor_app.py: the web stack's own cost."""
    async with client() as http:
        for n in range(WARM_UP):
            await chat_turn(http, svc.url, "floor", f"warm-up {n}")
        before, started = svc.cpu_times(), time.perf_counter()
        turns_ = [await chat_turn(http, svc.url, "floor", f"turn {n}") for n in range(turns)]
        (cpu, system), wall = spent(svc, before), time.perf_counter() - started
    firsts = [t.first_delta for t in turns_ if t.first_delta is not None]
    failures = sum(t.done is None for t in turns_)
    return Phase("floor: a bare proxy, same stack", turns, cpu, system, wall, firsts, failures)


async def concurrent(svc: Service, streams: int) -> Phase:
    async with client() as http:
        conversations = await asyncio.gather(
            *(
                new_conversation(http, svc.url, web_search=False, web_fetch=False)
                for _ in range(streams)
            )
        )

        async def converse(conversation: str) -> list:
            return [
                await chat_turn(http, svc.url, conversation, f"turn {n}: how long to boil?")
                for n in range(STREAM_TURNS)
            ]

        before, started = svc.cpu_times(), time.perf_counter()
        runs = await asyncio.gather(*(converse(c) for c in conversations))
        (cpu, system), wall = spent(svc, before), time.perf_counter() - started
    turns = [t for run in runs for t in run]
    firsts = [t.first_delta for t in turns if t.first_delta is not None]
    failures = sum(t.done is None or t.error is not None for t in turns)
    name = f"short turn, {streams} streams at once"
    return Phase(name, len(turns), cpu, system, wall, firsts, failures)


def report(phase: Phase) -> None:
    firsts = phase.first_deltas
    print(
        f"{phase.name:34} {phase.turns:>5} {phase.cpu * 1000 / phase.turns:9.1f} "
        f"{phase.system * 1000 / phase.turns:9.1f} "
        f"{phase.wall * 1000 / phase.turns:9.1f} "
        f"{percentile(firsts, 0.5) * 1000:9.1f} {percentile(firsts, 0.99) * 1000:9.1f} "
        f"{phase.failures:>8}"
    )


def idle_cpu(svc: Service, seconds: float = 3.0) -> float:
    """CPU milliseconds per second the service burns doing nothing (timers, pings)."""
    before = svc.cpu_seconds()
    time.sleep(seconds)
    return (svc.cpu_seconds() - before) * 1000 / seconds


def sampled(py_spy: Path | None, svc: Service, out: Path) -> subprocess.Popen | None:
    if py_spy is None:
        return None
    command = [str(py_spy), "record", "--pid", str(svc.process.pid), "--format", "raw"]
    command += ["--function", "--gil", "--threads", "--nonblocking"]
    command += ["--rate", str(SAMPLES_PER_SECOND), "--output", str(out)]
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    time.sleep(1.0)  # py-spy attaches
    return process


def module_of(frame: str) -> str:
    """`function (path/file.py:line)` -> the package, or the file for app/ and the stdlib."""
    where = frame.rpartition("(")[2].partition(":")[0]
    if "site-packages/" in where:
        return where.split("site-packages/")[1].split("/")[0]
    return where.split("python3.11/")[-1] if "python3." in where else where


def print_profile(path: Path, turns: int) -> None:
    """Top functions by own and by inclusive samples, and own samples by module, as CPU
    milliseconds per turn."""
    own: Counter[str] = Counter()
    inclusive: Counter[str] = Counter()
    threads: Counter[str] = Counter()
    for line in path.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        frames = [f for f in stack.split(";") if not f.startswith(("process ", "thread "))]
        if not frames or not count.isdigit():
            continue
        threads[next((f for f in stack.split(";") if f.startswith("thread ")), "?")] += int(count)
        own[frames[-1]] += int(count)
        for frame in set(frames):
            inclusive[frame] += int(count)
    per_turn = 1000 / SAMPLES_PER_SECOND / turns
    print(f"  sampled CPU: {sum(own.values()) * per_turn:.1f} ms per turn, of it:")
    for thread, count in threads.most_common():
        print(f"    {count * per_turn:7.2f}  {thread}")
    modules: Counter[str] = Counter()
    for frame, count in own.items():
        modules[module_of(frame)] += count
    ours = Counter({frame: n for frame, n in inclusive.items() if "(app/" in frame})
    for title, counter in (
        ("own time", own),
        ("own time, by module", modules),
        ("inclusive time, app/ functions", ours),
    ):
        print(f"  top by {title} (ms per turn):")
        for frame, count in counter.most_common(TOP):
            print(f"    {count * per_turn:7.2f}  {frame[:150]}")


def run_phase(svc: Service, py_spy: Path | None, scratch: Path, job, repeat: int) -> Phase:
    """The phase `repeat` times (the sampler, if any, over them all); the median run."""
    profile = scratch / f"profile-{time.monotonic_ns()}.txt"
    sampler = sampled(py_spy, svc, profile)
    runs = []
    for _ in range(repeat):
        runs.append(run_yielding(job(svc)))
        report(runs[-1])
    if sampler is not None:
        sampler.send_signal(signal.SIGINT)
        sampler.wait(timeout=60)
        if profile.exists():
            print_profile(profile, sum(run.turns for run in runs))
    middle = sorted(runs, key=lambda run: run.cpu)[len(runs) // 2]
    if repeat > 1:
        report(Phase(**{**vars(middle), "name": f"  median of {repeat}"}))
    return middle


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--short", type=int, default=100, help="sequential short turns (0: skip)")
    parser.add_argument("--search", type=int, default=30, help="sequential turns with a search")
    parser.add_argument("--streams", type=int, default=50, help="streams at once")
    parser.add_argument("--repeat", type=int, default=3, help="runs of each sequential phase")
    parser.add_argument("--py-spy", type=Path, help="sample each phase with this py-spy")
    app_root_argument(parser)
    args = parser.parse_args()
    print(f"{code_version(args.app_root)}; {machine_load()} at start")
    phases = []
    with bench_stack(ANSWER) as stack, tempfile.TemporaryDirectory() as scratch:
        print(
            f"{'':34} {'turns':>5} {'cpu ms':>9} {'of it sys':>9} {'wall ms':>9} {'ttft50':>9} "
            f"{'ttft99':>9} {'failures':>8}\n{'':34} {'':>5} {'per turn':>9} {'':>9} "
            f"{'per turn':>9} {'ms':>9} {'ms':>9}"
        )
        jobs = [
            lambda svc: sequential(svc, args.short, search=False),
            lambda svc: sequential(svc, args.search, search=True),
            lambda svc: concurrent(svc, args.streams),
        ]
        counts = (args.short, args.search, args.streams)
        idle = 0.0
        repeats = (args.repeat, args.repeat, 1)
        for job, count, repeat in zip(jobs, counts, repeats, strict=True):
            if count == 0:
                continue
            with service(stack.service_env(f"cpu-{len(phases)}"), args.app_root) as svc:
                idle = idle_cpu(svc)
                phases.append(run_phase(svc, args.py_spy, Path(scratch), job, repeat))
        if args.short:
            with service(stack.service_env("floor"), args.app_root, module=FLOOR) as svc:
                job = lambda svc: floor(svc, args.short)  # noqa: E731
                phases.append(run_phase(svc, None, Path(scratch), job, args.repeat))
        print(f"(idle service: {idle:.2f} ms of CPU per second)")
    print(f"{machine_load()} at end")
    return 1 if any(p.failures for p in phases) else 0


if __name__ == "__main__":
    sys.exit(main())
