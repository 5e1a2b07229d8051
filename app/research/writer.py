"""The model's part of a research run: it only writes text (no tool calling, so models
without it research too). A structured step (the plan, a page's notes, the reflection)
is one of app/chat/structured.py's steps (the server's schema-constrained output, or plain
text when it refuses that field), shared with the search-first step of a chat answer; an
answer that cannot be read is asked for once more, and a second one fails the run with
what the model wrote.

Every request is non-streamed (`ModelClient.complete`): a slow local model's first byte
may come minutes late on a long prompt; only LLM_TOTAL_TIMEOUT and the run's minutes
bound it."""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass, field

from pydantic import BaseModel

from app import config
from app.chat.context import estimate_tokens
from app.chat.structured import Shape, StructuredSteps, read_as, reminder
from app.errors import ServiceError
from app.model.client import ModelClient
from app.model.usage import RawUsage, Usage, normalize_usage
from app.model.wire import RequestBody
from app.research.budget import Spent
from app.webtext import clipped

logger = logging.getLogger(__name__)

SHOWN_CHARS = 200


@dataclass(frozen=True)
class Written:
    """What the model wrote, and whether it stopped at the tokens it was given."""

    text: str
    cut: bool


class Unreadable(ServiceError):
    """The model's answer to a structured step could not be read, twice in a row."""

    status = 502


@dataclass
class Writer:
    """One model, its parameters, and what its requests spent."""

    client: ModelClient
    model: str
    params: config.ModelParameters
    spent: Spent
    steps: StructuredSteps = field(init=False)

    def __post_init__(self) -> None:
        self.steps = StructuredSteps(self.client)

    async def text(self, messages: list[dict[str, str]], max_tokens: int) -> Written:
        """A free text (the report)."""
        return await self.ask(messages, max_tokens, None)

    async def structured(
        self, step: str, messages: list[dict[str, str]], shape: type[Shape], max_tokens: int
    ) -> Shape:
        """The step's answer read as `shape`; asked again once when it cannot be read."""
        answer = (await self.ask(messages, max_tokens, shape)).text
        parsed = read_as(answer, shape)
        if parsed is not None:
            return parsed
        logger.info("research %s: the model's answer could not be read; asking again", step)
        again = [
            *messages,
            {"role": "assistant", "content": answer},
            {"role": "user", "content": reminder(shape)},
        ]
        answer = (await self.ask(again, max_tokens, shape)).text
        parsed = read_as(answer, shape)
        if parsed is None:
            raise Unreadable(
                f"the model's {step} could not be understood, twice in a row "
                f"(it wrote: {clipped(answer, SHOWN_CHARS)!r})"
            )
        return parsed

    async def ask(
        self, messages: list[dict[str, str]], max_tokens: int, shape: type[BaseModel] | None
    ) -> Written:
        body: RequestBody = {
            "model": self.model,
            "messages": messages,
            "max_tokens": max_tokens,
            **self.params,
        }
        asked = await self.steps.ask(body, shape)
        return self.counted(body, asked.text, asked.usage)

    def counted(self, body: RequestBody, text: str, raw: RawUsage | None) -> Written:
        usage = normalize_usage(raw)
        if usage is None:  # a server that counts nothing: our pessimistic estimate
            sent = json.dumps(body.get("messages"), ensure_ascii=False)
            usage = Usage(estimate_tokens(sent), estimate_tokens(text))
        self.spent.prompt_tokens += usage.prompt_tokens
        self.spent.completion_tokens += usage.completion_tokens
        limit = int(body.get("max_tokens") or 0)
        return Written(text, cut=0 < limit <= usage.completion_tokens)
