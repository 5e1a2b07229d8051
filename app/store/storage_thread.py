"""The storage thread: one thread that runs the database's queries one at a time, in the
order they were asked, each result handed back to the event loop that asked for it.

Lighter than `loop.run_in_executor` on a one-thread ThreadPoolExecutor, which wraps each
query in a concurrent Future (its lock, its condition) chained to an asyncio Future by
callbacks on both sides: here a query is a queue put one way and a `call_soon_threadsafe`
the other. A turn makes two of these trips; each costs about 20 µs of CPU less
(docs/performance.md, "Where a short turn's time goes").
"""

from __future__ import annotations

import asyncio
import queue
import threading
from collections.abc import Callable
from typing import Any, TypeVar

T = TypeVar("T")

Job = tuple[asyncio.AbstractEventLoop, "asyncio.Future[Any]", Callable[[], Any]]


class StorageThread:
    """Started with its first query; `shutdown` runs what was asked before it, then ends
    (a query asked after it is refused, as an executor refuses one)."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.jobs: queue.SimpleQueue[Job | None] = queue.SimpleQueue()
        self.thread: threading.Thread | None = None
        self.starting = threading.Lock()
        self.closed = False

    def submit(self, query: Callable[[], T]) -> asyncio.Future[T]:
        """`query`'s result, to await on the running loop, once the queries asked before
        it have run."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[T] = loop.create_future()
        if self.thread is None:
            self.start()  # RuntimeError once shut down
        self.jobs.put((loop, future, query))
        return future

    def start(self) -> None:
        with self.starting:
            if self.closed:
                raise RuntimeError(f"{self.name}: a query asked after the thread was shut down")
            if self.thread is None:
                # A daemon: a process that never closes its storage is not kept alive by it.
                self.thread = threading.Thread(target=self.work, name=self.name, daemon=True)
                self.thread.start()

    def work(self) -> None:
        while (job := self.jobs.get()) is not None:
            loop, future, query = job
            del job  # nothing of a query is held while the thread waits for the next
            try:
                result, error = query(), None
            except BaseException as exc:  # handed to the caller, as an executor does
                result, error = None, exc
            try:
                loop.call_soon_threadsafe(settle, future, result, error)
            except RuntimeError:
                pass  # the loop that asked is closed: nobody waits for this result
            del loop, future, query, result, error

    def shutdown(self) -> None:
        """After the queries already asked for."""
        with self.starting:
            thread, self.thread, self.closed = self.thread, None, True
        if thread is not None:
            self.jobs.put(None)
            thread.join()


def settle(future: asyncio.Future[Any], result: Any, error: BaseException | None) -> None:
    """On the loop's thread: the query's outcome to whoever awaits it (nobody, if cancelled)."""
    if future.cancelled():
        return
    if error is not None:
        future.set_exception(error)
    else:
        future.set_result(result)
