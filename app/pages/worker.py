"""Extraction in a worker process, for the service: a page of a few MB takes seconds of
CPU in lxml and trafilatura, which in a thread would hold the GIL against every stream
(docs/performance.md). The service itself never imports the extractor (app.pages.extract):
only the worker's fork server does."""

from __future__ import annotations

import asyncio
import contextlib
import multiprocessing
import os
import select
import signal
import threading
import time
from concurrent.futures import ProcessPoolExecutor, ThreadPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass

from app.pages.errors import FetchFailed
from app.pages.extracted import Extracted, extract_here

EXTRACTOR = "app.pages.extract"
"""The extractor's module, imported by the fork server only (see spawned_worker)."""
EXTRACTION_NICENESS = 10
EXTRACTION_DEADLINE = 20.0
"""Seconds one page's extraction may take (a page of a few MB takes a few seconds)."""


@dataclass
class Worker:
    """The extraction process: its pool of one, and its pid (to stop it)."""

    pool: ProcessPoolExecutor
    pid: int

    def stop(self) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.kill(self.pid, signal.SIGKILL)
        self.pool.shutdown(wait=False, cancel_futures=True)


class ExtractionProcess:
    """Extraction in a worker process, for the service. A page of a few MB takes seconds of
    CPU in lxml and trafilatura; in a thread that would hold the GIL, and every stream
    would stall behind it. The worker starts with the first page (the first one's imports
    take about a third of a second; each one after is a fork of a process that made them)
    and is replaced if it dies.

    Pages take turns, each with its own deadline from its start (not from a queue's): past
    it, the worker is killed and replaced, so that one page built to be slow holds the
    other conversations' pages back by `deadline` at most. A page whose turn ends before
    its extraction (the user stopped the answer) has the worker killed too: nothing runs
    for nobody, ahead of the next page."""

    def __init__(self, deadline: float = EXTRACTION_DEADLINE) -> None:
        self.worker: Worker | None = None
        self.deadline = deadline
        self.turn = asyncio.Lock()

    async def __call__(self, body: bytes, url: str, charset: str | None) -> Extracted:
        async with self.turn:
            if self.worker is None:
                self.worker = await asyncio.to_thread(started_worker)
            worker = self.worker
            loop = asyncio.get_running_loop()
            try:
                async with asyncio.timeout(self.deadline):
                    return await loop.run_in_executor(worker.pool, extract_here, body, url, charset)
            except TimeoutError:
                self.replace(worker)
                raise FetchFailed(
                    f"extracting {url} took over {self.deadline:g} s: stopped"
                ) from None
            except BrokenProcessPool as exc:
                self.replace(worker)
                raise FetchFailed(f"extracting {url} failed: the worker process died") from exc
            except asyncio.CancelledError:
                self.replace(worker)
                raise

    def replace(self, worker: Worker) -> None:
        """Stop the worker; the next page starts a new one."""
        worker.stop()
        self.worker = None

    def close(self) -> None:
        if self.worker is not None:
            self.worker.pool.shutdown(wait=False, cancel_futures=True)


def started_worker() -> Worker:
    """A pool whose worker is already running: starting one takes milliseconds of CPU (and
    the first submit starts it), which must not be the event loop's.

    The worker runs at lower priority, from its first instruction: a page's extraction can
    wait a few milliseconds, the streams cannot. Its start alone (imports, a third of a
    second) took the CPU from the event loop in slices of 10-20 ms on two busy cores. A
    process inherits the priority of the thread that starts it, so a thread of its own,
    lowered, starts it (a thread's priority cannot be raised back)."""
    with ThreadPoolExecutor(max_workers=1, initializer=yield_cpu) as starter:
        return starter.submit(spawned_worker).result()


def yield_cpu() -> None:
    thread = threading.get_native_id()
    niceness = max(os.getpriority(os.PRIO_PROCESS, thread), EXTRACTION_NICENESS)
    os.setpriority(os.PRIO_PROCESS, thread, niceness)


def spawned_worker() -> Worker:
    """A fork of the fork server: a fork of this process, which runs threads (storage,
    SQLite), is not safe, and a process of its own (spawn) imports the extraction again
    for each worker, a third of a second of CPU for each one replaced. The fork server
    starts with the first worker, from the lowered thread (its forks run lowered too),
    and imports this module and the extractor, once: named here, the extractor is
    imported by the fork server and its workers, not by the service."""
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload([__name__, EXTRACTOR])
    pool = ProcessPoolExecutor(
        max_workers=1, mp_context=context, initializer=exit_with, initargs=(os.getpid(),)
    )
    return Worker(pool, pool.submit(worker_pid).result())


def exit_with(service: int) -> None:
    """The worker's initializer: it ends the worker when the service that started it ends,
    however the service ends. A service killed (SIGKILL: the OOM killer, `kill -9`) tells
    the worker nothing, and it would wait for its next page forever (it holds its queue's
    writing end itself, so it never reads an end of file). With the worker, the fork server
    and multiprocessing's resource tracker end too: each runs until no process holds the
    pipe the service opened to it, and the worker is the last to hold it. The fork server
    cannot watch the service itself: none of our code runs in it but the preloaded
    module's import, and Linux's death signal (PR_SET_PDEATHSIG) would come with the end of
    the thread that started it, which ends once the worker is up (started_worker)."""
    watch = threading.Thread(target=exit_once_ended, args=(service,), daemon=True)
    watch.start()


def exit_once_ended(pid: int) -> None:
    """End this process once the process `pid` has ended: its pidfd becomes readable then,
    on Linux. Where there is no pidfd (another system, a sandbox refusing the call), the
    process is looked for every second."""
    try:
        pidfd = os.pidfd_open(pid)
    except (AttributeError, OSError):  # ProcessLookupError too: it has ended already
        while running(pid):
            time.sleep(1)
    else:
        select.select([pidfd], [], [])
    os._exit(0)


def running(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def worker_pid() -> int:
    """Run first in the worker: it returns once the worker is up, a fork of the fork
    server that imported the extraction (trafilatura, lxml), so that they are loaded with
    the worker's start and not in the first page's extraction, whose deadline they would
    eat into (at low priority on a busy machine, the imports alone took 17 s of a 20 s
    deadline)."""
    return os.getpid()
