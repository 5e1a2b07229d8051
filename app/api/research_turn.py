"""The page's research (docs/research.md, "The page"): a conversation turn whose answer is
a research run's report, run on the detached turns as a chat turn is (app/chat/runs.py),
so a reload reattaches to it and Stop reaches it from any replica.

Its events, beside the chat's: `research_plan` (the plan, then again once it runs),
`research` (the step and the counters against the budget, at every step). The progress
lines and the notes are the answer's reasoning, checkpointed as a chat answer's text is: a
run the service's end cut short is kept interrupted with its notes. The report is the
answer, its sources the answer's sources, numbered as the report cites them."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncGenerator
from contextlib import aclosing
from dataclasses import dataclass, field

from app.api.research_answer import sources_of
from app.chat.events import Event
from app.chat.gathered import Gathered
from app.chat.services import Services
from app.chat.turn import Turn, record
from app.model.failures import Failure, LLMError
from app.research.budget import Bound, Budget, Spent, most_cost, most_queries
from app.research.events import Event as ResearchEvent
from app.research.events import (
    Finished,
    Found,
    Noted,
    Planned,
    Reported,
    ResearchResult,
    StepStarted,
    progress_line,
)
from app.research.plan import ResearchPlan
from app.research.run import Halted, Research
from app.research.start import prepared
from app.store.storage import Lease, Storage, TurnInput

logger = logging.getLogger(__name__)

PLAN_SECONDS = 10.0
"""The pause before a plan nobody edits starts by itself (the page's setting overrides it)."""


@dataclass
class PlanGate:
    """A research turn's control: the plan waits for the user's Start (with the plan as
    edited), or for the pause to end (`seconds`; 0: for Start only, at most `longest`
    seconds, then the run ends with nothing searched); Stop ends the run, keeping what it
    found. A Start comes through the database from any replica (`Storage.start_plan`): the
    turn's replica reads it every tick (app/chat/runs.py) and gives it here."""

    seconds: float
    longest: int
    storage: Storage
    lease: Lease
    halt: asyncio.Event = field(default_factory=asyncio.Event)
    given: asyncio.Queue[list[str]] = field(default_factory=lambda: asyncio.Queue(1))
    waiting: bool = False

    def stop(self) -> None:
        self.halt.set()

    def start(self, questions: list[str]) -> bool:
        """Whether the plan was waiting for this (it runs as given)."""
        if not self.waiting or self.given.full():
            return False
        self.given.put_nowait(questions)
        return True

    async def opened(self) -> None:
        """The plan waits from now, before the page is shown it: a Start may come."""
        self.waiting = True
        await self.storage.plan_waits(self.lease.conversation_id, self.lease.owner)

    async def approve(self, plan: ResearchPlan) -> ResearchPlan:
        """The plan as the Start gave it, or as it is once the pause ended; Halted when it
        waited for a Start that never came."""
        try:
            questions = await self.started()
        finally:
            self.waiting = False
            # A Start that reached the database before the wait ended is the one kept.
            late = await self.storage.plan_waited(self.lease.conversation_id, self.lease.owner)
        chosen = questions if questions is not None else late
        if chosen is not None:
            return plan.edited(chosen)
        if self.seconds:
            return plan
        said = f"The plan waited {waited(self.longest)} for Start; nothing was searched."
        raise Halted(Bound.UNSTARTED, said)

    async def started(self) -> list[str] | None:
        """The sub-questions a Start gave, None when the wait ended first."""
        try:
            async with asyncio.timeout(self.seconds or self.longest):
                return await self.given.get()
        except TimeoutError:
            return None


def waited(seconds: int) -> str:
    """A wait in words: "30 minutes", "1 minute", "45 s"."""
    if seconds % 60:
        return f"{seconds} s"
    minutes = seconds // 60
    return f"{minutes} minute{'' if minutes == 1 else 's'}"


async def research_turn(
    services: Services,
    lease: Lease,
    start: TurnInput,
    model: str,
    gate: PlanGate,
    budget: Budget,
    found: Found | None = None,
) -> AsyncGenerator[Event, None]:
    """Research the conversation's last user message as its answer; or, given what a
    stopped run `found`, write the report from that. Every ending is recorded as a chat
    turn's is (app/chat/turn.py)."""
    turn = Turn.begin(services, lease, start, model)
    outcome = turn.outcome
    outcome.numbered = True  # the report numbers its sources itself, its list included
    outcome.research = {}
    try:
        async with aclosing(research_steps(services, turn, gate, budget, found)) as steps:
            async for each in steps:
                yield each
        async for each in record(turn.saver):
            yield each
    except LLMError as error:
        logger.info("research turn %s failed: %s", lease.conversation_id, error.message)
        outcome.fail(error, turn.pending)
        async for each in record(turn.saver):
            yield each
    except (asyncio.CancelledError, GeneratorExit):
        outcome.ended("interrupted")
        logger.info("research turn %s interrupted", lease.conversation_id)
        raise
    except Exception as exc:  # a bug of ours, or no model to research with: said, kept
        logger.exception("research turn %s failed unexpectedly", lease.conversation_id)
        outcome.fail(LLMError(Failure.INTERNAL, f"the research failed: {exc}"), turn.pending)
        async for each in record(turn.saver):
            yield each
    finally:
        await turn.saver.persist()


async def research_steps(
    services: Services, turn: Turn, gate: PlanGate, budget: Budget, found: Found | None
) -> AsyncGenerator[Event, None]:
    """The run's events as the page is sent them, each step checkpointed with the answer."""
    plan = await asyncio.to_thread(services.plan.read)
    per_search = await services.searcher.queries_per_search()
    spend = Spendable(
        queries_left=plan.monthly_remaining if plan is not None else None,
        queries=most_queries(budget, per_search),
        cost=most_cost(budget, services.settings.brave_price_per_1000, per_search),
        per_search=per_search,
    )
    research = await prepared(
        turn.pending,
        budget,
        settings=services.settings,
        searcher=services.searcher,
        client=services.model,
        locale=turn.chosen.search_locale,
        stop=gate.halt,
        model=turn.model,
        extract=services.extraction,
        approve=gate.approve,
    )
    if found is not None:
        research.resumed(found)
    steps = research.events() if found is None else research.written()
    reported = False  # a report was written: complete, whatever cut the gathering short
    async with aclosing(steps) as events:
        async for event in events:
            reported = reported or isinstance(event, Reported)
            if isinstance(event, Planned) and not event.approved:
                await gate.opened()
            told = told_of(event, research, gate, spend)
            if isinstance(event, Finished):
                told += ended(turn, research, event.result, reported, spend.per_search)
            for each in told:
                if each["type"] == "reasoning":
                    turn.outcome.thinks(each["text"])
                yield each
            await turn.saver.checkpoint(force=True)  # a step is rare, and what it found dear


@dataclass(frozen=True)
class Spendable:
    """What the plan card says the budget may spend: the Brave plan's queries left this
    month (None: not stated, or no monthly cap), the Brave queries the budget's searches
    may send, and those in money (None: no price set)."""

    queries_left: int | None
    queries: int
    cost: float | None
    per_search: int
    """The Brave queries one search sends (two with both of our engines)."""


def told_of(
    event: ResearchEvent, research: Research, gate: PlanGate, spend: Spendable
) -> list[Event]:
    """What the page is sent of one event of the run."""
    match event:
        case Planned(plan, approved):
            starts_in = None if approved or not gate.seconds else gate.seconds
            told: list[Event] = [
                {
                    "type": "research_plan",
                    "questions": plan.questions(),
                    "started": approved,
                    "starts_in": starts_in,
                    "queries_left": spend.queries_left,
                    "max_queries": spend.queries,
                    "max_cost": spend.cost,
                }
            ]
            if approved:
                told.append(reasoning("Plan:\n" + "\n".join(f"- {q}" for q in plan.questions())))
            return told + [progress(research, "search" if approved else "plan", "")]
        case StepStarted(step, about):
            return [progress(research, step, about), *line_of(event)]
        case Noted(note):
            return [reasoning(f"Note {note.line()}")]
        case Finished():
            return [progress(research, "done", "")]
    return [*line_of(event), progress(research, "", "")]


def line_of(event: ResearchEvent) -> list[Event]:
    line = progress_line(event)
    return [reasoning(line)] if line else []


def reasoning(line: str) -> Event:
    return {"type": "reasoning", "text": line + "\n"}


def progress(research: Research, step: str, about: str) -> Event:
    """The counters against the budget, and the step under way ("" : the same as before)."""
    spent, budget = research.spent, research.budget
    return {
        "type": "research",
        "step": step,
        "about": about,
        "searches": spent.searches,
        "max_searches": budget.searches,
        "pages": spent.pages,
        "max_pages": budget.pages,
        "seconds": spent.seconds,
        "max_seconds": budget.minutes * 60,
    }


def figures(spent: Spent, per_search: int) -> dict[str, float]:
    """What the run spent, as the answer's figures say it: its searches (the Brave queries
    of those the cache did not answer), the pages it read, its time; not tokens a second,
    which mean nothing for a run of many steps."""
    return {
        "searches": spent.searches,
        "searches_cached": spent.searches_cached,
        "queries": (spent.searches - spent.searches_cached) * per_search,
        "pages": spent.pages,
        "seconds": spent.seconds,
    }


def ended(
    turn: Turn, research: Research, result: ResearchResult, reported: bool, per_search: int
) -> list[Event]:
    """The report (or what was found, or what was tried) as the answer, with its sources;
    after Stop, what was found kept to write the report from."""
    outcome = turn.outcome
    logger.info("research turn %s: %s", turn.saver.conversation_id, result.status)
    spent = result.spent
    outcome.add_usage(
        {"prompt_tokens": spent.prompt_tokens, "completion_tokens": spent.completion_tokens}
    )
    if result.status == "failed":
        raise LLMError(Failure.UPSTREAM, f"the research failed: {result.error}")
    outcome.research = {"spent": figures(spent, per_search)}
    stopped = not reported and result.stopped_by in (Bound.USER, Bound.UNSTARTED)
    if stopped and result.notes:
        outcome.research["found"] = research.found_so_far().model_dump(mode="json")
    text = result.report if result.status != "nothing_found" else result.tried_text()
    outcome.wrote(text)
    outcome.gathered = Gathered(sources=tuple(sources_of(result)))
    outcome.ended("interrupted" if stopped else "complete")
    return [{"type": "delta", "text": text}]
