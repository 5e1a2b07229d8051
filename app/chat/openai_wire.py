"""The OpenAI Chat Completions shapes a /v1 request carries, as the chat layer reads them
(names as OpenAI's reference and its SDK's `openai.types.chat` give them): the client's
messages, their content parts and tool calls, and the client's function tools.

A message, a part or a tool may carry fields not named here (a server's `cache_control`,
a tool's `strict`...): they are validated as extra fields by the web layer's body
(extra="allow") and stay in the value, passed on to the model server as sent. The types
come from typing_extensions: pydantic reads them on Python 3.11 only from there."""

from __future__ import annotations

from typing import Annotated, Literal, Required

from annotated_types import Len
from typing_extensions import TypedDict

from app.model.tool_calls import ToolCall

Role = Literal["system", "developer", "user", "assistant", "tool", "function"]

PassedOn = dict[str, object]
"""The fields of a request that are the model server's own (temperature, stop, seed, and
whatever a server adds): unknown to us by design, passed through as the client sent them,
hence open."""


class ImageUrl(TypedDict, total=False):
    url: Required[str]
    detail: str


class ContentPart(TypedDict, total=False):
    """One part of a message's content: text, image_url, input_audio, file..."""

    type: Required[str]
    text: str
    image_url: ImageUrl


class FunctionCall(TypedDict):
    name: str
    arguments: str
    """JSON, as the model wrote it (not necessarily valid)."""


class MessageToolCall(TypedDict):
    """A function call of an assistant message (ChatCompletionMessageToolCall)."""

    id: str
    type: Literal["function"]
    function: FunctionCall


class ChatMessage(TypedDict, total=False):
    """One message of the conversation sent to the model (ChatCompletionMessageParam)."""

    role: Required[Role]
    content: str | list[ContentPart] | None
    name: str
    tool_calls: list[MessageToolCall]
    tool_call_id: str


class FunctionDefinition(TypedDict, total=False):
    name: Required[Annotated[str, Len(1, 64)]]
    """1 to 64 characters, as OpenAI's; the request's schema says so (a validator would
    refuse what the published schema allows)."""
    description: str
    parameters: dict[str, object]
    """A JSON Schema, the client's."""
    strict: bool | None


class FunctionTool(TypedDict):
    """A client's function tool (ChatCompletionFunctionToolParam)."""

    type: Literal["function"]
    function: FunctionDefinition


def tool_call_object(call: ToolCall) -> MessageToolCall:
    return {
        "id": call.id,
        "type": "function",
        "function": {"name": call.name, "arguments": call.arguments},
    }


def assistant_tool_message(text: str, calls: list[ToolCall]) -> ChatMessage:
    """The assistant's message of a tool exchange, as app.chat.turn sends it too."""
    return {
        "role": "assistant",
        "content": text or None,
        "tool_calls": [tool_call_object(c) for c in calls],
    }
