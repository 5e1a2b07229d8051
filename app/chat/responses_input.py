"""The OpenAI Responses API's input as the chat messages the engine sends (docs/openai.md,
"The Responses API"): `instructions`, `input` as a string or items (messages, the model's
own earlier output items, `function_call_output`), and the client's function tools, each in
the shape Chat Completions gives it (app.chat.openai_wire). Names as the reference and the
SDK's `openai.types.responses` give them; what this endpoint cannot use is not in these
types, so the web layer's schema refuses it, naming the field.

A client such as the Agents SDK sends the previous response's output items back as input:
a message, its `function_call` items, and our `web_search_call` and `reasoning` items,
which carry nothing the model needs again (the answer that used them is in the history).
The types come from typing_extensions: pydantic reads them on Python 3.11 only from there."""

from __future__ import annotations

from typing import Annotated, Literal, Required, cast

from annotated_types import Len
from pydantic import Discriminator, Field, Tag
from typing_extensions import TypedDict

from app.chat.openai_wire import (
    ChatMessage,
    ContentPart,
    FunctionDefinition,
    FunctionTool,
    MessageToolCall,
    Role,
)

ROLES: dict[str, Role] = {
    "user": "user",
    "assistant": "assistant",
    "system": "system",
    "developer": "system",  # the only one local servers' chat templates know
}


class TextPart(TypedDict):
    """Text of a message: the user's (input_text) or the model's (output_text)."""

    type: Literal["input_text", "output_text"]
    text: str


class RefusalPart(TypedDict):
    type: Literal["refusal"]
    refusal: str


class ImagePart(TypedDict, total=False):
    type: Required[Literal["input_image"]]
    image_url: Required[str]
    """An address or a data: URL (OpenAI's file_id is its platform's own)."""
    detail: str


InputPart = Annotated[TextPart | RefusalPart | ImagePart, Field(discriminator="type")]


class InputMessage(TypedDict, total=False):
    """A message; its `type` may be left out."""

    type: Literal["message"]
    role: Required[Literal["user", "assistant", "system", "developer"]]
    content: Required[str | list[InputPart]]


class FunctionCallItem(TypedDict, total=False):
    """A call of the client's tool the model made (an earlier response's output item)."""

    type: Required[Literal["function_call"]]
    call_id: Required[str]
    name: Required[str]
    arguments: Required[str]


class FunctionCallOutput(TypedDict):
    """What the client's tool returned for `call_id`."""

    type: Literal["function_call_output"]
    call_id: str
    output: str | list[InputPart]


class PassedOver(TypedDict, total=False):
    """A web_search_call or reasoning item of an earlier response of ours: dropped, as the
    reasoning of Chat Completions is."""

    type: Required[Literal["web_search_call", "reasoning"]]


def item_kind(item: object) -> str:
    """Which of the input's types an item is, by its `type` (a message may leave it out);
    any other is refused naming it."""
    kind = item.get("type", "message") if isinstance(item, dict) else None
    return "passed over" if kind in ("web_search_call", "reasoning") else str(kind)


InputItem = Annotated[
    Annotated[InputMessage, Tag("message")]
    | Annotated[FunctionCallItem, Tag("function_call")]
    | Annotated[FunctionCallOutput, Tag("function_call_output")]
    | Annotated[PassedOver, Tag("passed over")],
    Discriminator(item_kind),
]


class ResponsesFunctionTool(TypedDict, total=False):
    """A client's function tool, as the Responses API declares it (flat, unlike Chat
    Completions')."""

    type: Required[Literal["function"]]
    name: Required[Annotated[str, Len(1, 64)]]
    description: str | None
    parameters: dict[str, object] | None
    strict: bool | None


def messages_of(instructions: str | None, given: str | list[InputItem]) -> list[ChatMessage]:
    """The chat messages of a request: its instructions as a system message, then its input
    (the assistant's text and the function calls that followed it made one message)."""
    messages: list[ChatMessage] = []
    if instructions:
        messages.append({"role": "system", "content": instructions})
    if isinstance(given, str):
        return [*messages, {"role": "user", "content": given}]
    for item in given:
        # The item's type as the body's validation told it (mypy cannot narrow the union).
        kind = item_kind(item)
        if kind == "function_call":
            calling(messages).append(function_call(cast(FunctionCallItem, item)))
        elif kind == "function_call_output":
            messages.append(call_output(cast(FunctionCallOutput, item)))
        elif kind == "message":
            messages.append(message(cast(InputMessage, item)))
    return messages


def message(item: InputMessage) -> ChatMessage:
    return {"role": ROLES[item["role"]], "content": content(item["content"])}


def content(given: str | list[InputPart]) -> str | list[ContentPart]:
    """Text as one string (every chat template takes it); with an image, Chat Completions'
    parts."""
    if isinstance(given, str):
        return given
    if all(part["type"] != "input_image" for part in given):
        return "".join(part_text(part) for part in given)
    return [chat_part(part) for part in given]


def part_text(part: InputPart) -> str:
    if part["type"] == "refusal":
        return part["refusal"]
    if part["type"] == "input_image":
        return ""
    return part["text"]


def chat_part(part: InputPart) -> ContentPart:
    if part["type"] == "input_image":
        detail = part.get("detail", "auto")
        return {"type": "image_url", "image_url": {"url": part["image_url"], "detail": detail}}
    return {"type": "text", "text": part_text(part)}


def calling(messages: list[ChatMessage]) -> list[MessageToolCall]:
    """The tool calls of the assistant's last message, a new message when the last is not
    the assistant's."""
    last = messages[-1] if messages else None
    if last is None or last["role"] != "assistant":
        last = {"role": "assistant", "content": None}
        messages.append(last)
    return last.setdefault("tool_calls", [])


def function_call(item: FunctionCallItem) -> MessageToolCall:
    return {
        "id": item["call_id"],
        "type": "function",
        "function": {"name": item["name"], "arguments": item["arguments"]},
    }


def call_output(item: FunctionCallOutput) -> ChatMessage:
    return {"role": "tool", "tool_call_id": item["call_id"], "content": content(item["output"])}


def function_tools(tools: list[ResponsesFunctionTool]) -> list[FunctionTool]:
    """The client's function tools as Chat Completions declares them."""
    return [{"type": "function", "function": definition(tool)} for tool in tools]


def definition(tool: ResponsesFunctionTool) -> FunctionDefinition:
    """A function tool's name, description, parameters and strictness, as given."""
    defined: FunctionDefinition = {"name": tool["name"]}
    if (description := tool.get("description")) is not None:
        defined["description"] = description
    if (parameters := tool.get("parameters")) is not None:
        defined["parameters"] = parameters
    if (strict := tool.get("strict")) is not None:
        defined["strict"] = strict
    return defined
