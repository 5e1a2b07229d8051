"""A structured step: the model asked for one JSON object of a given shape, in plain text,
without tool calling, so that models without it take part too: research's plan, notes and
reflection (app/research/writer.py) and the search-first step of an answer whose model
cannot call tools (app/chat/search_first.py).

The request asks for the server's schema-constrained output (`response_format` of type
`json_schema`, which llama.cpp, vLLM, Ollama and LM Studio each accept: docs/research.md)
and is asked again without that field when the server refuses it; the answer is read from
the first JSON object in the text, whatever surrounds it. Requests are non-streamed
(`ModelClient.complete`): a slow local model's first byte may come late on a long prompt."""

from __future__ import annotations

import json
import logging
import re
from dataclasses import dataclass
from typing import TypeVar

from pydantic import BaseModel, ValidationError

from app.chat.tool import JsonSchema, untitled
from app.model.client import ModelClient
from app.model.failures import Failure, LLMError
from app.model.usage import RawUsage
from app.model.wire import RequestBody

logger = logging.getLogger(__name__)

Shape = TypeVar("Shape", bound=BaseModel)

RESPONSE_FORMAT_REFUSED = re.compile(r"response.?format|json.?schema|json.?object", re.I)
"""How a server that does not take the field says so: OpenAI's "Invalid parameter:
'response_format' of type 'json_schema' is not supported with this model", llama.cpp's
"response_format type must be one of ...", LM Studio's "'response_format.type' must be
'json_schema'"."""
FENCE = re.compile(r"^```[a-z]*\s*|\s*```$", re.I)


@dataclass(frozen=True)
class Asked:
    """What the model wrote, and the usage its server reported (None: it counts nothing)."""

    text: str
    usage: RawUsage | None


@dataclass
class StructuredSteps:
    """One model server's structured steps: `response_format` while it takes the field."""

    client: ModelClient
    json_mode: bool = True
    """Whether the server takes `response_format`; False once it refused it."""

    async def ask(self, body: RequestBody, shape: type[BaseModel] | None) -> Asked:
        """The model's answer to `body`, constrained to `shape` where the server can."""
        if shape is not None and self.json_mode:
            try:
                return Asked(
                    *await self.client.complete({**body, "response_format": schema_format(shape)})
                )
            except LLMError as exc:
                if exc.kind != Failure.UPSTREAM or not RESPONSE_FORMAT_REFUSED.search(str(exc)):
                    raise
                logger.info("the model server refused response_format; reading plain text")
                self.json_mode = False
        return Asked(*await self.client.complete(body))


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
