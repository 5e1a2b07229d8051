"""One chat turn, top to bottom: project, compress, assemble, stream with tools, record
(docs/architecture.md, "The turn").

`run_turn` is the whole pipeline; it yields the SSE events the page shows. What the turn
produces is gathered in a `TurnOutcome`, which a `Saver` writes (app/chat/outcome.py);
folding old turns into the summary is app/chat/compression.py.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import AsyncGenerator, AsyncIterator
from dataclasses import dataclass, field
from datetime import date
from functools import partial

from app.chat import context, engine, fitting
from app.chat.compression import compress, foldable, memory_trouble, read_memory, unsummarised
from app.chat.events import ErrorEvent, Event
from app.chat.fitting import Fitted
from app.chat.openai_wire import ChatMessage, FunctionTool, PassedOn
from app.chat.outcome import Budget, Saver, TurnOutcome
from app.chat.services import Services
from app.chat.settings import ChatSettings
from app.chat.tool import Waiting
from app.chat.tools import ToolRunner, caps
from app.model.failures import Failure, LLMError
from app.store.errors import Unavailable
from app.store.rows import Conversation, Message
from app.store.storage import Lease, TurnInput

logger = logging.getLogger(__name__)

UNSAVED = "this answer could not be saved (the service log says why); copy it if you need it"


async def run_turn(
    services: Services, lease: Lease, start: TurnInput, model: str
) -> AsyncGenerator[Event, None]:
    """Answer the conversation's last user message, yielding SSE events. The caller holds
    the conversation's lease (Storage.begin_turn), which the outcome's write releases; it
    closes this generator (aclosing) before releasing the lease itself, however the turn
    ended."""
    turn = Turn.begin(services, lease, start, model)
    outcome, runner, settings = turn.outcome, turn.runner, services.settings
    try:
        # 1. Project the next request's size from the last measured prompt.
        projection = await project(turn)
        turn.projected(projection)
        budget, projected = projection.budget, projection.projected

        # 2. Compress when over budget: old turns into the summary, facts into memory.
        trouble = memory_trouble(start.memory_damaged)
        if projected > budget and foldable(turn.conversation, settings.keep_recent_messages):
            for event in await turn.fold():
                yield event
            # The compression may have added facts.
            turn.memory, trouble = await read_memory(services, turn.person)

        # 3-4. Assemble, then stream with the tool loop: the engine's rounds.
        if trouble:
            yield outcome.warn(trouble)
        answering = engine.Engine(services, turn, runner, model)
        async for said in answering.answer(start.refusal):
            async for event in turn.told(said):
                yield event

        # 5. Record the measured usage; it is step 1's input next turn.
        outcome.ended("complete")
        async for event in record(turn.saver):
            yield event
    except LLMError as error:
        logger.info("turn %s failed (%s): %s", lease.conversation_id, error.kind, error.message)
        outcome.fail(error, turn.pending)
        async for event in record(turn.saver):
            yield event
    except Unavailable as exc:  # the database stopped answering: what came waits for it
        turn.saver.lost = exc
        async for event in record(turn.saver):
            yield event
    except (asyncio.CancelledError, GeneratorExit):
        outcome.ended("interrupted")  # Stop, and only Stop: keep what came, marked
        logger.info("turn %s interrupted after %d chars", lease.conversation_id, len(outcome.text))
        raise
    except Exception as exc:  # a bug of ours or a shape nobody expected: say so, keep text
        logger.exception("turn %s failed unexpectedly", lease.conversation_id)
        internal = LLMError(Failure.INTERNAL, f"the chat service failed: {exc!r}")
        outcome.fail(internal, turn.pending)
        async for event in record(turn.saver):
            yield event
    finally:
        await turn.saver.persist()


@dataclass
class Turn:
    """What the steps of one turn share."""

    services: Services
    conversation: Conversation
    chosen: ChatSettings
    """The conversation's settings, its stored ones over the defaults."""
    saver: Saver
    runner: ToolRunner
    model: str
    pending: str
    """The user's message being answered."""
    memory: str
    person: int | None
    """Whose memory.md the turn reads and its compressions write (the conversation's
    owner's; None in the single-user modes)."""
    reserve: int = 0
    """The reply's share of the budget: each request's max_tokens."""
    kept: dict[int, str] = field(default_factory=dict)
    """Earlier answers' sources sent with them this turn, by position."""
    window: int | None = None
    """The window the model server serves, when it says: the tool results fit in it."""

    @classmethod
    def begin(cls, services: Services, lease: Lease, start: TurnInput, model: str) -> Turn:
        conversation = start.conversation
        chosen = ChatSettings.of(conversation["settings"], services.settings)
        pending = conversation["messages"][-1]["content"]
        outcome = TurnOutcome(
            model,
            position=len(conversation["messages"]),
            floor=context.estimate_tokens(pending),
            keep_message=start.keeps_message,
        )
        runner = ToolRunner(
            searcher=services.searcher,
            settings=services.settings,
            locale=chosen.search_locale,
            engines=chosen.search_engines or None,
            left=caps(chosen),
            # Its user messages and kept sources give addresses web_fetch may read.
            history=conversation["messages"],
            extract=services.extraction,
            person=start.person,
        )
        # The events the turn sent are written before each checkpoint of its answer.
        keep_sent = partial(services.runs.keep_sent, lease.conversation_id)
        saver = Saver(lease, outcome, waiting=services.pending, asked=pending, keep_sent=keep_sent)
        memory, person = start.memory, start.person
        return cls(services, conversation, chosen, saver, runner, model, pending, memory, person)

    @property
    def outcome(self) -> TurnOutcome:
        return self.saver.outcome

    async def fold(self) -> list[Event]:
        """Compression (app/chat/compression.py) of this conversation, with its prompt: the
        turn goes on with the conversation as it left it, and keeps what it did."""
        prompt = self.chosen.compress_prompt
        folded = await compress(self.services, self.conversation, prompt, self.model, self.person)
        if folded is None:
            return []
        self.conversation = folded.applied(self.conversation)
        return [self.outcome.folded(folded)]

    def projected(self, projection: Projection) -> None:
        """Step 1's result: the reply's share, the kept sources, the context bar's budget."""
        self.reserve, self.kept = projection.reserve, projection.kept
        self.window = projection.report["window"]
        self.outcome.budgeted(projection.report)

    def context(self, runner: ToolRunner) -> list[ChatMessage]:
        """[persona][memory][summary][date][tool note][history], from the conversation."""
        assembled = assemble(self.conversation, self.chosen, runner, self.kept, self.memory)
        self.outcome.assembled(assembled.breakdown)
        return assembled.messages

    def fields(self) -> PassedOn:
        return {
            "model": self.model,
            "max_tokens": self.reserve,
            **self.services.settings.model_params.get(self.model, {}),
        }

    def fitted(self, text: str, messages: list[ChatMessage], tools: list[FunctionTool]) -> Fitted:
        """Within the served window: the conversation's budget and compression keep the
        room for the history, but this answer's results could still overflow a small one."""
        return fitting.fitted(text, self.window, messages, tools, self.reserve)

    async def make_room(self) -> list[Event]:
        """Compress once after an overflow: the estimate was short, so the earlier answers'
        sources go first."""
        self.kept = {}
        told = await self.fold()
        # Said once already if damaged.
        self.memory = (await read_memory(self.services, self.person))[0]
        return told

    async def told(self, said: engine.EngineEvent | Event) -> AsyncIterator[Event]:
        """What the user is sent of one event of the engine, kept in the outcome.
        Checkpoints follow the yield: resumed, the piece has been sent, so what a crash
        leaves is never more than the user was sent."""
        outcome, saver = self.outcome, self.saver
        match said:
            case engine.Text(text):
                outcome.wrote(text)
                yield {"type": "delta", "text": text}
                await saver.checkpoint()
            case engine.Reasoning(text):
                outcome.thinks(text)
                yield {"type": "reasoning", "text": text}
                await saver.checkpoint()
            case engine.Measured(usage):
                outcome.add_usage(usage)
            case engine.Finished("content_filter"):
                raise LLMError(Failure.CONTENT_FILTER, "the model server filtered the answer")
            case engine.Finished(_):
                outcome.cut_short()
            case Waiting(query, seconds):
                yield {"type": "search_wait", "query": query, "seconds": seconds}
            case engine.Stepped(result, gathered):
                outcome.stepped(result.event, gathered)
                yield result.event
                if result.warning:
                    yield outcome.warn(result.warning)
                await saver.checkpoint(force=True)
            case engine.Warned(message, refused):
                warning = outcome.warn(message)
                if refused:
                    warning["tools_refused"] = refused
                yield warning
            case engine.Discarded(text_chars, reasoning_chars):
                outcome.discard(text_chars, reasoning_chars)
                await saver.retract()
                yield {"type": "retry", "text": outcome.text, "reasoning": outcome.reasoning}
            case engine.ClientCalls():
                pass  # never: the page declares no tools of a client
            case _:
                yield said  # the turn's own: a compression and its warnings


@dataclass(frozen=True)
class Projection:
    """Step 1's result: the budget, the next request's projected size with the kept
    sources that fit, the reply's share of the budget, and the context bar's report."""

    budget: int
    projected: int
    reserve: int
    """Each request's max_tokens."""
    kept: dict[int, str]
    """The earlier answers' sources that go with them, by position."""
    report: Budget


async def project(turn: Turn) -> Projection:
    """The budget and the next request's projected size, with the kept sources that fit."""
    services, model = turn.services, turn.model
    window = await services.served.window(model)
    budget = context.effective_budget(turn.chosen.context_budget, window)
    reserve = context.completion_reserve(services.settings.max_completion_tokens, budget)
    base = measured_base(turn.conversation)
    projected = context.projected_tokens(base, turn.pending, reserve)
    kept, projected = fit_sources(
        kept_sources(turn.conversation, services.settings.keep_sources_turns), projected, budget
    )
    report: Budget = {
        "limit": budget,
        "window": window,
        "window_note": services.served.window_note(model),
        "projected": projected,
    }
    return Projection(budget, projected, reserve, kept, report)


async def record(saver: Saver) -> AsyncIterator[Event]:
    """Write the outcome, then end the stream: with the error that ended the turn, or with
    done; told first when the outcome could not be written. A database that stopped
    answering ends it with its own error, the outcome kept to be written when it is back
    (app/chat/pending.py)."""
    saved = await saver.persist()
    outcome = saver.outcome
    if not saved and saver.lease.pending:
        lost = database_lost(saver)
        logger.warning("turn %s: %s (%s)", saver.conversation_id, lost["message"], saver.lost)
        if outcome.error:  # the turn failed too: that stays its ending
            yield {"type": "warning", "message": lost["message"]}
            yield outcome.error
        else:
            yield lost
        return
    if not saved:
        yield {"type": "warning", "message": UNSAVED}
    if outcome.error:
        yield outcome.error
        return
    logger.info("turn %s complete: %d chars", saver.conversation_id, len(outcome.text))
    yield outcome.done_event(saver.totals)


def database_lost(saver: Saver) -> ErrorEvent:
    where = saver.storage.database.path
    return {
        "type": "error",
        "kind": "database",
        "message": f"the database ({where}) stopped answering; your answer is kept and will "
        "be saved when it is back",
        "recovery": "wait",
        "retry_after": None,
        "restore": None,
    }


def measured_base(conversation: Conversation) -> int:
    """The history before the new message, without kept sources: the last measured prompt
    less the sources it carried, plus an estimate of what came after it (an answer the
    server never measured, e.g. one cut by Stop), or an estimate of it all when nothing was
    measured yet. Which sources go this time is decided anew (`fit_sources`)."""
    usage = conversation.get("usage", {})
    history = conversation["messages"][:-1]
    if not usage.get("last_prompt_tokens"):
        return context.message_tokens(unsummarised(conversation)[:-1])
    since = history[usage.get("measured_messages", len(history)) :]
    measured = max(0, usage["last_prompt_tokens"] - usage.get("sources_tokens", 0))
    return measured + context.message_tokens(since)


def model_history(conversation: Conversation, kept: dict[int, str]) -> list[ChatMessage]:
    """What the model sees of the log: user and assistant text, the kept sources after
    their answers (by position), never an empty turn, roles alternating from a question
    (chat templates such as Gemma's and Mistral's refuse anything else)."""
    start = conversation.get("summarized", 0)
    return context.alternating(
        [
            {
                "role": "user" if m["role"] == "user" else "assistant",
                "content": m["content"] + kept.get(position, ""),
            }
            for position, m in enumerate(conversation["messages"][start:], start)
            if in_history(m)
        ]
    )


def in_history(message: Message) -> bool:
    return message["role"] in ("user", "assistant") and bool((message.get("content") or "").strip())


def kept_sources(conversation: Conversation, turns: int) -> dict[int, str]:
    """The digests of the last `turns` answers in the history, as they follow their answers'
    text, by position, oldest first."""
    start = conversation.get("summarized", 0)
    messages = conversation["messages"]
    answers = [
        position
        for position, m in enumerate(messages[start:], start)
        if m["role"] == "assistant" and in_history(m)
    ]
    chosen = answers[-turns:] if turns > 0 else []
    return {p: context.sources_text(messages[p]) for p in chosen if messages[p].get("digest")}


def fit_sources(kept: dict[int, str], projected: int, budget: int) -> tuple[dict[int, str], int]:
    """The kept sources that fit and the projection with them: over budget, the oldest go
    first, before any message is compressed (a digest is cheaper to lose than the
    conversation's own words, and a follow-up most likely asks about the last answer)."""
    fitting = dict(kept)
    projected += sum(context.estimate_tokens(text) for text in fitting.values())
    for position in kept:
        if projected <= budget:
            break
        projected -= context.estimate_tokens(fitting.pop(position))
    return fitting, projected


@dataclass(frozen=True)
class Assembled:
    """The request's messages, and the breakdown of what fills the context (estimated
    tokens per part, for the context bar)."""

    messages: list[ChatMessage]
    breakdown: dict[str, int]


def assemble(
    conversation: Conversation,
    chosen: ChatSettings,
    runner: ToolRunner,
    kept: dict[int, str],
    memory: str,
) -> Assembled:
    """The request's messages, and the breakdown of what fills the context."""
    # A compression may have folded answers whose sources were to go with them.
    start = conversation.get("summarized", 0)
    kept = {p: text for p, text in kept.items() if p >= start}
    history = model_history(conversation, kept)
    layers = context.Layers(
        persona=chosen.system_prompt,
        memory=memory,
        summary=conversation.get("summary", ""),
        today=context.today_line(date.today()),
        tool_note=runner.note(chosen.tool_note) if runner.declarations() else "",
    )
    declarations = json.dumps(runner.declarations()) if runner.declarations() else ""
    breakdown = context.breakdown(
        layers,
        history,
        context.estimate_tokens(declarations),
        sum(context.estimate_tokens(text) for text in kept.values()),
    )
    return Assembled(context.assemble(layers, history), breakdown)
