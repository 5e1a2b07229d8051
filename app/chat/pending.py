"""Outcomes waiting for the database: a turn whose outcome could not be written because the
database stopped answering (PostgreSQL's server or the network to it gone) hands it here;
it is written in the background once the database answers again, for at most
PENDING_SECONDS, each try after a longer wait (docs/architecture.md, "A lost database").

It is written only where the turn left the conversation (Database.hold_for_outcome): the
lease may have expired meanwhile, and a later turn, a rewind or an edit must not be undone
or doubled. A conversation that moved on, was deleted, or a database still silent after
PENDING_SECONDS: the answer is dropped, with a log line that says so.
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass, field

from app.store.errors import NotFound, Unavailable
from app.store.rows import OutcomeWrite
from app.store.storage import Lease

logger = logging.getLogger(__name__)

PENDING_SECONDS = 600.0
"""How long an outcome waits for the database before it is given up."""
FIRST_WAIT = 0.5
LONGEST_WAIT = 5.0
"""Seconds between two tries, doubling from FIRST_WAIT: once the database is back the
answer lands within seconds, before the user is likely to send the next message."""


@dataclass
class PendingSave:
    """One turn's outcome, as the Saver would have written it."""

    lease: Lease
    write: OutcomeWrite
    asked: str
    """The question the turn answered: the conversation must still end with it."""
    since: float = field(default_factory=time.monotonic)
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    finished: bool = False
    task: asyncio.Task[None] | None = None
    after: asyncio.Task[None] | None = None
    """The turn's last checkpoint, when it was still being written: it goes first."""

    @property
    def conversation_id(self) -> str:
        return self.lease.conversation_id

    @property
    def chars(self) -> int:
        answer = self.write["answer"]
        return len(answer["content"]) if answer else 0


class PendingSaves:
    """The outcomes this process keeps for the database, by conversation."""

    def __init__(self, *, give_up_after: float = PENDING_SECONDS) -> None:
        self.give_up_after = give_up_after
        self.saves: dict[str, PendingSave] = {}

    def keep(
        self,
        lease: Lease,
        write: OutcomeWrite,
        asked: str,
        *,
        after: asyncio.Task[None] | None = None,
    ) -> None:
        """Write `write` once the database answers, after the checkpoint `after`; the
        lease goes with it."""
        lease.pending = True
        save = PendingSave(lease, write, asked, after=after)
        self.saves[lease.conversation_id] = save
        save.task = asyncio.create_task(self.retry(save))
        logger.warning(
            "turn %s: its outcome (%d chars) waits for the database",
            save.conversation_id,
            save.chars,
        )

    async def settle(self, conversation_id: str) -> None:
        """Before a new turn of the conversation: its waiting outcome written first, if the
        database answers now (else the new turn is refused like any other request)."""
        if (save := self.saves.get(conversation_id)) is not None:
            await self.attempt(save)

    async def retry(self, save: PendingSave) -> None:
        if save.after is not None:
            await asyncio.wait({save.after})
        wait = FIRST_WAIT
        while not save.finished:
            await asyncio.sleep(wait)
            if await self.attempt(save):
                return
            if time.monotonic() - save.since >= self.give_up_after:
                self.finish(save)
                logger.warning(
                    "turn %s: gave up saving its answer (%d chars): the database did not answer "
                    "for %.0f s",
                    save.conversation_id,
                    save.chars,
                    self.give_up_after,
                )
                return
            wait = min(wait * 2, LONGEST_WAIT)

    async def attempt(self, save: PendingSave) -> bool:
        """One try; whether the save is over (written, or dropped with its reason)."""
        async with save.lock:
            if save.finished:
                return True
            if save.after is not None and not save.after.done():
                return False
            storage, conversation_id = save.lease.storage, save.conversation_id
            try:
                position = save.write["position"]
                if not await storage.hold_for_outcome(
                    conversation_id, save.lease.owner, position, save.asked
                ):
                    self.dropped(save, "the conversation moved on meanwhile")
                    return True
                await storage.save_outcome(conversation_id, save.write, save.lease.owner)
            except Unavailable:
                return False
            except NotFound:
                self.dropped(save, "the conversation was deleted meanwhile")
                return True
            except Exception:
                logger.exception("turn %s: writing its waiting outcome failed", conversation_id)
                self.finish(save)
                return True
            self.finish(save)
            logger.info(
                "turn %s: its answer (%d chars) is saved, %.1f s late",
                conversation_id,
                save.chars,
                time.monotonic() - save.since,
            )
            return True

    def dropped(self, save: PendingSave, why: str) -> None:
        self.finish(save)
        logger.warning(
            "turn %s: its answer (%d chars) is not saved: %s", save.conversation_id, save.chars, why
        )

    def finish(self, save: PendingSave) -> None:
        save.finished = True
        save.lease.dropped()
        if self.saves.get(save.conversation_id) is save:
            del self.saves[save.conversation_id]

    async def close(self) -> None:
        """At shutdown: what still waits is given up, each with its log line."""
        tasks = [save.task for save in self.saves.values() if save.task is not None]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        for save in list(self.saves.values()):
            self.finish(save)
            logger.warning(
                "turn %s: its answer (%d chars) is not saved: the service stopped before the "
                "database answered again",
                save.conversation_id,
                save.chars,
            )
