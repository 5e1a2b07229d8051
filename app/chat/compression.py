"""Compression: when the history outgrows the budget, its oldest whole turns fold into the
rolling summary, and the durable facts the user told about themselves into memory.md, in
one call to the summary model (docs/architecture.md, "The turn")."""

from __future__ import annotations

from dataclasses import dataclass

from app.chat import context
from app.chat.events import CompressionEvent
from app.chat.services import Services
from app.model.failures import LLMError
from app.model.usage import Usage, normalize_usage
from app.store.errors import Damaged
from app.store.rows import Conversation, Message


@dataclass(frozen=True)
class Folded:
    """What a compression changed, for the turn to apply: where the unsummarised history
    now starts, the new summary (None: the old turns were dropped without one), what the
    summary call cost, and what the user is told (a compression's notice, or a warning)."""

    summarized: int
    summary: str | None
    usage: Usage | None
    notice: CompressionEvent | None
    warning: str | None = None

    def applied(self, conversation: Conversation) -> Conversation:
        """The conversation as the rest of the turn sees it (the loaded one is left as it
        was read)."""
        changed: Conversation = {**conversation, "summarized": self.summarized}
        if self.summary is not None:
            changed["summary"] = self.summary
        return changed


async def compress(
    services: Services, conversation: Conversation, prompt: str, model: str, person: int | None
) -> Folded | None:
    """Fold the oldest whole turns, keeping at most the last N messages, into the rolling
    summary and `person`'s memory (the conversation's owner's), in one call to the summary
    model; on failure drop them unsummarised and say exactly what. None when there is
    nothing to fold."""
    count = foldable(conversation, services.settings.keep_recent_messages)
    old = unsummarised(conversation)[:count]
    if not old:
        return None
    start = conversation.get("summarized", 0)
    memory, trouble = await read_memory(services, person)
    # A turn reads only the digests it sends: those of the answers folded now come here.
    storage = services.storage
    found = await storage.digests(conversation["id"], start, start + len(old))
    old = [with_digest(m, found[p]) if p in found else m for p, m in enumerate(old, start)]
    request = context.compression_request(
        prompt,
        memory,
        conversation.get("summary", ""),
        with_last_digests(old, services.settings.keep_sources_turns),
    )
    try:
        text, usage = await services.model.complete(
            {
                "model": services.settings.summary_model or model,
                "messages": request,
                "max_tokens": services.settings.compress_max_tokens,
            }
        )
        result = context.parse_compression(text)
    except (LLMError, ValueError) as error:
        message = (
            f"compression failed ({error}); dropped the {len(old)} oldest messages without a "
            f"summary (from {preview(old[0])!r} to {preview(old[-1])!r}); answering anyway"
        )
        return Folded(start + len(old), None, None, None, message)
    review = context.FactReview([], [])
    if not trouble:  # facts are never merged into a memory file that could not be read
        # Merged into memory.md as it is now, not as it was before the summary call:
        # an edit made meanwhile in Settings stays. Checked against every folded digest,
        # not only those the summary model was sent.
        async with services.memory_lock:
            current, trouble = await read_memory(services, person)
            if not trouble:
                web = "\n".join(found.values())
                new_memory, review = context.review_facts(current, result.facts, web)
                if review.saved:
                    await services.storage.write_memory(new_memory, person)
    event: CompressionEvent = {
        "type": "compression",
        "messages": len(old),
        "summary_tokens": context.estimate_tokens(result.summary),
        "facts_added": review.saved,
        "facts_refused": review.refused,
    }
    return Folded(start + len(old), result.summary, normalize_usage(usage), event)


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


def with_digest(message: Message, digest: str) -> Message:
    return {**message, "digest": digest}


def preview(message: Message, length: int = 40) -> str:
    text = " ".join((message.get("content") or "").split())
    return text if len(text) <= length else text[: length - 1] + "…"


def unsummarised(conversation: Conversation) -> list[Message]:
    return conversation["messages"][conversation.get("summarized", 0) :]


def foldable(conversation: Conversation, keep: int) -> int:
    """How many unsummarised messages a compression folds: whole turns only."""
    return context.fold_count([m["role"] for m in unsummarised(conversation)], keep)


async def read_memory(services: Services, person: int | None) -> tuple[str, str | None]:
    """`person`'s memory.md's text, or nothing and why: a damaged file leaves the answer
    without memory rather than without an answer, and is never overwritten."""
    try:
        return await services.storage.read_memory(person), None
    except Damaged as exc:
        return "", memory_trouble(exc)


def memory_trouble(damaged: Damaged | None) -> str | None:
    return f"memory left out of this answer: {damaged}" if damaged else None
