"""What a tool of ours is: a name, a description, its arguments as a typed pydantic model
(the JSON schema the model and MCP clients read is derived from it), its cap per answer
and its run. The tools themselves are one module each (app/chat/web_search.py,
app/chat/web_fetch.py), registered in app/chat/registry.py (docs/architecture.md,
"Adding a tool")."""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING, Any, ClassVar, Generic, Protocol, TypeAlias, TypeVar

from pydantic import BaseModel, ValidationError
from pydantic_core import ErrorDetails

from app import config
from app.chat.events import FetchEvent, SearchEvent, Step
from app.chat.given_addresses import GivenAddresses, Planted
from app.chat.openai_wire import FunctionTool
from app.chat.settings import ChatSettings
from app.store.rows import Message
from app.webtext import untrusted

if TYPE_CHECKING:  # the fetcher and the searcher: imported by who runs the tools
    from app.pages.fetch import Extract
    from app.search.searcher import Searcher

Arguments = TypeVar("Arguments", bound=BaseModel)

JsonSchema: TypeAlias = dict[str, Any]
"""A tool's arguments as JSON Schema, derived by pydantic: free-form JSON by nature."""
CallArguments: TypeAlias = dict[str, Any]
"""A call's arguments as a model or an agent wrote them: free-form JSON until `Tool.parse`
checks them against the tool's own model."""


@dataclass
class ToolResult:
    """What one call gives: text for the model, a step of the trail, maybe a warning."""

    text: str
    event: Step
    warning: str | None = None


PAGE_KEEP_CHARS = 1_500
"""The start of a page read kept for the answer's digest (app/chat/gathered.py)."""


class Answering(Protocol):
    """What a tool's run may read of the answer it runs in, and add to (the runner of
    app/chat/tools.py is one)."""

    searcher: Searcher
    settings: config.Settings
    locale: str
    """The answer's search locale."""
    engines: str | None
    person: int | None
    """Who asks in household mode: their own search cache."""
    history: list[Message]
    history_read: bool
    given: GivenAddresses
    """The addresses web_fetch may read."""
    planted: Planted
    """The addresses the model wrote in its search queries."""
    snippets: dict[int, str]
    excerpts: dict[int, str]
    passages: dict[int, str]
    """The text of each page a search engine read (Brave's LLM Context), by source number."""

    @property
    def extract(self) -> Extract:
        """The page extractor (the service's extraction process)."""

    def cite(
        self, url: str, title: str, domain: str, *, date: str | None = None, read: bool = False
    ) -> int:
        """The source's number, for [n] citations."""


@dataclass(frozen=True)
class Waiting:
    """A search about to wait for the search plan's rate, long enough to say so."""

    query: str
    seconds: float


class Tool(ABC, Generic[Arguments]):
    """One tool, as the model, the MCP server and the command line know it."""

    name: ClassVar[str]
    description: ClassVar[str]
    """What the model (and an agent) reads: say the limits and the cost here."""
    arguments: type[Arguments]
    placeholder: ClassVar[str]
    """The tool note's placeholder for the uses left, e.g. "searches" for {searches}."""

    @abstractmethod
    def cap(self, chosen: ChatSettings) -> int:
        """The uses per answer the settings allow (0: not offered)."""

    @abstractmethod
    async def run(self, arguments: Arguments, runner: Answering) -> ToolResult:
        """The call's result; a failure as text for the model, never an exception."""

    async def waiting(self, arguments: Arguments, runner: Answering) -> Waiting | None:
        """What the call will wait for before it runs, when that is worth saying."""
        return None

    @cached_property
    def parameters(self) -> JsonSchema:
        """The arguments' JSON schema, without pydantic's titles (tokens the model pays
        for and reads nothing in)."""
        schema: JsonSchema = untitled(self.arguments.model_json_schema())
        return schema

    @cached_property
    def declaration(self) -> FunctionTool:
        return {
            "type": "function",
            "function": {
                "name": self.name,
                "description": self.description,
                "parameters": self.parameters,
            },
        }

    def parse(self, arguments: CallArguments) -> Arguments | str:
        """The arguments (the JSON object a model or an agent wrote: free-form until here)
        checked against their types, or what is wrong with them, said so the model can
        correct itself (small models send numbers, lists, objects)."""
        try:
            return self.arguments.model_validate(arguments)
        except ValidationError as exc:
            return "; ".join(problem(error, arguments) for error in exc.errors())


def problem(error: ErrorDetails, arguments: CallArguments) -> str:
    name = ".".join(str(part) for part in error["loc"])
    if error["type"] == "string_type" and name in arguments:
        return f"{name!r} as {type(arguments[name]).__name__} instead of text"
    return f"{name!r}: {error['msg']}"


def untitled(schema: Any) -> Any:
    """A JSON schema without its "title" keys (a property named "title" stays)."""
    if isinstance(schema, dict):
        return {
            key: untitled(value)
            for key, value in schema.items()
            if not (key == "title" and isinstance(value, str))
        }
    if isinstance(schema, list):
        return [untitled(item) for item in schema]
    return schema


def failed(
    event: SearchEvent | FetchEvent, what: str, detail: str = "", source: str = ""
) -> ToolResult:
    """A failure goes to the model as text, never as an empty result, and to the user. Its
    detail may quote a server (an error body, a redirect's address, an engine's message):
    the model gets that as untrusted data, like a page."""
    message = f"{what}: {detail}" if detail else what
    text = f"{what}:\n{untrusted(detail, source)}" if detail else what
    event["error"] = message  # each caller's own event, shown nowhere yet
    return ToolResult(text, event, warning=message)
