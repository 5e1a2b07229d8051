"""What filled the event loop's stalls, from the kernel's scheduler trace: the loop thread's
busy windows (stretches where it never slept longer than GAP_MS, that is never waited in
its poll) and, in each, how long it ran, how long it waited for a core, and what else ran
on the cores meanwhile. A window with a long run is the loop's own queued work; one with a
long wait is the other processes (SearXNG, the benchmark's client and fakes).

Record a load run with Debian's linux-perf, then read it:

    perf sched record -a -o /tmp/load.data -- \
        .venv/bin/python bench/load.py --levels 50 --big-level 0
    .venv/bin/python bench/stalls.py /tmp/load.data [--min-ms 15] [--pid PID]

The first windows, hundreds of milliseconds long, are the service's start (its imports).

The loop thread is the process main thread with the most context switches (the service's),
unless --pid names it. Short sleeps inside a window are mostly handovers of the GIL to the
service's other threads (storage, watchdog).
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
from collections import Counter
from dataclasses import dataclass, field

GAP_MS = 0.5
ROW = re.compile(
    r"\s*([\d.]+)\s+\[\d+\]\s+(.+?)\[(-?\d+)(?:/(\d+))?\]\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)"
)


@dataclass(frozen=True)
class Slice:
    """One stretch on a core: it ended at `end` (s) after `run` ms, having waited `delay` ms
    for the core and slept `wait` ms before that."""

    end: float
    name: str
    tid: int
    pid: int
    wait: float
    delay: float
    run: float

    @property
    def start(self) -> float:
        return self.end - self.run / 1000


@dataclass
class Window:
    start: float
    end: float
    run: float = 0.0
    delay: float = 0.0
    slept: float = 0.0
    others: Counter[str] = field(default_factory=Counter)

    @property
    def length(self) -> float:
        return (self.end - self.start) * 1000


def slices(path: str) -> list[Slice]:
    command = ["perf", "sched", "timehist", "-i", path]
    text = subprocess.run(command, capture_output=True, text=True, check=True).stdout
    found = []
    for match in map(ROW.match, text.splitlines()):
        if match:
            end, name, tid, pid, wait, delay, run = match.groups()
            tid_ = int(tid)
            found.append(
                Slice(float(end), name, tid_, int(pid or tid), *map(float, (wait, delay, run)))
            )
    return found


def loop_thread(found: list[Slice]) -> int:
    switches = Counter(s.tid for s in found if s.tid == s.pid and s.name == "python")
    return switches.most_common(1)[0][0]


def windows(found: list[Slice], tid: int) -> list[Window]:
    joined: list[Window] = []
    for s in (s for s in found if s.tid == tid):
        if joined and s.wait < GAP_MS:
            window = joined[-1]
            window.end, window.slept = s.end, window.slept + s.wait
        else:
            window = Window(s.start - s.delay / 1000, s.end)
            joined.append(window)
        window.run += s.run
        window.delay += s.delay
    return joined


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("data", help="a perf.data of `perf sched record -a`")
    parser.add_argument("--min-ms", type=float, default=15.0, help="windows at least this long")
    parser.add_argument("--pid", type=int, help="the loop's thread (the service's pid)")
    args = parser.parse_args()
    found = slices(args.data)
    tid = args.pid or loop_thread(found)
    names = {s.pid: s.name for s in found if s.tid == s.pid}
    long = [w for w in windows(found, tid) if w.length >= args.min_ms]
    for w in long:
        for s in found:
            overlap = min(s.end, w.end) - max(s.start, w.start)
            if overlap > 0 and s.tid != tid and s.name != "<idle>":
                who = "service's threads" if s.pid == tid else names.get(s.pid, s.name)
                w.others[f"{who}[{s.pid}]"] += overlap * 1000
    print(f"loop thread {tid}: {len(long)} busy windows of {args.min_ms:g} ms or more")
    print(f"{'start s':>12} {'length':>7} {'ran':>6} {'waited':>7} {'slept':>6}  meanwhile (ms)")
    for w in long:
        meanwhile = ", ".join(f"{name} {ms:.1f}" for name, ms in w.others.most_common(4))
        times = f"{w.length:7.1f} {w.run:6.1f} {w.delay:7.1f} {w.slept:6.1f}"
        print(f"{w.start:12.4f} {times}  {meanwhile}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
