"""What a turn produced, and its writing (docs/architecture.md, "The turn").

A `TurnOutcome` gathers, as plain data, what the turn streams: text, reasoning, the trail of
tool steps, sources, usage, warnings, the compressions it made. A `Saver` writes it:
checkpoints while it streams, then the whole outcome once, whichever way the turn ends (an
answer, an error, the user's Stop cancelling it).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, NotRequired, TypedDict

import anyio

from app.chat import context, numbering
from app.chat.compression import Folded
from app.chat.events import (
    BudgetReport,
    CompressionEvent,
    DoneEvent,
    ErrorEvent,
    Event,
    Source,
    Step,
    TurnUsage,
    WarningEvent,
)
from app.chat.gathered import Gathered
from app.chat.pending import PendingSaves
from app.model.failures import LLMError
from app.model.usage import RawUsage, Usage, normalize_usage
from app.store.errors import NotFound, Unavailable
from app.store.rows import Message, OutcomeWrite, Totals, now
from app.store.storage import Lease, Storage

logger = logging.getLogger(__name__)

CHECKPOINT_SECONDS = 0.5
CHECKPOINT_WAIT = 2.0
"""Seconds the outcome's write waits for a checkpoint still being written before it asks
whether the database answers at all."""


class Answer(Message):
    """An answer as the log keeps it (and a checkpoint of one, marked interrupted)."""

    model: str
    reasoning: str
    activity: list[Step]
    sources: list[Source]
    warnings: list[str]
    usage: TurnUsage
    error: ErrorEvent | None
    truncated: bool
    timing: dict[str, float]
    compressions: NotRequired[list[CompressionEvent]]
    """Kept with the answer: their notices and Undo stay."""
    research: NotRequired[dict[str, Any]]
    """A research run's report (app/api/research_turn.py): Regenerate researches again;
    `spent` is what the run spent (searches, searches_cached, pages, seconds); after Stop,
    `found` is what it had found, to write the report from."""


class Budget(TypedDict):
    """What the turn budgeted against, for the context bar."""

    limit: int
    window: int | None
    """The window the model server serves, when it says."""
    window_note: str | None
    projected: int


class Streamed:
    """Text that arrives in thousands of pieces: kept as a list, joined when read.
    `text += piece` copies the whole text each time, quadratic over a long answer (a
    reasoning model's 40,000 pieces took 0.3 s of the event loop)."""

    def __init__(self, text: str = "") -> None:
        self.parts = [text] if text else []

    def add(self, piece: str) -> None:
        if piece:
            self.parts.append(piece)

    def __bool__(self) -> bool:
        return bool(self.parts)

    def __str__(self) -> str:
        if len(self.parts) > 1:
            self.parts = ["".join(self.parts)]
        return self.parts[0] if self.parts else ""


@dataclass
class Clock:
    """How long the model thought and wrote, for the trail ("Thought 5 s") and tokens per
    second. Time spent running tools between rounds counts as neither."""

    thinking: float = 0.0
    writing: float = 0.0
    last: float | None = None

    def tick(self, *, thinking: bool) -> None:
        now_ = time.monotonic()
        if self.last is not None:
            if thinking:
                self.thinking += now_ - self.last
            else:
                self.writing += now_ - self.last
        self.last = now_

    def pause(self) -> None:
        self.last = None

    def as_dict(self) -> dict[str, float]:
        return {
            "thinking_seconds": round(self.thinking, 3),
            "writing_seconds": round(self.writing, 3),
        }


@dataclass
class TurnOutcome:
    """What a turn produced, gathered while it streams: plain data, written by a Saver.
    It changes only through its methods below, each given what a step of the turn
    returned (app/chat/turn.py calls them): it holds nothing of the steps' own state."""

    model: str
    position: int
    """Where the answer goes in the log: right after the user's message."""
    floor: int = 0
    """The measured prompt is at least the new message's estimate."""
    keep_message: bool = False
    """Regenerate and Edit: a failure before any output does not take the message back."""
    written: Streamed = field(default_factory=Streamed)
    thought: Streamed = field(default_factory=Streamed)
    activity: list[Step] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    usages: list[Usage] = field(default_factory=list)
    first_prompt_tokens: int | None = None
    compression_usage: Usage | None = None
    compressions: list[CompressionEvent] = field(default_factory=list)
    summary: str | None = None
    summarized: int | None = None
    status: str = "running"
    error: ErrorEvent | None = None
    truncated: bool = False
    rewind: bool = False
    breakdown: dict[str, int] = field(default_factory=dict)
    digest: str = ""
    """This turn's tool results in short, kept with the answer for follow-up questions."""
    budget: Budget | None = None
    clock: Clock = field(default_factory=Clock)
    gathered: Gathered = field(default_factory=Gathered)
    """What the tools gathered, as the last step handed it: the answer's sources, numbered
    anew once the answer is written."""
    numbered: bool = False
    research: dict[str, Any] | None = None
    """A research run's report, not the model's answer (the Answer's `research`)."""

    @property
    def text(self) -> str:
        return str(self.written)

    @property
    def sources(self) -> list[Source]:
        return list(self.gathered.sources)

    @property
    def reasoning(self) -> str:
        return str(self.thought)

    @property
    def produced(self) -> bool:
        return bool(self.written or self.thought or self.activity)

    def budgeted(self, report: Budget) -> None:
        """What the turn budgets against (step 1), for the context bar."""
        self.budget = report

    def assembled(self, breakdown: dict[str, int]) -> None:
        """What fills the context, as the last assembly of the request's messages left it."""
        self.breakdown = breakdown

    def folded(self, folded: Folded) -> Event:
        """A compression of this turn, kept with the answer (its notice and Undo stay), as
        the event that tells the user."""
        self.summarized = folded.summarized
        if folded.summary is not None:
            self.summary = folded.summary
        self.compression_usage = folded.usage or self.compression_usage
        if folded.notice is None:
            return self.warn(folded.warning or "")
        self.compressions.append(folded.notice)
        return folded.notice

    def wrote(self, text: str) -> None:
        self.clock.tick(thinking=False)
        self.written.add(text)

    def thinks(self, text: str) -> None:
        self.clock.tick(thinking=True)
        self.thought.add(text)

    def stepped(self, step: Step, gathered: Gathered) -> None:
        """A tool's step for the trail, and what the tools have gathered with it."""
        self.clock.pause()  # running tools is neither thinking nor writing
        self.activity.append(step)
        self.gathered = gathered
        self.digest = gathered.digest()

    def cut_short(self) -> None:
        """The model server stopped the answer at its length limit."""
        self.truncated = True

    def warn(self, message: str) -> WarningEvent:
        """A warning kept with the answer, as the event that tells the user now."""
        self.warnings.append(message)
        return {"type": "warning", "message": message}

    def discard(self, text_chars: int, reasoning_chars: int) -> None:
        """Forget the last characters streamed (a round discarded, for a retry)."""
        self.written = Streamed(self.text[: len(self.text) - text_chars])
        self.thought = Streamed(self.reasoning[: len(self.reasoning) - reasoning_chars])

    def add_usage(self, raw: RawUsage | None) -> None:
        usage = normalize_usage(raw, floor_prompt_tokens=self.floor)
        if usage:
            self.usages.append(usage)
            if self.first_prompt_tokens is None:
                self.first_prompt_tokens = usage.prompt_tokens

    def turn_usage(self) -> TurnUsage:
        costs = [u.cost for u in self.usages if u.cost is not None]
        return {
            "prompt_tokens": sum(u.prompt_tokens for u in self.usages),
            "completion_tokens": sum(u.completion_tokens for u in self.usages),
            "cached_tokens": sum(u.cached_tokens for u in self.usages),
            "cost": sum(costs) if costs else None,
            "requests": len(self.usages),
            "reported": bool(self.usages),
        }

    def ended(self, status: str) -> None:
        """The turn ended so: ``complete``, or ``interrupted`` (Stop)."""
        self.status = status

    def fail(self, error: LLMError, message: str) -> ErrorEvent:
        """The error event; before any output the user's message leaves the log and goes
        back to the input (a content filter always rewinds: the same text would fail),
        unless the turn keeps it (Regenerate, Edit)."""
        self.status = "error"
        self.rewind = error.kind == "content_filter" or not (self.produced or self.keep_message)
        self.error = {
            "type": "error",
            "kind": error.kind,
            "message": error.message,
            "recovery": error.kind.recovery,
            "retry_after": error.retry_after,
            "restore": message if self.rewind else None,
        }
        return self.error

    def settle(self) -> None:
        """Before the outcome is written: a turn still running was stopped; the answer is
        numbered as it cites its sources."""
        if self.status == "running":
            self.status = "interrupted"
        self.number_as_cited()

    def number_as_cited(self) -> None:
        """Once, at the end: the answer's text, its sources, its digest and the trail's
        pages use the numbers as the answer cites them (app/chat/numbering.py), so a follow-up
        question about "[2]" means the same source to the user and to the model."""
        if self.numbered:
            return
        self.numbered = True
        order = numbering.cited_order(self.text, len(self.gathered.sources))
        if order == sorted(order):
            return
        new = {old: position for position, old in enumerate(order, 1)}
        self.written = Streamed(numbering.renumbered(self.text, new))
        self.gathered = self.gathered.renumbered(order)
        if self.digest:
            self.digest = self.gathered.digest()
        for step in self.activity:
            if step["type"] == "fetch" and "source" in step:
                step["source"] = new[step["source"]]
            elif step["type"] == "search" and "read" in step:
                step["read"] = [new[number] for number in step["read"]]

    def answer(self) -> Answer:
        answer: Answer = {
            "role": "assistant",
            "content": self.text,
            "status": self.status,
            "model": self.model,
            "reasoning": self.reasoning,
            "activity": self.activity,
            "sources": self.sources,
            "warnings": self.warnings,
            "usage": self.turn_usage(),
            "error": self.error,
            "truncated": self.truncated,
            "timing": self.clock.as_dict(),
            "created": now(),
        }
        if self.digest:
            answer["digest"] = self.digest
        if self.compressions:
            answer["compressions"] = self.compressions
        if self.research is not None:
            answer["research"] = self.research
        return answer

    def write(self) -> OutcomeWrite:
        """The outcome as the conversation keeps it. No empty answer is ever stored."""
        answer = self.answer() if self.produced and not self.rewind else None
        usage = None
        if self.first_prompt_tokens is not None:
            after = self.position + (1 if answer else -1 if self.rewind else 0)
            usage = {
                "last_prompt_tokens": self.first_prompt_tokens + context.estimate_tokens(self.text),
                "measured_messages": after,
                "sources_tokens": self.breakdown.get("kept_sources", 0),
            }
        return {
            "position": self.position,
            "answer": answer,
            "rewind": self.rewind,
            "summary": self.summary,
            "summarized": self.summarized,
            "totals": self.totals_added(),
            # The store keeps the report as the JSON it is (it knows no chat type).
            "budget": dict(self.budget_report()) if self.breakdown else None,
            "usage": usage,
        }

    def totals_added(self) -> dict[str, int | float]:
        requests = self.usages + ([self.compression_usage] if self.compression_usage else [])
        costs = [u.cost for u in requests if u.cost is not None]
        return {
            "prompt_tokens": sum(u.prompt_tokens for u in requests),
            "completion_tokens": sum(u.completion_tokens for u in requests),
            "cached_tokens": sum(u.cached_tokens for u in requests),
            "cost": sum(costs, 0.0),
            "requests_with_cost": len(costs),
            "requests_unreported_cost": len(requests) - len(costs),
            # An attempt whose message went back to the box left nothing to count against.
            "turns_unreported": 0 if self.usages or self.rewind else 1,
            "searches": sum(1 for step in self.activity if step["type"] == "search"),
            "fetches": sum(1 for step in self.activity if step["type"] == "fetch"),
        }

    def budget_report(self) -> BudgetReport:
        """For the context bar: the limit, the served window, the measured prompt of this
        turn's first request (what the next turn builds on), the largest prompt of the turn
        (with this turn's tool results, which are not kept) and the estimated share of each
        part."""
        peak = max((u.prompt_tokens for u in self.usages), default=None)
        return {
            **(self.budget or {}),
            "used": self.first_prompt_tokens,
            "peak": peak,
            "parts": self.breakdown,
        }

    def done_event(self, totals: Totals) -> DoneEvent:
        done: DoneEvent = {
            "type": "done",
            "status": self.status,
            "text": self.text,
            "usage": self.turn_usage(),
            "sources": self.sources,
            "totals": totals,
            "budget": self.budget_report(),
            "truncated": self.truncated,
            "timing": self.clock.as_dict(),
            "at": datetime.now(UTC).isoformat(timespec="seconds"),
        }
        if self.research is not None:
            done["research"] = self.research
        return done


@dataclass
class Saver:
    """Writes a turn's outcome: what the user has seen while it streams (checkpoints), then
    the whole outcome once, whichever path gets there first, releasing the lease with it.
    A database that stops answering never holds up the stream: checkpoints are written
    beside it, and the outcome goes to `waiting` (app/chat/pending.py) to be written once
    the database answers again."""

    lease: Lease
    outcome: TurnOutcome
    waiting: PendingSaves | None = None
    asked: str = ""
    """The user's message the turn answers (a late write checks it is still the last)."""
    checkpoint_at: float = field(default_factory=time.monotonic)
    """Starts with the turn: the first piece of text goes to the user without a write."""
    saved: bool = False
    checkpointed: bool = False
    totals: Totals = field(default_factory=dict)
    """The conversation's totals once the outcome is written, for the done event."""
    writing: asyncio.Task[None] | None = None
    """The checkpoint being written, beside the stream."""
    lost: Unavailable | None = None
    """The database stopped answering during the turn: no more checkpoints."""
    keep_sent: Callable[[], Awaitable[None]] | None = None
    """Writes the events the turn has sent (Runs.keep_sent), before each checkpoint and
    before the outcome."""

    async def checkpoint(self, *, force: bool = False) -> None:
        """The answer so far, at most every CHECKPOINT_SECONDS while text arrives (and after
        each tool step), marked interrupted: that is what a crash leaves. The outcome's
        write replaces it. Written beside the stream (one at a time; a forced one waits
        for the last)."""
        now_ = time.monotonic()
        if self.saved or self.lost or not self.outcome.produced:
            return
        if not force and now_ - self.checkpoint_at < CHECKPOINT_SECONDS:
            return
        if not force and self.writing is not None and not self.writing.done():
            return  # the last one is still being written: the next one catches up
        self.checkpoint_at = now_
        answer = self.outcome.answer()
        # Its lists copied: the turn goes on adding to them while the storage thread
        # encodes this one.
        partial: Answer = {
            **answer,
            "status": "interrupted",
            "activity": list(answer["activity"]),
            "sources": list(answer["sources"]),
            "warnings": list(answer["warnings"]),
        }
        if "compressions" in answer:
            partial["compressions"] = list(answer["compressions"])
        await self.settled()
        self.writing = asyncio.create_task(self.put(partial))
        if force:
            await self.settled()

    async def sent_kept(self) -> None:
        """The events the turn has sent, written before what would outlive them: a
        checkpoint, or the outcome that releases the lease. A replica dying after either
        leaves the kept events saying no less than the stored answer to a client
        reattaching elsewhere."""
        if self.keep_sent is not None:
            await self.keep_sent()

    async def put(self, partial: Answer) -> None:
        try:
            await self.sent_kept()
            await self.storage.put_message(self.conversation_id, self.outcome.position, partial)
            self.checkpointed = True
        except Unavailable as exc:
            self.lost = exc
            logger.warning("turn %s goes on without checkpoints: %s", self.conversation_id, exc)
        except NotFound:
            self.gone()
        except Exception:
            logger.exception("checkpoint of turn %s failed", self.conversation_id)

    async def settled(self, within: float | None = None) -> None:
        """The checkpoint being written, finished (or still running after `within`)."""
        if self.writing is not None and not self.writing.done():
            # Not awaited when done: the outcome's write goes to the storage thread at once,
            # before a request that arrives meanwhile (a reload right after Stop).
            await asyncio.wait({self.writing}, timeout=within)
        if self.writing is not None and self.writing.done():
            self.writing = None

    async def retract(self) -> None:
        """Text the user saw was discarded: a checkpoint holding it is rewritten now, or
        removed when nothing is left, not at the outcome's write (a crash meanwhile would
        leave the discarded text as the answer)."""
        await self.settled()
        if self.saved or self.lost or not self.checkpointed:
            return
        if self.outcome.produced:
            await self.checkpoint(force=True)
            return
        try:
            await self.storage.drop_message(self.conversation_id, self.outcome.position)
            self.checkpointed = False
        except Exception:
            logger.exception("removing the checkpoint of turn %s failed", self.conversation_id)

    async def persist(self) -> bool:
        """Write the outcome once; whether it is written. A turn still running here was
        stopped. A failed write is tried once more, then logged: it must not replace the
        error that ended the turn. A database that does not answer gets the outcome to
        write later (`waiting`). Shielded: after a Stop the web server cancels the turn's
        task again at every await, and none may cut the outcome's writing short."""
        with anyio.CancelScope(shield=True):
            written = await self.write_outcome()
        return written

    async def write_outcome(self) -> bool:
        if self.saved:
            return True
        if self.lease.pending:
            return False
        self.outcome.settle()
        await self.settled(within=CHECKPOINT_WAIT)
        if (self.lost or self.writing) and not (await self.storage.ping()).answers:
            # No wait for a connection that will not come.
            where = self.storage.database.path
            self.lost = self.lost or Unavailable(f"the database ({where}) does not answer")
            return self.hand_over()
        try:
            await self.sent_kept()
        except Exception:  # the outcome is written all the same
            logger.exception("keeping the events of turn %s failed", self.conversation_id)
        for attempt in (1, 2):
            try:
                self.totals = await self.storage.save_outcome(
                    self.conversation_id,
                    self.outcome.write(),
                    self.lease.owner,
                )
            except Unavailable as exc:
                self.lost = exc
                break
            except NotFound:
                self.gone()
                return True
            except Exception:
                logger.exception("writing turn %s failed (try %d)", self.conversation_id, attempt)
                continue
            self.saved, self.lost = True, None
            self.lease.dropped()
            return True
        return self.hand_over()

    def gone(self) -> None:
        """The conversation was removed while its turn ran (its person removed from the
        household, which stops the turn at its next tick): nothing is left to write."""
        if not self.saved:
            logger.info("turn %s: its conversation was removed; nothing kept", self.conversation_id)
        self.saved = True
        self.lease.dropped()

    def hand_over(self) -> bool:
        """A database that does not answer: the outcome waits for it (False: not written)."""
        if self.lost is not None and self.waiting is not None:
            self.waiting.keep(self.lease, self.outcome.write(), self.asked, after=self.writing)
        return False

    @property
    def storage(self) -> Storage:
        return self.lease.storage

    @property
    def conversation_id(self) -> str:
        return self.lease.conversation_id
