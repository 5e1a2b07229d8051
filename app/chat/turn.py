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
from typing import Any

from app.chat import context
from app.chat.compression import compress, foldable, memory_trouble, read_memory, unsummarised
from app.chat.events import ErrorEvent, Event, SearchWaitEvent, WarningEvent
from app.chat.outcome import Saver, TurnOutcome
from app.chat.services import Services
from app.chat.settings import ChatSettings
from app.chat.tools import MAX_QUERY_CHARS, SHOWN_WAIT_SECONDS, ToolRunner, call_key, clipped
from app.model.failures import Failure, LLMError
from app.model.tool_calls import ToolCall
from app.store.errors import Unavailable
from app.store.rows import Conversation, Message, ToolRefusal
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
        budget, projected = await project(turn)

        # 2. Compress when over budget: old turns into the summary, facts into memory.
        trouble = memory_trouble(start.memory_damaged)
        if projected > budget and foldable(turn.conversation, settings.keep_recent_messages):
            async for event in turn.fold():
                yield event
            turn.memory, trouble = await read_memory(services)  # it may have added facts

        # 3. Assemble [persona][memory][summary][date][tool note][history].
        if trouble:
            yield outcome.warn(trouble)
        if start.refusal and runner.declarations():
            # Not declared at all: the server would refuse them again, and the retry costs
            # a round trip (and the tool note a share of the context) every turn.
            runner.withdraw()
            yield outcome.warn(withheld_notice(start.refusal))
        turn.assemble()

        # 4. Stream, running the tool loop until the model answers.
        for round_number in range(settings.max_tool_rounds + 1):
            if round_number == settings.max_tool_rounds:
                runner.searches_left = runner.fetches_left = 0  # last round: answer now
            payload = turn.payload()
            calls: list[ToolCall] = []
            try:
                async for event in stream_round(turn, payload, calls):
                    yield event
            except LLMError as error:
                async for event in recover(turn, error, payload):  # or raise it again
                    yield event
                continue
            if not calls:
                break
            async for event in run_tools(turn, calls):
                yield event

        # 5. Record the measured usage; it is step 1's input next turn.
        outcome.status = "complete"
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
        outcome.status = "interrupted"  # Stop, and only Stop: keep what came, marked
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
    reserve: int = 0
    """The reply's share of the budget: each request's max_tokens."""
    messages: list[dict[str, Any]] = field(default_factory=list)
    """The request's messages: the assembled context, then this turn's tool exchanges."""
    assembled: int = 0
    """How many of `messages` are the assembled context."""

    @classmethod
    def begin(cls, services: Services, lease: Lease, start: TurnInput, model: str) -> Turn:
        conversation = start.conversation
        chosen = ChatSettings.of(conversation["settings"], services.settings)
        pending = conversation["messages"][-1]["content"]
        outcome = TurnOutcome(
            model, position=len(conversation["messages"]), floor=context.estimate_tokens(pending)
        )
        outcome.keep_message = start.keeps_message
        runner = ToolRunner(
            searcher=services.searcher,
            settings=services.settings,
            locale=chosen.search_locale,
            engines=chosen.search_engines or None,
            searches_left=chosen.searches,
            fetches_left=chosen.fetches,
            # Its user messages and kept sources give addresses web_fetch may read.
            history=conversation["messages"],
            extract=services.extraction,
        )
        outcome.sources, outcome.runner = runner.sources, runner
        saver = Saver(lease, outcome, waiting=services.pending, asked=pending)
        return cls(services, conversation, chosen, saver, runner, model, pending, start.memory)

    @property
    def outcome(self) -> TurnOutcome:
        return self.saver.outcome

    def fold(self) -> AsyncIterator[Event]:
        """Compression (app/chat/compression.py) of this conversation, with its prompt."""
        return compress(self.services, self.conversation, self.chosen.compress_prompt, self.outcome)

    def assemble(self, *, keep_exchanges: bool = False) -> None:
        """The request's context anew from the conversation; with `keep_exchanges`, this
        turn's tool exchanges still follow it."""
        fresh = assemble(self.conversation, self.chosen, self.runner, self.outcome, self.memory)
        exchanges = self.messages[self.assembled :] if keep_exchanges else []
        self.messages, self.assembled = fresh + exchanges, len(fresh)

    def payload(self) -> dict[str, Any]:
        payload: dict[str, Any] = {
            "model": self.model,
            "messages": self.messages,
            "max_tokens": self.reserve,
            **self.services.settings.model_params.get(self.model, {}),
        }
        if declarations := self.runner.declarations():
            payload["tools"] = declarations
        return payload


async def project(turn: Turn) -> tuple[int, int]:
    """The budget and the next request's projected size, with the kept sources that fit
    (the outcome holds them, and the budget for the context bar); the reply's share set."""
    services, model = turn.services, turn.model
    window = await services.served_window(model)
    budget = context.effective_budget(turn.chosen.context_budget, window)
    turn.reserve = context.completion_reserve(services.settings.max_completion_tokens, budget)
    base = measured_base(turn.conversation)
    projected = context.projected_tokens(base, turn.pending, turn.reserve)
    turn.outcome.kept, projected = fit_sources(
        kept_sources(turn.conversation, services.settings.keep_sources_turns), projected, budget
    )
    turn.outcome.budget = {
        "limit": budget,
        "window": window,
        "window_note": services.window_note(model),
        "projected": projected,
    }
    return budget, projected


async def stream_round(
    turn: Turn, payload: dict[str, Any], calls: list[ToolCall]
) -> AsyncIterator[Event]:
    """One request, its text and reasoning streamed to the user; the tool calls it asks for
    are put in `calls`."""
    outcome, saver = turn.outcome, turn.saver
    outcome.start_round()
    async for said in turn.services.model.stream(payload):
        # Checkpoints follow the yield: resumed, the piece has been sent, so what a crash
        # leaves is never more than the user was sent.
        if said.type == "delta":
            outcome.clock.tick(thinking=False)
            outcome.written.add(said.text)
            yield {"type": "delta", "text": said.text}
            await saver.checkpoint()
        elif said.type == "reasoning":
            outcome.clock.tick(thinking=True)
            outcome.thought.add(said.text)
            yield {"type": "reasoning", "text": said.text}
            await saver.checkpoint()
        elif said.type == "usage":
            outcome.add_usage(said.usage)
        elif said.type == "tool_calls":
            calls[:] = said.tool_calls
        elif said.type == "finish" and said.text == "content_filter":
            raise LLMError(Failure.CONTENT_FILTER, "the model server filtered the answer")
        elif said.type == "finish" and said.text == "length":
            outcome.truncated = True


async def recover(turn: Turn, error: LLMError, payload: dict[str, Any]) -> AsyncIterator[Event]:
    """After a failed round, what lets the next one succeed; or the error again."""
    outcome = turn.outcome
    if error.kind == Failure.TOOLS_UNSUPPORTED and "tools" in payload:
        # The round runs again without tools (once: the retry declares none) and without
        # the note that offers them; its tool exchanges stay.
        turn.runner.withdraw()
        turn.assemble(keep_exchanges=True)
        for event in await without_tools(turn, error):
            yield event
    elif error.kind == Failure.CONTEXT_OVERFLOW and not outcome.produced and not outcome.forced:
        outcome.forced = True  # compress once and retry; a second overflow fails
        outcome.kept = {}  # the estimate was short: earlier sources go first
        async for event in turn.fold():
            yield event
        turn.memory = (await read_memory(turn.services))[0]  # said once already if damaged
        turn.assemble()
    else:
        raise error


async def run_tools(turn: Turn, calls: list[ToolCall]) -> AsyncIterator[Event]:
    """A round's tool calls: each result goes to the model, each step to the trail."""
    outcome, runner = turn.outcome, turn.runner
    turn.messages.append(assistant_tool_message(outcome.round_text(), calls))
    outcome.clock.pause()
    for call in calls:
        if waiting := await search_wait(runner, call):
            yield waiting  # said while it waits; its step follows
        result = await runner.run(call)
        outcome.activity.append(result.event)
        outcome.digest = runner.digest()
        yield result.event
        if result.warning:
            yield outcome.warn(result.warning)
        turn.messages.append({"role": "tool", "tool_call_id": call.id, "content": result.text})
        await turn.saver.checkpoint(force=True)


async def search_wait(runner: ToolRunner, call: ToolCall) -> SearchWaitEvent | None:
    """What the trail says while the call's search waits for the plan's rate, when it
    will wait noticeably; None for any other call, or one answered again from earlier."""
    if call.name != "web_search" or runner.searches_left <= 0 or call_key(call) in runner.done:
        return None
    try:
        query = json.loads(call.arguments or "{}").get("query")
    except (ValueError, AttributeError):
        return None
    seconds = await runner.searcher.expected_wait()
    if not isinstance(query, str) or not query.strip() or seconds < SHOWN_WAIT_SECONDS:
        return None
    return {"type": "search_wait", "query": clipped(query, MAX_QUERY_CHARS), "seconds": seconds}


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


async def without_tools(turn: Turn, error: LLMError) -> list[Event]:
    """What the user is told when the tools are dropped: a server that refuses their
    declarations is remembered (every later turn would be refused too); llama.cpp, which
    streams the text and then fails when it does not parse as a tool call, has its text
    discarded: it is garbage, and the page is told to clear it."""
    outcome, saver = turn.outcome, turn.saver
    events: list[Event] = []
    warning: WarningEvent = {
        "type": "warning",
        "message": "this model rejected the web tools; answering without them",
    }
    if error.tools_refused:
        storage = turn.services.storage
        warning["tools_refused"] = await storage.refuse_tools(turn.model, error.message)
        warning["message"] = (
            "this model rejected the web tools; answering without them, now and in later "
            "turns (the model picker can clear that)"
        )
    if outcome.discard_round():
        await saver.retract()
        events.append({"type": "retry", "text": outcome.text, "reasoning": outcome.reasoning})
        warning["message"] = (
            "this model could not call the web tools (its output did not parse); "
            "answering again without them"
        )
    outcome.warnings.append(warning["message"])
    return [*events, warning]


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


def model_history(conversation: Conversation, kept: dict[int, str]) -> list[dict[str, str]]:
    """What the model sees of the log: user and assistant text, the kept sources after
    their answers (by position), never an empty turn, roles alternating from a question
    (chat templates such as Gemma's and Mistral's refuse anything else)."""
    start = conversation.get("summarized", 0)
    return context.alternating(
        [
            {"role": m["role"], "content": m["content"] + kept.get(position, "")}
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


def assemble(
    conversation: Conversation,
    chosen: ChatSettings,
    runner: ToolRunner,
    outcome: TurnOutcome,
    memory: str,
) -> list[dict[str, Any]]:
    """The request's messages, and the breakdown of what fills the context."""
    # A compression may have folded answers whose sources were to go with them.
    start = conversation.get("summarized", 0)
    kept = {p: text for p, text in outcome.kept.items() if p >= start}
    history = model_history(conversation, kept)
    layers = context.Layers(
        persona=chosen.system_prompt,
        memory=memory,
        summary=conversation.get("summary", ""),
        today=context.today_line(date.today()),
        tool_note=runner.note(chosen.tool_note) if runner.declarations() else "",
    )
    declarations = json.dumps(runner.declarations()) if runner.declarations() else ""
    outcome.breakdown = context.breakdown(
        layers,
        history,
        context.estimate_tokens(declarations),
        sum(context.estimate_tokens(text) for text in kept.values()),
    )
    return context.assemble(layers, history)


def withheld_notice(refusal: ToolRefusal) -> str:
    return (
        f"web tools not offered: this model refused them on {refusal['at'][:10]} "
        f"({refusal['reason']}); answering without them. Clear that in the model picker to "
        "try them again."
    )


def assistant_tool_message(text: str, calls: list[ToolCall]) -> dict[str, Any]:
    return {
        "role": "assistant",
        "content": text or None,
        "tool_calls": [
            {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}}
            for c in calls
        ],
    }
