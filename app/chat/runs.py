"""Turns detached from the page's connection (docs/architecture.md, "Detached turns").

A turn runs as a task of the service, holding its conversation's lease; its events are
numbered and kept: in memory for the readers on this replica (one fan-out per turn, however
many read it), in the database for those on another (app/store/turn_events.py). A client
that leaves stops nothing; Stop is a request of its own (`Runs.stop`), which reaches the
turn's replica through the database when the turn runs on another, as a research plan's
Start does (`Storage.start_plan`, read by the turn's replica every tick).

An event's id is the one before it plus one, or, for a piece of text (of the answer or of
its reasoning), plus the piece's length. A run of text is kept coalesced, one row however
many pieces it came in, and an id inside it is a place in its text: a reattaching client
gets the text it missed in one piece, then the events as they come.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncGenerator
from contextlib import aclosing
from dataclasses import dataclass, field
from typing import NamedTuple, Protocol, cast

from app import jsoncodec
from app.chat.events import Event, StoppedEvent, TextEvent
from app.store.errors import NotFound, Unavailable
from app.store.nul import json_text, without_nul
from app.store.storage import Lease, Storage
from app.store.turn_events import NOTHING_ASKED, Asked, KeptEvents, KeptRow

logger = logging.getLogger(__name__)

TICK_SECONDS = 0.25
"""How often a running turn writes its new events to the database and asks whether a Stop
(or its plan's Start) came through it; how often a reader on another replica asks for
the new events."""
GONE_SECONDS = 2.0
"""A turn that has neither ended nor held its lease for this long died with its replica."""
PIECES = 256
"""A run of text in memory joins its pieces when it has more (readers slice it by id)."""
STOPPED: StoppedEvent = {"type": "stopped"}
TEXT_TYPES = ("delta", "reasoning")


class Numbered(NamedTuple):
    """An event as a client is sent it, with its id."""

    id: int
    event: Event


@dataclass
class TextRun:
    """Consecutive pieces of the answer's text (or of its reasoning): ids (first, last]."""

    type: str
    first: int
    pieces: list[str]
    last: int
    stored: int
    """Up to which id the database holds it (in chunks while it grows)."""
    chunks: int = 0
    closed: bool = False
    kept: bool = False
    """The database holds it whole, in one row."""

    def add(self, text: str) -> None:
        self.pieces.append(text)
        self.last += len(text)
        if len(self.pieces) > PIECES:
            self.pieces = ["".join(self.pieces)]

    def text_after(self, after: int) -> str:
        """Its text after id `after`: from the last pieces, as readers mostly need."""
        taken: list[str] = []
        end = self.last
        for piece in reversed(self.pieces):
            if end <= after:
                break
            start = end - len(piece)
            taken.append(piece[max(0, after - start) :])
            end = start
        return "".join(reversed(taken))

    def event_after(self, after: int) -> Event:
        return cast(TextEvent, {"type": self.type, "text": self.text_after(after)})

    def unkept(self) -> list[KeptRow]:
        """What the database lacks: the new text as a chunk while the run grows; once it
        closed, the whole run in place of its chunks."""
        if self.closed:
            self.kept = True
            if self.chunks == 1 and self.stored == self.last:
                return []
            return [self.row(self.first)]
        if self.last == self.stored:
            return []
        chunk = self.row(self.stored)
        self.stored, self.chunks = self.last, self.chunks + 1
        return [chunk]

    def row(self, after: int) -> KeptRow:
        return KeptRow(after, self.last, json_text(self.event_after(after)))


@dataclass
class Single:
    """One event other than text: id `last`."""

    last: int
    event: Event
    kept: bool = False

    def event_after(self, after: int) -> Event:
        return self.event

    def unkept(self) -> list[KeptRow]:
        self.kept = True
        return [KeptRow(self.last - 1, self.last, json_text(self.event))]


@dataclass
class Feed:
    """A turn's events in memory, for its readers on this replica and for the database."""

    rows: list[TextRun | Single] = field(default_factory=list)
    last: int = 0
    ended: bool = False
    woken: asyncio.Event = field(default_factory=asyncio.Event)
    """Set when something came, then replaced: every reader waits on the same one."""
    stored: int = 0
    """The rows before this index the database holds whole."""
    ended_stopped: bool = False
    """A mirror's turn ended stopped, its replica perhaps dead before it kept all it had
    sent: a reader ahead of what was kept gets that end too."""

    def add(self, event: Event) -> None:
        tail = self.rows[-1] if self.rows else None
        if event["type"] in TEXT_TYPES:
            text = without_nul(cast(TextEvent, event)["text"])  # as the database keeps it
            if not text:
                return
            if isinstance(tail, TextRun) and not tail.closed and tail.type == event["type"]:
                tail.add(text)
            else:
                self.close_text()
                last = self.last + len(text)
                self.rows.append(TextRun(event["type"], self.last, [text], last, self.last))
        else:
            self.close_text()
            self.rows.append(Single(self.last + 1, event))
        self.last = self.rows[-1].last
        self.wake()

    def close_text(self) -> None:
        if self.rows and isinstance(self.rows[-1], TextRun):
            self.rows[-1].closed = True

    def end(self) -> None:
        self.close_text()
        self.ended = True
        self.wake()

    def wake(self) -> None:
        self.woken.set()
        self.woken = asyncio.Event()

    def since(self, after: int) -> list[Numbered]:
        found = []
        for row in reversed(self.rows):
            if row.last <= after:
                break
            found.append(Numbered(row.last, row.event_after(after)))
        return found[::-1]

    async def follow(self, after: int) -> AsyncGenerator[Numbered, None]:
        """The events after id `after`, then each as it comes, until the turn's end."""
        stopped = False
        while True:
            woken = self.woken
            for numbered in self.since(after):
                yield numbered
                after, stopped = numbered.id, numbered.event["type"] == "stopped"
            if self.ended and after >= self.last:
                if self.ended_stopped and not stopped:
                    # Ahead of what a dead replica kept: the turn's end all the same.
                    yield Numbered(after + 1, STOPPED)
                return
            await woken.wait()

    def unkept(self) -> list[KeptRow]:
        """The rows the database lacks, as they are now."""
        rows = [row for kept in self.rows[self.stored :] for row in kept.unkept()]
        while self.stored < len(self.rows) and self.rows[self.stored].kept:
            self.stored += 1
        return rows


class Control(Protocol):
    """A turn that ends itself when told to stop, keeping what it found (a research),
    rather than being cancelled; what else it is told goes through it too."""

    def stop(self) -> None: ...

    def start(self, questions: list[str]) -> bool:
        """Its plan starts with these sub-questions; whether it was waiting for them."""
        ...


class Run:
    """One turn running as a task of the service; its lease released when it ends."""

    def __init__(
        self,
        storage: Storage,
        lease: Lease,
        events: AsyncGenerator[Event, None],
        control: Control | None = None,
    ) -> None:
        self.storage = storage
        self.lease = lease
        self.control = control
        self.feed = Feed()
        self.unwritten: list[KeptRow] = []
        """Rows a write could not keep (the database did not answer): tried again."""
        self.writing = asyncio.Lock()
        """One write at a time: the tick's, the end's and those before checkpoints."""
        self.started = self.stopping = False
        self.task = asyncio.create_task(self.drive(events))
        self.keeper = asyncio.create_task(self.keep())

    @property
    def conversation_id(self) -> str:
        return self.lease.conversation_id

    def stop(self) -> None:
        """Close the model server's stream now: the turn keeps what came, interrupted. A
        turn with a control is told, and ends itself."""
        self.stopping = True
        if self.control is not None:
            self.control.stop()
        elif self.started:
            self.task.cancel()

    async def drive(self, events: AsyncGenerator[Event, None]) -> None:
        self.started = True
        stopped = self.stopping
        try:
            if not stopped:
                async with aclosing(events) as turn:
                    async for event in turn:
                        self.feed.add(event)
                        # Its readers send it before the turn goes on to checkpoint it: what
                        # a crash leaves is never more than a reader was sent.
                        await asyncio.sleep(0)
        except asyncio.CancelledError:
            stopped = True
        except Exception:
            logger.exception("turn %s failed outside its own handling", self.conversation_id)
        finally:
            await self.ended(stopped)

    async def ended(self, stopped: bool) -> None:
        """The lease released (the outcome's write did unless it failed), the end kept."""
        if stopped:
            self.feed.add(STOPPED)
        await self.lease.release()
        self.keeper.cancel()
        self.feed.end()
        await self.write(ended=True)

    async def keep(self) -> None:
        """Every tick: the new events to the database, and whether a Stop or a plan's
        Start came there."""
        while True:
            await asyncio.sleep(TICK_SECONDS)
            asked = await self.write(ended=False)
            if asked.plan is not None and self.control and self.control.start(asked.plan):
                logger.info("turn %s: its plan started through the database", self.conversation_id)
            if asked.stop:
                logger.info("turn %s: stop asked through the database", self.conversation_id)
                self.stop()
                return

    async def write(self, *, ended: bool) -> Asked:
        """The events the database lacks written; what was asked there."""
        async with self.writing:
            return await self.write_unkept(ended=ended)

    async def write_unkept(self, *, ended: bool) -> Asked:
        rows = self.unwritten + self.feed.unkept()
        cid, owner = self.conversation_id, self.lease.owner
        try:
            if rows or ended:
                asked = await self.storage.keep_events(cid, owner, rows, ended=ended)
            else:
                asked = await self.storage.asked(cid, owner)
        except Unavailable as exc:
            logger.warning("turn %s: its events wait for the database (%s)", cid, exc)
            self.unwritten = rows
            return NOTHING_ASKED
        self.unwritten = []
        return asked


class Runs:
    """The turns running on this replica, by conversation, and every reader's way in."""

    def __init__(self, storage: Storage) -> None:
        self.storage = storage
        self.running: dict[str, Run] = {}
        self.mirrors: dict[str, Feed] = {}
        """Other replicas' turns that readers here follow."""
        self.watchers: set[asyncio.Task[None]] = set()

    def start(
        self, lease: Lease, events: AsyncGenerator[Event, None], control: Control | None = None
    ) -> Run:
        run = Run(self.storage, lease, events, control)
        conversation_id = lease.conversation_id
        self.running[conversation_id] = run

        def gone(_: asyncio.Task[None]) -> None:
            if self.running.get(conversation_id) is run:
                del self.running[conversation_id]

        run.task.add_done_callback(gone)
        return run

    async def keep_sent(self, conversation_id: str) -> None:
        """The events the conversation's turn has sent, written now if it runs here: a
        checkpoint of its answer goes after them (app/chat/outcome.py, Saver). What a crash
        leaves is the last checkpoint, and a reader on another replica is sent the written
        events: were the checkpoint ahead of them (a tick comes every TICK_SECONDS), that
        reader would miss text the stored answer holds."""
        run = self.running.get(conversation_id)
        if run is not None:
            await run.write(ended=False)

    async def stop(self, conversation_id: str) -> bool:
        """Stop the conversation's turn, here or through the database on the replica that
        runs it; whether one was running. Here, answered once its outcome is written."""
        run = self.running.get(conversation_id)
        if run is None:
            return await self.storage.ask_stop(conversation_id)
        run.stop()
        await asyncio.wait({run.task})
        return True

    async def events(self, conversation_id: str, after: int) -> AsyncGenerator[Numbered, None]:
        """A turn's events after id `after`, then the rest as they come: from this
        replica's memory, or from the database through one mirror per turn however many
        read it here. NotFound before any event."""
        run = self.running.get(conversation_id)
        if run is not None:
            return run.feed.follow(after)
        kept = await self.storage.turn_events(conversation_id, after)
        if kept.owner is None or kept.ended:
            return ended_turn(kept, after)
        return self.mirror(conversation_id).follow(after)

    def mirror(self, conversation_id: str) -> Feed:
        """The in-memory copy of another replica's turn that this replica's readers share,
        filled every tick from the database: its events numbered anew come out with the
        same ids (they depend on the events alone)."""
        feed = self.mirrors.get(conversation_id)
        if feed is None:
            feed = self.mirrors[conversation_id] = Feed()
            watcher = asyncio.create_task(self.watch(conversation_id, feed))
            self.watchers.add(watcher)
            watcher.add_done_callback(self.watchers.discard)
        return feed

    async def watch(self, conversation_id: str, feed: Feed) -> None:
        try:
            async with aclosing(self.poll(conversation_id)) as kept:
                async for event in kept:
                    feed.add(event.event)
                    feed.ended_stopped = event.event["type"] == "stopped"
        except (NotFound, Unavailable) as exc:  # deleted, or the database went away
            logger.info("stopped following turn %s: %s", conversation_id, exc)
        finally:
            feed.end()
            if self.mirrors.get(conversation_id) is feed:
                del self.mirrors[conversation_id]

    async def poll(self, conversation_id: str) -> AsyncGenerator[Numbered, None]:
        """A turn of another replica from its first event, asked every tick until its end;
        a stop event when its replica died under it."""
        kept = await self.storage.turn_events(conversation_id, 0)
        owner, after, gone_since = kept.owner, 0, None
        while True:
            for row in kept.rows:
                yield numbered(row, after)
                after = row.last
            if kept.ended or kept.owner != owner:
                return
            if kept.holds:
                gone_since = None
            elif gone_since is None:
                gone_since = time.monotonic()
            elif time.monotonic() - gone_since > GONE_SECONDS:
                yield Numbered(after + 1, STOPPED)
                return
            await asyncio.sleep(TICK_SECONDS)
            kept = await self.storage.turn_events(conversation_id, after)

    async def close(self) -> None:
        """At the service's end: every running turn stopped, its outcome written."""
        runs = list(self.running.values())
        for run in runs:
            run.stop()
        for watcher in self.watchers:
            watcher.cancel()
        await asyncio.gather(*(run.task for run in runs), *self.watchers, return_exceptions=True)


async def ended_turn(kept: KeptEvents, after: int) -> AsyncGenerator[Numbered, None]:
    """A turn that ended (or none ever ran): what is kept of it, at once."""
    for row in kept.rows:
        yield numbered(row, after)
        after = row.last


def numbered(row: KeptRow, after: int) -> Numbered:
    """A kept row as a client is sent it: a run of text from id `after` when that falls
    inside it."""
    event = jsoncodec.loads(row.event)
    if event["type"] in TEXT_TYPES and row.first < after:
        event["text"] = event["text"][after - row.first :]
    return Numbered(row.last, event)
