"""Crash safety with two replicas on one database (issue 26): replica-1 and replica-2 of
`python -m app serve` share PostgreSQL (or, with --backend sqlite, one DATA_DIR); turns
stream on both (STREAMS conversations on each) while another client keeps writing
settings, memory.md and the model list through replica-1, and replica-1 is killed
(SIGKILL) at a random moment, then started again, CYCLES times.

Right after each kill, every conversation whose turn was on replica-1 is asked for a new
turn through replica-2, again and again (409 while the lease holds) until one is taken: the
takeover delay, from the kill to that turn's first event. By default each replica runs
under a host name of its own (a UTS namespace), as on two machines: replica-2 cannot tell
that replica-1's process died, so the lease has to expire (LEASE_SECONDS, renewed every
third of it: a takeover within LEASE_SECONDS of the kill); with --same-host it sees the
dead process and takes over at once. Answers last 5 s, so each kill is mid-stream
and the other turns end on their own; then replica-1 starts again.

After each restart, tests/crashing.py's checks on every turn of the cycle (the kill's, the
takeover's, replica-2's): each user message whose request got its first event stored
exactly once and none twice, each answer a prefix of what its client received and marked
interrupted unless the client saw it end, memory.md, the models and the settings the last
acknowledged write or the one in flight; and a takeover not taken within LEASE_SECONDS of
the kill is a problem. Reports the problems, the takeover delays and how much of the
streamed text survived (characters kept / received), for the killed replica's streams and
for the survivor's.

Run: .venv/bin/python bench/crash_replicas.py [CYCLES] [--backend postgresql|sqlite]
     [--same-host]   (default 20 cycles: about 40 s each with separate hosts)
"""

from __future__ import annotations

import argparse
import random
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from app.store.leases import LEASE_SECONDS  # noqa: E402
from bench.common import app_root_argument, code_version, machine_load, percentile  # noqa: E402
from bench.replicas import (  # noqa: E402
    Replica,
    backend_argument,
    can_run_apart,
    database_server,
)
from tests import crashing  # noqa: E402
from tests.conftest import chat_env, fake_stack  # noqa: E402
from tests.fakes.llm_server import Reply  # noqa: E402

TAKEOVER_SLACK = 2.0
"""Beyond LEASE_SECONDS, for the replica's request and the database's clock."""
ANSWER_DELTAS = 500
"""Answers of 5 s (tests/crashing.py's story, cut): every kill (0.2 to 3 s in) is
mid-stream, and replica-2's turns end on their own."""
BUSY_RETRY = 10.0
"""How long a cycle's turn is asked again after 409 (the survivor's stopped turn of the
cycle before may still be saving its outcome)."""


@dataclass
class Report:
    cycles: int = 0
    problems: list[str] = field(default_factory=list)
    takeovers: list[float] = field(default_factory=list)
    """Seconds from the kill to the first event of a turn taken over through replica-2."""
    kept: dict[str, int] = field(default_factory=lambda: {"killed": 0, "survivor": 0})
    received: dict[str, int] = field(default_factory=lambda: {"killed": 0, "survivor": 0})


@dataclass
class Cycle:
    number: int
    on_victim: list[crashing.Sent]
    on_survivor: list[crashing.Sent]
    takeovers: list[crashing.Sent] = field(default_factory=list)
    writes: crashing.Writes = field(default_factory=crashing.Writes)
    killed_at: float = 0.0

    @property
    def sent(self) -> list[crashing.Sent]:
        return [*self.on_victim, *self.on_survivor, *self.takeovers]


def stream(url: str, sent: crashing.Sent, until: float) -> None:
    """crashing.stream_turn to the turn's end, asked again every 0.2 s while the
    conversation is busy (409) until time.monotonic() reaches `until`."""
    while True:
        sent.refused = None
        crashing.stream_turn(url, sent)
        if sent.refused != 409 or time.monotonic() > until:
            return
        time.sleep(0.2)


def run_cycle(
    victim: Replica, survivor: Replica, conversations: tuple[list[str], list[str]], number: int
) -> Cycle:
    mine, theirs = conversations
    cycle = Cycle(
        number,
        [crashing.Sent(c, f"cycle {number} replica-1 stream {k}") for k, c in enumerate(mine)],
        [crashing.Sent(c, f"cycle {number} replica-2 stream {k}") for k, c in enumerate(theirs)],
        writes=crashing.writes_as_read(victim.url, mine[0]),
    )
    assert victim.running is not None
    until = time.monotonic() + BUSY_RETRY
    threads = [
        threading.Thread(target=stream, args=(replica.url, s, until))
        for replica, group in ((victim, cycle.on_victim), (survivor, cycle.on_survivor))
        for s in group
    ]
    stop_writer = threading.Event()
    writer = threading.Thread(
        target=crashing.keep_writing, args=(victim.url, mine[0], cycle.writes, stop_writer)
    )
    for thread in [*threads, writer]:
        thread.start()
    time.sleep(random.uniform(0.2, 3.0))
    victim.running.process.kill()
    cycle.killed_at = time.monotonic()
    victim.running.process.wait(timeout=10)
    stop_writer.set()
    cycle.takeovers = [crashing.Sent(c, f"cycle {number} takeover {k}") for k, c in enumerate(mine)]
    until = cycle.killed_at + LEASE_SECONDS + TAKEOVER_SLACK
    takers = [
        threading.Thread(target=stream, args=(survivor.url, s, until)) for s in cycle.takeovers
    ]
    for thread in takers:
        thread.start()
    for thread in [*threads, writer, *takers]:
        thread.join(timeout=LEASE_SECONDS + 60)
    return cycle


def assess(url: str, data: Path, cycle: Cycle, sqlite: bool, report: Report) -> list[str]:
    kept, problems = crashing.check(url, data, cycle.sent, cycle.writes, sqlite=sqlite)
    for group, sent in (("killed", cycle.on_victim), ("survivor", cycle.on_survivor)):
        group_kept, _ = crashing.check(url, data, sent, crashing.Writes(), sqlite=False)
        report.kept[group] += group_kept
        report.received[group] += sum(len(s.received) for s in sent)
    refused = [s for s in cycle.sent if s.refused]
    problems += [f"{s.message!r} refused with {s.refused}" for s in refused]
    for sent in cycle.takeovers:
        if sent.first_at is None:
            continue
        delay = sent.first_at - cycle.killed_at
        report.takeovers.append(delay)
        if delay > LEASE_SECONDS + TAKEOVER_SLACK:
            problems.append(f"{sent.message!r} taken over {delay:.1f} s after the kill")
    return problems


def run(env: dict[str, str], root: Path, cycles: int, separate: bool, sqlite: bool) -> Report:
    data = Path(env["DATA_DIR"])
    victim, survivor = (Replica(f"replica-{n}", env, root, separate) for n in (1, 2))
    report = Report()
    with survivor.serving():
        conversations: tuple[list[str], list[str]] = ([], [])
        for group in conversations:
            while len(group) < crashing.STREAMS:
                group.append(httpx.post(f"{survivor.url}/api/conversations", json={}).json()["id"])
        previous: Cycle | None = None
        for number in range(cycles + 1):
            with victim.serving():
                if previous is not None:
                    problems = assess(victim.url, data, previous, sqlite, report)
                    report.problems += [f"cycle {previous.number}: {p}" for p in problems]
                    report.cycles += 1
                    print(f"cycle {previous.number}: {len(problems)} problems", file=sys.stderr)
                if number == cycles:
                    break
                previous = run_cycle(victim, survivor, conversations, number)
    return report


def share(kept: int, received: int) -> str:
    return f"{kept:,} of {received:,} characters ({kept / received if received else 1.0:.1%})"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("cycles", nargs="?", type=int, default=20)
    backend_argument(parser)
    parser.add_argument(
        "--same-host",
        action="store_true",
        help="both replicas under this machine's host name: a dead owner is seen at once",
    )
    app_root_argument(parser)
    args = parser.parse_args()
    separate = not args.same_host
    if separate and not can_run_apart():
        print("separate host names need `unshare --uts` (root): both under this one instead")
        separate = False
    print(f"{code_version(args.app_root)}; {machine_load()} at start")
    with fake_stack() as outside, database_server(args.backend) as shared:
        outside.llm.default = Reply(text=crashing.STORY[:ANSWER_DELTAS], chunk_delay=0.01)
        env = {
            **chat_env(outside.llm, outside.scratch),
            "SEARXNG_URL": outside.searxng.url,
            **shared.new_database("crash"),
        }
        report = run(env, args.app_root, args.cycles, separate, args.backend == "sqlite")
        shared.check_used()
    hosts = "separate host names" if separate else "one host name"
    print(
        f"crash cycles: {report.cycles}, backend {args.backend}, two replicas under {hosts}, "
        f"{crashing.STREAMS} streams on each and a writer on the killed one; "
        f"LEASE_SECONDS {LEASE_SECONDS:.0f}"
    )
    print(f"problems: {len(report.problems)}")
    if report.takeovers:
        delays = report.takeovers
        print(
            f"takeovers: {len(delays)}, delay from the kill p50 {percentile(delays, 0.5):.1f} s, "
            f"max {max(delays):.1f} s"
        )
    for group in ("killed", "survivor"):
        print(
            f"streamed text kept, {group} replica's streams: "
            f"{share(report.kept[group], report.received[group])}"
        )
    for problem in report.problems:
        print(f"  {problem}")
    return 1 if report.problems else 0


if __name__ == "__main__":
    sys.exit(main())
