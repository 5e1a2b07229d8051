"""The HTTP API's request and error bodies, declared: bad input is refused with the field
named before a handler runs, and /openapi.json documents every body (so a fuzzer can
exercise them). One rule for unknown fields everywhere: refused."""

from __future__ import annotations

from typing import Annotated

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, field_validator

from app.chat.context import MAX_FACT_CHARS
from app.config import ConversationSettings, ModelId, Text

MAX_MESSAGE_CHARS = 200_000
MAX_MEMORY_CHARS = 200_000
MAX_MODELS = 200

BLANKS = " \t\r\n\f\v"
"""What counts as blank, spelled out: Python's idea of whitespace is wider than JSON
Schema's, and /openapi.json must call valid exactly what the service accepts."""
Title = Annotated[
    str,
    AfterValidator(lambda title: title.strip(BLANKS)),
    Field(min_length=1, max_length=200, pattern=r"[^ \t\r\n\f\v]"),
]


class Body(BaseModel):
    model_config = ConfigDict(extra="forbid")


class ErrorBody(BaseModel):
    detail: str
    """What was wrong, in words, naming the field or the limit."""


class MemoryText(Body):
    text: Text(MAX_MEMORY_CHARS)  # type: ignore[valid-type]


class MemoryFact(Body):
    fact: Text(MAX_FACT_CHARS, 1) = Field(pattern=r"[^ \t\r\n\f\v]")  # type: ignore[valid-type]
    """One line of memory.md, as a compression's notice shows it."""


class ModelList(Body):
    models: list[ModelId] = Field(max_length=MAX_MODELS)

    @field_validator("models")
    @classmethod
    def without_repeats(cls, models: list[str]) -> list[str]:
        return list(dict.fromkeys(models))


class NewConversation(Body):
    title: Title = "New conversation"
    settings: ConversationSettings = Field(default_factory=ConversationSettings)


class ConversationChange(Body):
    title: Title | None = None
    settings: ConversationSettings | None = None


class ChatMessage(Body):
    message: Text(MAX_MESSAGE_CHARS, 1) = Field(pattern=r"[^ \t\r\n\f\v]")  # type: ignore[valid-type]
    model: ModelId | None = None
    """Default: the conversation's model."""

    @field_validator("message")
    @classmethod
    def not_blank(cls, message: str) -> str:
        if not message.strip(BLANKS):
            raise ValueError("the message is empty")
        return message


class Regenerate(Body):
    model: ModelId | None = None


class VersionChoice(Body):
    index: int = Field(ge=1, le=1_000_000)
    """The version to show, from 1 (as the page's "2/3" counts)."""


def errors(*statuses: int) -> dict[int | str, dict]:
    """The error responses a route can give, for its OpenAPI entry."""
    return {status: {"model": ErrorBody} for status in statuses}
