"""The HTTP API's request and error bodies, declared: bad input is refused with the field
named before a handler runs, and /openapi.json documents every body (so a fuzzer can
exercise them). One rule for unknown fields everywhere: refused."""

from __future__ import annotations

from typing import Annotated, Any, TypeAlias

from fastapi import HTTPException
from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    StrictBool,
    field_validator,
)
from pydantic.fields import FieldInfo

from app import config
from app.chat import context
from app.chat.context import MAX_FACT_CHARS
from app.research.budget import MAX_MINUTES, MAX_PAGES, MAX_SEARCHES
from app.research.plan import MAX_SUBQUESTIONS
from app.store.rows import StoredSettings

OpenApiResponses: TypeAlias = dict[int | str, dict[str, Any]]
"""A route's other responses for its OpenAPI entry, as FastAPI takes them: OpenAPI's
response objects, free-form there."""
AS_STORED: TypeAlias = dict[str, Any]
"""A conversation (or its list entries) answered as the store gives it: declared as a
plain object, so that FastAPI neither documents nor converts it field by field (its shape
is app.store.rows' `Conversation`, checked by mypy where it is built)."""

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


def whole_number(value: object) -> object:
    """An integer as JSON has it: 7 or 7.0, never "7" or true."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError("must be a whole number")
    return value


WholeNumber = Annotated[int, BeforeValidator(whole_number)]


def Text(max_length: int, min_length: int = 0) -> FieldInfo:  # noqa: N802 - read as a type
    """A string field's length limits, as in ``Annotated[str, Text(200)]``. Pydantic
    refuses a lone surrogate (JSON allows "\\ud800"), which could not be stored as UTF-8."""
    limits: FieldInfo = Field(min_length=min_length, max_length=max_length)
    return limits


# Stored as given (the page trims what it sends); an id of blanks alone is refused.
ModelId = Annotated[str, Field(min_length=1, max_length=200, pattern=r"[^ \t\r\n\f\v]")]


def setting(description: str, **limits: Any) -> Any:
    """A field of the partial update: its help and its limits. No default: a setting left
    out is not in `changes()` (a default_factory, so that the schema shows none either)."""
    return Field(default_factory=lambda: None, description=description, **limits)


class ConversationSettings(BaseModel):
    """A partial update of a conversation's settings. Each field's description is the
    page's help: what changing it costs. A field left out keeps its value; null is refused
    (the None defaults only mark "not given")."""

    model_config = ConfigDict(extra="forbid")

    model: ModelId = setting(
        "Switching model drops the previous model's prompt cache: one cold turn."
    )
    system_prompt: Annotated[str, Text(50_000)] = setting(
        "Any edit invalidates the prompt cache from the first byte."
    )
    context_budget: WholeNumber = setting(
        "Lower means earlier compression; never above the served window.",
        ge=1_000,
        le=10_000_000,
    )
    web_search: StrictBool = setting("Each search adds about 4,000 tokens of results to the turn.")
    web_fetch: StrictBool = setting("Each page read adds up to about 12,000 tokens to the turn.")
    search_max_uses: WholeNumber = setting(
        "Searches allowed per answer; told to the model.", ge=0, le=20
    )
    fetch_max_uses: WholeNumber = setting("Pages read per answer; told to the model.", ge=0, le=20)
    tool_note: Annotated[str, Text(10_000)] = setting(
        "Its wording changes how many tools the model uses, so the cost."
    )
    compress_prompt: Annotated[str, Text(20_000, 1)] = setting(
        "Decides what the summary keeps; must contain {transcript}.",
        json_schema_extra={"pattern": r"\{transcript\}"},
    )
    search_locale: Annotated[str, Text(20, 1)] = setting(
        "Language of results, e.g. pl-PL; the model may override per query.",
        json_schema_extra={"pattern": config.LOCALE.pattern},
    )
    search_engines: Annotated[str, Text(500)] = setting(
        "SearXNG engines for this conversation (empty: SearXNG's list).",
        pattern=r"^[A-Za-z0-9 _.,-]*$",
    )

    @field_validator("compress_prompt")
    @classmethod
    def summarises(cls, value: str) -> str:
        try:
            return context.check_compress_prompt(value)
        except context.PromptError:
            # Named as the field is: the page shows it under compress_prompt.
            raise ValueError(
                "compress_prompt must contain {transcript}: without it nothing would be summarised"
            ) from None

    @field_validator("search_locale")
    @classmethod
    def locale(cls, value: str) -> str:
        try:
            return config.check_locale(value)
        except config.ConfigError as exc:
            raise ValueError(str(exc)) from None

    def changes(self) -> StoredSettings:
        return self.model_dump(exclude_unset=True)


def settings_help() -> dict[str, str]:
    return {
        name: field.description or "" for name, field in ConversationSettings.model_fields.items()
    }


class Body(BaseModel):
    model_config = ConfigDict(extra="forbid")


class DetailBody(BaseModel):
    detail: str
    """What was wrong, in words, naming the field or the limit."""


class MemoryText(Body):
    text: Annotated[str, Text(MAX_MEMORY_CHARS)]


class MemoryFact(Body):
    fact: Annotated[str, Text(MAX_FACT_CHARS, 1)] = Field(pattern=r"[^ \t\r\n\f\v]")
    """One line of memory.md, as a compression's notice shows it."""


class PickerModels(Body):
    models: list[ModelId] = Field(max_length=MAX_MODELS)

    @field_validator("models")
    @classmethod
    def without_repeats(cls, models: list[str]) -> list[str]:
        return list(dict.fromkeys(models))


class NewConversation(Body):
    title: Title = "New conversation"
    settings: ConversationSettings = Field(default_factory=lambda: ConversationSettings())


class ConversationChange(Body):
    title: Title | None = None
    settings: ConversationSettings | None = None


class Research(Body):
    """Answer with a research run (docs/research.md, "The page")."""

    plan_seconds: float = Field(default=10.0, ge=0, le=3600)
    """How long the plan waits for the user's Start before it starts by itself; 0: it
    waits for Start."""
    searches: int | None = Field(default=None, ge=1, le=MAX_SEARCHES)
    """The run's budget, each bound within the service's caps; one left out (None) is
    the service's default (RESEARCH_SEARCHES, RESEARCH_PAGES, RESEARCH_MINUTES)."""
    pages: int | None = Field(default=None, ge=1, le=MAX_PAGES)
    minutes: float | None = Field(default=None, gt=0, le=MAX_MINUTES)


class ResearchStart(Body):
    """The plan as the user left it: its sub-questions, each kept, rewritten or left out."""

    questions: list[Annotated[str, Text(500, 1)]] = Field(min_length=1, max_length=MAX_SUBQUESTIONS)


class UserMessage(Body):
    message: Annotated[str, Text(MAX_MESSAGE_CHARS, 1)] = Field(pattern=r"[^ \t\r\n\f\v]")
    model: ModelId | None = None
    """Default: the conversation's model."""
    research: Research | None = None
    """Research the message rather than answer it."""

    @field_validator("message")
    @classmethod
    def not_blank(cls, message: str) -> str:
        if not message.strip(BLANKS):
            raise ValueError("the message is empty")
        return message


class Edit(UserMessage):
    position: int | None = Field(default=None, ge=0, le=10**9)
    """The user message to replace, by its position in `messages` (as the versions'
    `/turns/{position}/version` names it). Default: the last one."""


class Regenerate(Body):
    model: ModelId | None = None
    research: Research | None = None
    """A new research run; the earlier answer stays as a version."""


class VersionChoice(Body):
    index: int = Field(ge=1, le=1_000_000)
    """The version to show, from 1 (as the page's "2/3" counts)."""


def errors(*statuses: int) -> OpenApiResponses:
    """The error responses a route can give, for its OpenAPI entry."""
    return {status: {"model": DetailBody} for status in statuses}


REFUSALS = errors(400, 422)
"""What every route may answer, given to each router: unreadable JSON (400) or invalid input
(422), both as {"detail": str}, instead of FastAPI's list-shaped 422."""


def refused(message: str, status: int = 400) -> HTTPException:
    """A request refused by a route's own check, answered as {"detail": message}."""
    return HTTPException(status_code=status, detail=message)
