"""The model's part of a research run: it only writes text (no tool calling, so models
without it research too). A structured step (the plan, a page's notes, the reflection)
asks for JSON with the server's schema-constrained output (`response_format` of type
`json_schema`, which llama.cpp, vLLM, Ollama and LM Studio each accept: docs/research.md)
and reads plain text when the server refuses that field; an answer that cannot be read
is asked for once more, and a second one fails the run with what the model wrote.

Every request is non-streamed (`ModelClient.complete`): a slow local model's first byte
may come minutes late on a long prompt; only LLM_TOTAL_TIMEOUT and the run's minutes
bound it."""

from __future__ import annotations

import json
import logging
import re
from dataclasses import dataclass
from typing import TypeVar

from pydantic import BaseModel, ValidationError

from app import config
from app.chat.context import estimate_tokens
from app.chat.tool import JsonSchema, untitled
from app.errors import ServiceError
from app.model.client import ModelClient
from app.model.failures import Failure, LLMError
from app.model.usage import Usage, normalize_usage
from app.model.wire import RequestBody
from app.research.budget import Spent
from app.webtext import clipped

logger = logging.getLogger(__name__)

Shape = TypeVar("Shape", bound=BaseModel)

RESPONSE_FORMAT_REFUSED = re.compile(r"response.?format|json.?schema|json.?object", re.I)
"""How a server that does not take the field says so: OpenAI's "Invalid parameter:
'response_format' of type 'json_schema' is not supported with this model", llama.cpp's
"response_format type must be one of ...", LM Studio's "'response_format.type' must be
'json_schema'"."""
FENCE = re.compile(r"^```[a-z]*\s*|\s*```$", re.I)
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
    json_mode: bool = True
    """Whether the server takes `response_format`; False once it refused it."""

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
        if shape is not None and self.json_mode:
            try:
                return await self.completed({**body, "response_format": schema_format(shape)})
            except LLMError as exc:
                if exc.kind != Failure.UPSTREAM or not RESPONSE_FORMAT_REFUSED.search(str(exc)):
                    raise
                logger.info("the model server refused response_format; reading plain text")
                self.json_mode = False
        return await self.completed(body)

    async def completed(self, body: RequestBody) -> Written:
        text, raw = await self.client.complete(body)
        usage = normalize_usage(raw)
        if usage is None:  # a server that counts nothing: our pessimistic estimate
            sent = json.dumps(body.get("messages"), ensure_ascii=False)
            usage = Usage(estimate_tokens(sent), estimate_tokens(text))
        self.spent.prompt_tokens += usage.prompt_tokens
        self.spent.completion_tokens += usage.completion_tokens
        limit = int(body.get("max_tokens") or 0)
        return Written(text, cut=0 < limit <= usage.completion_tokens)


def schema_format(shape: type[BaseModel]) -> dict[str, object]:
    """OpenAI's structured-output field, the one convention all four servers accept."""
    return {
        "type": "json_schema",
        "json_schema": {"name": shape.__name__, "schema": schema_of(shape)},
    }


def schema_of(shape: type[BaseModel]) -> JsonSchema:
    """The shape's JSON schema without pydantic's titles, as our tools declare theirs."""
    schema: JsonSchema = untitled(shape.model_json_schema())
    return schema


def reminder(shape: type[BaseModel]) -> str:
    schema = json.dumps(schema_of(shape), ensure_ascii=False)
    return (
        "That answer could not be read. Answer again with one JSON object only, no other "
        f"text, matching this JSON schema: {schema}"
    )


def read_as(text: str, shape: type[Shape]) -> Shape | None:
    """The first JSON object in the answer (in a code fence or among words) as `shape`."""
    body = FENCE.sub("", text.strip())
    start, end = body.find("{"), body.rfind("}")
    if start < 0 or end <= start:
        return None
    try:
        return shape.model_validate(json.loads(body[start : end + 1]))
    except (ValueError, ValidationError):
        return None
