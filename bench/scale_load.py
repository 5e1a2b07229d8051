"""Load through a reverse proxy (issue 26): 1 replica against 2 of `python -m app serve`
behind Debian's nginx (least_conn, no buffering), on one shared database (PostgreSQL by
default, or SQLite in one shared DATA_DIR), at 50 and 100 conversations streaming at once
against the fakes. Each conversation takes the turns of bench/load.py (a plain one, a
web_search, a web_fetch, a plain one, repeated) and is read back after through the proxy.

Per run: turns, 5xx answers and other problems (none expected; each is printed), messages
lost or doubled in the read-back, time to first token p50 / p99 through the proxy (turns
answered without a tool) and the model server's own for the same payload, and what limits
it: each process's CPU time over the run as a share of one core (every replica, nginx,
PostgreSQL's processes, SearXNG, this process: the load generator and the fakes), the
machine's idle share, and for PostgreSQL what its sessions waited on (pg_stat_activity,
sampled every 0.1 s: sessions per sample in each state) and locks not granted (pg_locks).

The load generator, the fakes and SearXNG run on the same cores as the replicas: on a
2-core machine a second replica adds no core, only a second event loop.

Run: .venv/bin/python bench/scale_load.py [--backend postgresql|sqlite] [--replicas 1,2]
     [--levels 50,100] [--turns 4] [--balance least_conn|round_robin]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import time
from contextlib import suppress
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.common import (  # noqa: E402
    Stack,
    app_root_argument,
    bench_stack,
    children,
    client,
    code_version,
    machine_load,
    percentile,
    process_cpu_times,
    run_yielding,
    stolen_seconds,
)
from bench.load import ANSWER, KINDS, Sent, check, converse, warm_up  # noqa: E402
from bench.replicas import (  # noqa: E402
    Activity,
    Proxy,
    Replica,
    Shared,
    backend_argument,
    core_waits,
    database_server,
    proxy,
    replicas,
    watching_database,
)


@dataclass
class Run:
    replicas: int
    level: int
    sent: list[Sent] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    seconds: float = 0.0
    cpu: dict[str, float] = field(default_factory=dict)
    """CPU seconds over the run, by process."""
    idle: float = 0.0
    """The machine's idle CPU time over the run, s (all cores)."""
    stolen: float = 0.0
    activity: Activity = field(default_factory=Activity)
    others: list[tuple[str, float]] = field(default_factory=list)
    """The processes of the machine outside the benchmark that used the most CPU."""


def idle_seconds() -> float:
    fields = Path("/proc/stat").read_text().split("\n", 1)[0].split()
    return (int(fields[4]) + int(fields[5])) / os.sysconf("SC_CLK_TCK")  # idle + iowait


def every_process() -> dict[int, tuple[str, float]]:
    """Each process's command line (its start) and CPU time (its own threads), s."""
    found = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            command = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
        except (FileNotFoundError, ProcessLookupError):
            continue
        fields = stat.rsplit(")", 1)[1].split()
        seconds = (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
        command = " ".join(command.split())[:60] or stat.split("(")[1].split(")")[0]
        found[int(entry.name)] = (command, seconds)
    return found


def ours(shared: Shared, front: Proxy, serving: list[Replica], stack: Stack) -> set[int]:
    """This process, the replicas, nginx, PostgreSQL, SearXNG, and their children."""
    roots = [os.getpid(), front.process.pid, *(r.running.process.pid for r in serving if r.running)]
    if stack.searxng.process is not None:
        roots.append(stack.searxng.process.pid)
    if shared.server is not None:
        roots.append(int((shared.server.data / "postmaster.pid").read_text().split()[0]))
    found: set[int] = set()
    while roots:
        pid = roots.pop()
        if pid not in found:
            found.add(pid)
            with suppress(FileNotFoundError):
                roots += children(pid)
    return found


def others(
    before: dict[int, tuple[str, float]], after: dict[int, tuple[str, float]], mine: set[int]
) -> list[tuple[str, float]]:
    """The processes outside this benchmark that used the most CPU meanwhile."""
    used = [
        (command, seconds - before.get(pid, (command, 0.0))[1])
        for pid, (command, seconds) in after.items()
        if pid not in mine
    ]
    return sorted(used, key=lambda item: -item[1])[:3]


def cpu_now(stack: Stack, shared: Shared, front: Proxy, serving: list[Replica]) -> dict[str, float]:
    found = {r.name: r.cpu_seconds() for r in serving}
    found.update(
        {f"{r.name} waiting": core_waits(r.running.process.pid) for r in serving if r.running}
    )
    found["nginx"] = front.cpu_seconds()
    if shared.server is not None:
        found["postgres"] = shared.cpu_seconds()
    if stack.searxng.process is not None:
        found["searxng"] = sum(process_cpu_times(stack.searxng.process.pid))
    own = os.times()
    found["generator+fakes"] = own.user + own.system
    return found


async def drive(stack: Stack, url: str, level: int, turns: int) -> tuple[list[Sent], list[str]]:
    async with client() as http:
        runs = await asyncio.gather(*(converse(http, url, stack, n, turns) for n in range(level)))
        problems: list[str] = []
        sent: list[Sent] = []
        for conversation, items in runs:
            sent += items
            problems += await check(http, url, conversation, items)
    return sent, problems


async def warm(stack: Stack, serving: list[Replica]) -> None:
    """One turn of each kind on each replica first, unmeasured (bench/load.py's warm_up)."""
    async with client() as http:
        for replica in serving:
            await warm_up(http, replica.url, stack)


def one_run(stack: Stack, shared: Shared, args: argparse.Namespace, count: int, level: int) -> Run:
    name = f"r{count}-l{level}"
    rate = {"SEARCH_RATE": args.search_rate} if args.search_rate else {}
    env = stack.service_env(name, **shared.new_database(name), **rate)
    run = Run(count, level)
    with (
        replicas(count, env, args.app_root) as serving,
        proxy([r.port for r in serving], balance=args.balance, workers=args.nginx_workers) as front,
    ):
        run_yielding(warm(stack, serving))
        before, idle, stolen = (
            cpu_now(stack, shared, front, serving),
            idle_seconds(),
            stolen_seconds(),
        )
        processes, started = every_process(), time.perf_counter()
        with watching_database(shared) as run.activity:
            run.sent, run.problems = run_yielding(drive(stack, front.url, level, args.turns))
        run.seconds = time.perf_counter() - started
        after = cpu_now(stack, shared, front, serving)
        run.idle, run.stolen = idle_seconds() - idle, stolen_seconds() - stolen
        run.cpu = {key: after[key] - before.get(key, 0.0) for key in after}
        run.others = others(processes, every_process(), ours(shared, front, serving, stack))
    shared.check_used()
    return run


def ms(values: list[float], fraction: float) -> str:
    return f"{percentile(values, fraction) * 1000:7.0f}" if values else "      -"


HEADER = (
    "replicas streams turns  5xx problems lost/doubled  ttft50  ttft99 direct50 direct99   wall\n"
    "                                                      ms      ms       ms       ms      s"
)


def report(run: Run) -> None:
    plain = [i for i in run.sent if i.overhead is not None]
    through = [i.turn.first_delta for i in plain if i.turn.first_delta is not None]
    direct = [i.direct for i in plain if i.direct is not None]
    server_errors = sum(1 for i in run.sent if i.turn.status >= 500)
    stored_wrong = [p for p in run.problems if " stored " in p]
    print(
        f"{run.replicas:>8} {run.level:>7} {len(run.sent):>5} {server_errors:>4} "
        f"{len(run.problems):>8} {len(stored_wrong):>12} {ms(through, 0.5)} {ms(through, 0.99)} "
        f"{ms(direct, 0.5)} {ms(direct, 0.99)} {run.seconds:6.1f}"
    )
    cpu = {name: seconds for name, seconds in run.cpu.items() if not name.endswith(" waiting")}
    shares = ", ".join(f"{name} {seconds / run.seconds:.0%}" for name, seconds in cpu.items())
    waits = ", ".join(
        f"{name.removesuffix(' waiting')} {seconds / run.seconds:.0%}"
        for name, seconds in run.cpu.items()
        if name.endswith(" waiting")
    )
    cores = len(os.sched_getaffinity(0))
    rest = cores * run.seconds - run.idle - sum(cpu.values())
    print(
        f"      CPU as a share of one core: {shares}; everything else {rest / run.seconds:.0%}; "
        f"idle {run.idle / run.seconds / cores:.0%} of {cores} cores; stolen {run.stolen:.1f} s"
    )
    kinds = {
        kind: [i.turn.done for i in run.sent if i.kind == kind and i.turn.done is not None]
        for kind in dict.fromkeys(KINDS)
    }
    durations = ", ".join(
        f"{kind} {ms(times, 0.5).strip()} / {ms(times, 0.99).strip()}"
        for kind, times in kinds.items()
    )
    print(f"      whole turn p50 / p99, ms: {durations}")
    print(f"      runnable but waiting for a core, as a share of the run (all threads): {waits}")
    busiest = "; ".join(f"{command} {seconds / run.seconds:.0%}" for command, seconds in run.others)
    print(f"      busiest other processes: {busiest}")
    if run.activity.samples:
        locks = run.activity.ungranted_locks / run.activity.samples
        print(
            f"      PostgreSQL: up to {run.activity.most_connections} connections; sessions "
            f"per sample: {run.activity.waits()}; locks not granted per sample {locks:.2f}"
        )
    for problem in run.problems[:10]:
        print(f"      problem: {problem}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    backend_argument(parser)
    parser.add_argument("--replicas", default="1,2")
    parser.add_argument("--levels", default="50,100", help="conversations streaming at once")
    parser.add_argument("--turns", type=int, default=4, help="turns per conversation")
    parser.add_argument("--balance", choices=("least_conn", "round_robin"), default="least_conn")
    parser.add_argument("--nginx-workers", type=int, default=1)
    parser.add_argument(
        "--search-rate",
        default="1000",
        help="SEARCH_RATE of the replicas (default 1000: unpaced, so the plan's 1 query a "
        "second, kept by each replica on its own, does not set the pace); '' for the plan's",
    )
    app_root_argument(parser)
    args = parser.parse_args()
    print(f"{code_version(args.app_root)}; {machine_load()} at start")
    print(
        f"{os.cpu_count()} cores shared by the replicas, nginx ({args.nginx_workers} worker, "
        f"{args.balance}), the database, SearXNG, the fakes and the load generator; backend "
        f"{args.backend}; SEARCH_RATE {args.search_rate or 'of the plan'}; each conversation: "
        f"{args.turns} turns of {', '.join(KINDS)}; "
        f"answers of {len(ANSWER.text)} deltas {ANSWER.chunk_delay * 1000:.0f} ms apart"
    )
    problems = 0
    with bench_stack(ANSWER) as stack, database_server(args.backend) as shared:
        print(HEADER)
        for level in (int(n) for n in args.levels.split(",") if n):
            for count in (int(n) for n in args.replicas.split(",") if n):
                run = one_run(stack, shared, args, count, level)
                report(run)
                problems += len(run.problems)
    print(f"{machine_load()} at end")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
