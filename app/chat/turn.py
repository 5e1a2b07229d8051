"""One chat turn, top to bottom: project, compress, assemble, stream with tools, record.

`run_turn` is the whole pipeline; it yields the SSE events the page shows. What the turn
produces is gathered in an `Outcome` (plain data); a `Saver` writes it: checkpoints while it
streams, then the whole outcome once, whichever way the turn ends (an answer, an error, the
user's Stop cancelling it).
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from datetime import UTC, date, datetime
from typing import Any

from app import config
from app.chat import context, numbering
from app.chat.context import DEFAULT_COMPRESS_PROMPT
from app.chat.events import CompressionEvent, DoneEvent, ErrorEvent, Event, WarningEvent
from app.chat.tools import DEFAULT_TOOL_NOTE, ToolRunner
from app.model.client import LLMError, ModelClient, ToolCall, Usage, normalize_usage
from app.pages.worker import ExtractionProcess
from app.search.client import Searxng
from app.store.database import (
    Conversation,
    Damaged,
    Lease,
    Message,
    OutcomeWrite,
    Storage,
    ToolRefusal,
    TurnInput,
    now,
)

logger = logging.getLogger(__name__)

WINDOW_RETRY_SECONDS = 300.0
MODELS_CACHE_SECONDS = 60.0
CHECKPOINT_SECONDS = 0.5
UNSAVED = "this answer could not be saved (the service log says why); copy it if you need it"


@dataclass
class Services:
    """What a turn needs from the outside, built once by the server."""

    settings: config.Settings
    storage: Storage
    model: ModelClient
    searxng: Searxng
    windows: dict[str, tuple[int | None, float]] = field(default_factory=dict)
    listed: tuple[list[str], float] = ([], -MODELS_CACHE_SECONDS)
    memory_lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    """Held by every write of memory.md: the Settings editor's and compression's."""
    extraction: ExtractionProcess = field(default_factory=ExtractionProcess)

    async def offers(self, model: str) -> bool:
        """Whether the picker offers this model: configured, listed by the server (asked at
        most once a minute), or added by the user. A turn may use only these, so per-model
        state stays bounded and an invented id never reaches the server."""
        listed, read_at = self.listed
        if time.monotonic() - read_at >= MODELS_CACHE_SECONDS:
            listed = await self.model.models() or []
            self.listed = (listed, time.monotonic())
        if model in self.settings.models or model in listed:
            return True  # without a query: this is on the way to every turn's first token
        return model in await self.storage.run(self.storage.database.models)

    async def served_window(self, model: str) -> int | None:
        """Read once per model. A server that did not say (a hosted API, or one that was
        down) is asked again after a while, not on every turn: each read costs a round trip.
        Ollama's default window is only assumed until the model is loaded, when Ollama says
        the one it really got (OLLAMA_CONTEXT_LENGTH may raise it): read again every turn
        until then."""
        window, read_at = self.windows.get(model, (None, -WINDOW_RETRY_SECONDS))
        unknown = window is None and time.monotonic() - read_at >= WINDOW_RETRY_SECONDS
        ollama = self.model.ollama_windows.get(model)
        if unknown or (ollama is not None and ollama.assumed):
            window = await self.model.served_window(model)
            self.windows[model] = (window, time.monotonic())
        return window

    def window_note(self, model: str) -> str | None:
        """For the context bar: Ollama runs the model in its small default window, which
        cuts a longer prompt from its start without an error, and nothing here can raise it."""
        ollama = self.model.ollama_windows.get(model)
        if ollama is None or not ollama.runs_default:
            return None
        # Not "not loaded": the turn's request loads it, and the note is stored with the turn.
        window = f"{ollama.served} tokens" if ollama.loaded else f"assumed {ollama.served} tokens"
        return (
            f"Ollama runs this model with its default window ({window}) and silently cuts a "
            "longer prompt from its start; raise it with OLLAMA_CONTEXT_LENGTH on the Ollama "
            "server or PARAMETER num_ctx in a Modelfile"
        )


def conversation_defaults(settings: config.Settings) -> dict[str, Any]:
    """A new conversation's settings; they also fill in what an older conversation lacks."""
    return {
        "model": settings.default_model,
        "system_prompt": config.presets().get("default", "You are a helpful assistant."),
        "context_budget": settings.context_budget_tokens,
        "web_search": True,
        "web_fetch": True,
        "search_max_uses": settings.web_search_max_uses,
        "fetch_max_uses": settings.web_fetch_max_uses,
        "tool_note": DEFAULT_TOOL_NOTE,
        "compress_prompt": DEFAULT_COMPRESS_PROMPT,
        "search_locale": settings.search_locale,
        "search_engines": "",
    }


async def run_turn(
    services: Services, lease: Lease, start: TurnInput, model: str
) -> AsyncIterator[Event]:
    """Answer the conversation's last user message, yielding SSE events. The caller holds
    the conversation's lease (Storage.begin_turn), which the outcome's write releases; it
    closes this generator (aclosing) before releasing the lease itself, however the turn
    ended."""
    conversation_id, conversation = lease.conversation_id, start.conversation
    chosen = {**conversation_defaults(services.settings), **conversation["settings"]}
    conversation["settings"] = chosen
    pending = conversation["messages"][-1]["content"]
    outcome = Outcome(
        model, position=len(conversation["messages"]), floor=context.estimate_tokens(pending)
    )
    outcome.keep_message = start.keeps_message
    saver = Saver(lease, outcome)
    runner = ToolRunner(
        searxng=services.searxng,
        settings=services.settings,
        locale=chosen["search_locale"],
        engines=chosen["search_engines"] or None,
        searches_left=chosen["search_max_uses"] if chosen["web_search"] else 0,
        fetches_left=chosen["fetch_max_uses"] if chosen["web_fetch"] else 0,
        # Its user messages and kept sources give addresses web_fetch may read.
        history=conversation["messages"],
        extract=services.extraction,
    )
    outcome.sources, outcome.runner = runner.sources, runner
    try:
        # 1. Project the next request's size from the last measured prompt.
        window = await services.served_window(model)
        budget = context.effective_budget(chosen["context_budget"], window)
        reserve = context.completion_reserve(services.settings.max_completion_tokens, budget)
        projected = context.projected_tokens(measured_base(conversation), pending, reserve)
        outcome.kept, projected = fit_sources(
            kept_sources(conversation, services.settings.keep_sources_turns), projected, budget
        )
        outcome.budget = {
            "limit": budget,
            "window": window,
            "window_note": services.window_note(model),
            "projected": projected,
        }

        # 2. Compress when over budget: old turns into the summary, facts into memory.
        memory, trouble = start.memory, memory_trouble(start.memory_damaged)
        if projected > budget and foldable(conversation, services.settings.keep_recent_messages):
            async for event in compress(services, conversation, outcome):
                yield event
            memory, trouble = await read_memory(services)  # it may have added facts

        # 3. Assemble [persona][memory][summary][date][tool note][history].
        if trouble:
            outcome.warnings.append(trouble)
            yield {"type": "warning", "message": trouble}
        if start.refusal and runner.declarations():
            # Not declared at all: the server would refuse them again, and the retry costs
            # a round trip (and the tool note a share of the context) every turn.
            runner.withdraw()
            notice = withheld_notice(start.refusal)
            outcome.warnings.append(notice)
            yield {"type": "warning", "message": notice}
        messages = assemble(conversation, runner, outcome, memory)
        assembled = len(messages)

        # 4. Stream, running the tool loop until the model answers.
        for round_number in range(services.settings.max_tool_rounds + 1):
            if round_number == services.settings.max_tool_rounds:
                runner.searches_left = runner.fetches_left = 0  # last round: answer now
            payload = {
                "model": model,
                "messages": messages,
                "max_tokens": reserve,
                **services.settings.model_params.get(model, {}),
            }
            if runner.declarations():
                payload["tools"] = runner.declarations()
            calls: list[ToolCall] = []
            outcome.start_round()
            try:
                async for event in services.model.stream(payload):
                    # Checkpoints follow the yield: resumed, the piece has been sent, so
                    # what a crash leaves is never more than the user was sent.
                    if event.type == "delta":
                        outcome.clock.tick(thinking=False)
                        outcome.written.add(event.text)
                        yield {"type": "delta", "text": event.text}
                        await saver.checkpoint()
                    elif event.type == "reasoning":
                        outcome.clock.tick(thinking=True)
                        outcome.thought.add(event.text)
                        yield {"type": "reasoning", "text": event.text}
                        await saver.checkpoint()
                    elif event.type == "usage":
                        outcome.add_usage(event.usage)
                    elif event.type == "tool_calls":
                        calls = event.tool_calls
                    elif event.type == "finish" and event.text == "content_filter":
                        raise LLMError("content_filter", "the model server filtered the answer")
                    elif event.type == "finish" and event.text == "length":
                        outcome.truncated = True
            except LLMError as error:
                if error.kind == "tools_unsupported" and "tools" in payload:
                    # The round runs again without tools (once: the retry declares none)
                    # and without the note that offers them; its tool exchanges stay.
                    runner.withdraw()
                    fresh = assemble(conversation, runner, outcome, memory)
                    messages, assembled = fresh + messages[assembled:], len(fresh)
                    for event in await without_tools(services, saver, model, error):
                        yield event
                    continue
                if error.kind == "context_overflow" and not outcome.produced and not outcome.forced:
                    outcome.forced = True  # compress once and retry; a second overflow fails
                    outcome.kept = {}  # the estimate was short: earlier sources go first
                    async for event in compress(services, conversation, outcome):
                        yield event
                    memory = (await read_memory(services))[0]  # said once already if damaged
                    messages = assemble(conversation, runner, outcome, memory)
                    assembled = len(messages)
                    continue
                raise
            if not calls:
                break
            messages.append(assistant_tool_message(outcome.round_text(), calls))
            outcome.clock.pause()
            for call in calls:
                result = await runner.run(call)
                outcome.activity.append(result.event)
                outcome.digest = runner.digest()
                yield result.event
                if result.warning:
                    outcome.warnings.append(result.warning)
                    yield {"type": "warning", "message": result.warning}
                messages.append({"role": "tool", "tool_call_id": call.id, "content": result.text})
                await saver.checkpoint(force=True)

        # 5. Record the measured usage; it is step 1's input next turn.
        outcome.status = "complete"
        if not await saver.persist():
            yield {"type": "warning", "message": UNSAVED}
        logger.info("turn %s complete: %d chars", conversation_id, len(outcome.text))
        yield outcome.done_event(saver.totals)
    except LLMError as error:
        logger.info("turn %s failed (%s): %s", conversation_id, error.kind, error.message)
        failed = outcome.fail(error, pending)
        if not await saver.persist():
            yield {"type": "warning", "message": UNSAVED}
        yield failed
    except (asyncio.CancelledError, GeneratorExit):
        outcome.status = "interrupted"  # Stop, and only Stop: keep what came, marked
        logger.info("turn %s interrupted after %d chars", conversation_id, len(outcome.text))
        raise
    except Exception as exc:  # a bug of ours or a shape nobody expected: say so, keep text
        logger.exception("turn %s failed unexpectedly", conversation_id)
        failed = outcome.fail(LLMError("internal", f"the chat service failed: {exc!r}"), pending)
        if not await saver.persist():
            yield {"type": "warning", "message": UNSAVED}
        yield failed
    finally:
        await saver.persist()


async def without_tools(
    services: Services, saver: Saver, model: str, error: LLMError
) -> list[Event]:
    """What the user is told when the tools are dropped: a server that refuses their
    declarations is remembered (every later turn would be refused too); llama.cpp, which
    streams the text and then fails when it does not parse as a tool call, has its text
    discarded: it is garbage, and the page is told to clear it."""
    outcome = saver.outcome
    events: list[Event] = []
    warning: WarningEvent = {
        "type": "warning",
        "message": "this model rejected the web tools; answering without them",
    }
    if error.tools_refused:
        storage = services.storage
        warning["tools_refused"] = await storage.run(
            storage.database.refuse_tools, model, error.message
        )
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


def unsummarised(conversation: Conversation) -> list[Message]:
    return conversation["messages"][conversation.get("summarized", 0) :]


def foldable(conversation: Conversation, keep: int) -> int:
    """How many unsummarised messages a compression folds: whole turns only."""
    return context.fold_count([m["role"] for m in unsummarised(conversation)], keep)


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


async def read_memory(services: Services) -> tuple[str, str | None]:
    """memory.md's text, or nothing and why: a damaged file leaves the answer without
    memory rather than without an answer, and is never overwritten."""
    try:
        return await services.storage.read_memory(), None
    except Damaged as exc:
        return "", memory_trouble(exc)


def memory_trouble(damaged: Damaged | None) -> str | None:
    return f"memory left out of this answer: {damaged}" if damaged else None


def assemble(
    conversation: Conversation, runner: ToolRunner, outcome: Outcome, memory: str
) -> list[dict[str, Any]]:
    """The request's messages, and the breakdown of what fills the context."""
    # A compression may have folded answers whose sources were to go with them.
    start = conversation.get("summarized", 0)
    kept = {p: text for p, text in outcome.kept.items() if p >= start}
    history = model_history(conversation, kept)
    layers = context.Layers(
        persona=conversation["settings"]["system_prompt"],
        memory=memory,
        summary=conversation.get("summary", ""),
        today=context.today_line(date.today()),
        tool_note=runner.note(conversation["settings"]["tool_note"])
        if runner.declarations()
        else "",
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


async def compress(
    services: Services, conversation: Conversation, outcome: Outcome
) -> AsyncIterator[Event]:
    """Fold the oldest whole turns, keeping at most the last N messages, into the rolling
    summary and memory, in one call to the summary model; on failure drop them
    unsummarised and say exactly what."""
    count = foldable(conversation, services.settings.keep_recent_messages)
    old = unsummarised(conversation)[:count]
    if not old:
        return
    start = conversation.get("summarized", 0)
    memory, trouble = await read_memory(services)
    # A turn reads only the digests it sends: those of the answers folded now come here.
    storage = services.storage
    found = await storage.run(storage.database.digests, conversation["id"], start, start + len(old))
    old = [{**m, "digest": found[p]} if p in found else m for p, m in enumerate(old, start)]
    request = context.compression_request(
        conversation["settings"]["compress_prompt"],
        memory,
        conversation.get("summary", ""),
        with_last_digests(old, services.settings.keep_sources_turns),
    )
    try:
        text, usage = await services.model.complete(
            {
                "model": services.settings.summary_model or outcome.model,
                "messages": request,
                "max_tokens": services.settings.compress_max_tokens,
            }
        )
        result = context.parse_compression(text)
    except (LLMError, ValueError) as error:
        outcome.summarized = conversation["summarized"] = start + len(old)
        message = (
            f"compression failed ({error}); dropped the {len(old)} oldest messages without a "
            f"summary (from {preview(old[0])!r} to {preview(old[-1])!r}); answering anyway"
        )
        outcome.warnings.append(message)
        yield {"type": "warning", "message": message}
        return
    review = context.FactReview([], [])
    if not trouble:  # facts are never merged into a memory file that could not be read
        # Merged into memory.md as it is now, not as it was before the summary call:
        # an edit made meanwhile in Settings stays. Checked against every folded digest,
        # not only those the summary model was sent.
        async with services.memory_lock:
            current, trouble = await read_memory(services)
            if not trouble:
                web = "\n".join(found.values())
                new_memory, review = context.review_facts(current, result.facts, web)
                if review.saved:
                    await services.storage.write_memory(new_memory)
    outcome.summary = conversation["summary"] = result.summary
    outcome.summarized = conversation["summarized"] = start + len(old)
    outcome.compression_usage = normalize_usage(usage)
    event: CompressionEvent = {
        "type": "compression",
        "messages": len(old),
        "summary_tokens": context.estimate_tokens(result.summary),
        "facts_added": review.saved,
        "facts_refused": review.refused,
    }
    outcome.compressions.append(event)  # kept with the answer: its notice and Undo stay
    yield event


def with_last_digests(messages: list[Message], turns: int) -> list[Message]:
    """The messages to fold, only the last `turns` digests among them kept: the summary
    keeps what those sources said, and its request grows by no more than a history carries
    (every folded answer's digest could overflow the summary model)."""
    digested = [p for p, m in enumerate(messages) if m.get("digest")]
    keep = set(digested[-turns:] if turns > 0 else [])
    return [
        m if p in keep else {"role": m["role"], "content": m["content"]}
        for p, m in enumerate(messages)
    ]


def preview(message: Message, length: int = 40) -> str:
    text = " ".join((message.get("content") or "").split())
    return text if len(text) <= length else text[: length - 1] + "…"


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
class Outcome:
    """What a turn produced, gathered while it streams: plain data, written by a Saver."""

    model: str
    position: int
    """Where the answer goes in the log: right after the user's message."""
    floor: int = 0
    """The measured prompt is at least the new message's estimate."""
    written: Streamed = field(default_factory=Streamed)
    thought: Streamed = field(default_factory=Streamed)
    activity: list[dict[str, Any]] = field(default_factory=list)
    sources: list[dict[str, Any]] = field(default_factory=list)
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
    forced: bool = False
    rewind: bool = False
    keep_message: bool = False
    """Regenerate and Edit: a failure before any output does not take the message back."""
    breakdown: dict[str, int] = field(default_factory=dict)
    kept: dict[int, str] = field(default_factory=dict)
    """Earlier answers' sources sent with them this turn, by position."""
    digest: str = ""
    """This turn's tool results in short, kept with the answer for follow-up questions."""
    budget: dict[str, Any] = field(default_factory=dict)
    text_mark: int = 0
    """Where this round's text starts (the text before it went with earlier tool calls)."""
    reasoning_mark: int = 0
    clock: Clock = field(default_factory=Clock)
    runner: ToolRunner | None = None
    """The turn's tools: their sources are numbered anew once the answer is written."""
    numbered: bool = False

    @property
    def text(self) -> str:
        return str(self.written)

    @property
    def reasoning(self) -> str:
        return str(self.thought)

    @property
    def produced(self) -> bool:
        return bool(self.written or self.thought or self.activity)

    def start_round(self) -> None:
        self.text_mark, self.reasoning_mark = len(self.text), len(self.reasoning)

    def round_text(self) -> str:
        """Text streamed in this round (it goes with this round's calls)."""
        return self.text[self.text_mark :]

    def discard_round(self) -> bool:
        """Forget what this round streamed, for a retry; whether there was anything."""
        streamed = len(self.text) > self.text_mark or len(self.reasoning) > self.reasoning_mark
        self.written = Streamed(self.text[: self.text_mark])
        self.thought = Streamed(self.reasoning[: self.reasoning_mark])
        return streamed

    def add_usage(self, raw: dict[str, Any] | None) -> None:
        usage = normalize_usage(raw, floor_prompt_tokens=self.floor)
        if usage:
            self.usages.append(usage)
            if self.first_prompt_tokens is None:
                self.first_prompt_tokens = usage.prompt_tokens

    def turn_usage(self) -> dict[str, Any]:
        costs = [u.cost for u in self.usages if u.cost is not None]
        return {
            "prompt_tokens": sum(u.prompt_tokens for u in self.usages),
            "completion_tokens": sum(u.completion_tokens for u in self.usages),
            "cached_tokens": sum(u.cached_tokens for u in self.usages),
            "cost": sum(costs) if costs else None,
            "requests": len(self.usages),
            "reported": bool(self.usages),
        }

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

    def number_as_cited(self) -> None:
        """Once, at the end: the answer's text, its sources, its digest and the trail's
        pages use the numbers as the answer cites them (app/chat/numbering.py), so a follow-up
        question about "[2]" means the same source to the user and to the model."""
        if self.numbered or self.runner is None:
            return
        self.numbered = True
        order = numbering.cited_order(self.text, len(self.sources))
        if order == sorted(order):
            return
        new = {old: position for position, old in enumerate(order, 1)}
        self.written = Streamed(numbering.renumbered(self.text, new))
        self.runner.renumber(order)
        if self.digest:
            self.digest = self.runner.digest()
        for step in self.activity:
            if isinstance(step.get("source"), int):
                step["source"] = new[step["source"]]

    def answer(self) -> Message:
        return {
            **({"digest": self.digest} if self.digest else {}),
            **({"compressions": self.compressions} if self.compressions else {}),
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
            "budget": self.budget_report() if self.breakdown else None,
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
            "searches": sum(1 for a in self.activity if a.get("type") == "search"),
            "fetches": sum(1 for a in self.activity if a.get("type") == "fetch"),
        }

    def budget_report(self) -> dict[str, Any]:
        """For the context bar: the limit, the served window, the measured prompt of this
        turn's first request (what the next turn builds on), the largest prompt of the turn
        (with this turn's tool results, which are not kept) and the estimated share of each
        part."""
        peak = max((u.prompt_tokens for u in self.usages), default=None)
        return {
            **self.budget,
            "used": self.first_prompt_tokens,
            "peak": peak,
            "parts": self.breakdown,
        }

    def done_event(self, totals: dict[str, Any]) -> DoneEvent:
        return {
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


@dataclass
class Saver:
    """Writes a turn's outcome: what the user has seen while it streams (checkpoints), then
    the whole outcome once, whichever path gets there first, releasing the lease with it."""

    lease: Lease
    outcome: Outcome
    checkpoint_at: float = field(default_factory=time.monotonic)
    """Starts with the turn: the first piece of text goes to the user without a write."""
    saved: bool = False
    checkpointed: bool = False
    totals: dict[str, Any] = field(default_factory=dict)
    """The conversation's totals once the outcome is written, for the done event."""

    async def checkpoint(self, *, force: bool = False) -> None:
        """The answer so far, at most every CHECKPOINT_SECONDS while text arrives (and after
        each tool step), marked interrupted: that is what a crash leaves. The outcome's
        write replaces it."""
        now_ = time.monotonic()
        if self.saved or not self.outcome.produced:
            return
        if not force and now_ - self.checkpoint_at < CHECKPOINT_SECONDS:
            return
        self.checkpoint_at = now_
        partial: Message = {**self.outcome.answer(), "status": "interrupted"}
        try:
            await self.storage.run(
                self.storage.database.put_message,
                self.conversation_id,
                self.outcome.position,
                partial,
            )
            self.checkpointed = True
        except Exception:
            logger.exception("checkpoint of turn %s failed", self.conversation_id)

    async def retract(self) -> None:
        """Text the user saw was discarded: a checkpoint holding it is rewritten now, or
        removed when nothing is left, not at the outcome's write (a crash meanwhile would
        leave the discarded text as the answer)."""
        if self.saved or not self.checkpointed:
            return
        if self.outcome.produced:
            await self.checkpoint(force=True)
            return
        try:
            await self.storage.run(
                self.storage.database.drop_message, self.conversation_id, self.outcome.position
            )
            self.checkpointed = False
        except Exception:
            logger.exception("removing the checkpoint of turn %s failed", self.conversation_id)

    async def persist(self) -> bool:
        """Write the outcome once; whether it is written. A turn still running here was
        stopped. A failed write is tried once more, then logged: it must not replace the
        error that ended the turn."""
        if self.saved:
            return True
        if self.outcome.status == "running":
            self.outcome.status = "interrupted"
        self.outcome.number_as_cited()
        for attempt in (1, 2):
            try:
                self.totals = await self.storage.run(
                    self.storage.database.save_outcome,
                    self.conversation_id,
                    self.outcome.write(),
                    self.lease.owner,
                )
            except Exception:
                logger.exception("writing turn %s failed (try %d)", self.conversation_id, attempt)
                continue
            self.saved = True
            self.lease.dropped()
            return True
        return False

    @property
    def storage(self) -> Storage:
        return self.lease.storage

    @property
    def conversation_id(self) -> str:
        return self.lease.conversation_id
