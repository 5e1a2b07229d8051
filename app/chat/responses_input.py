"""The OpenAI Responses API's input as the chat messages the engine sends (docs/openai.md,
"The Responses API"): `instructions`, `input` as a string or items (messages, the model's
own earlier output items, `function_call_output`), and the client's function tools, each in
the shape Chat Completions gives it (app.chat.openai_wire). Names as the reference and the
SDK's `openai.types.responses` give them.

A client such as the Agents SDK sends the previous response's output items back as input:
a message, its `function_call` items, and our `web_search_call` and `reasoning` items,
which carry nothing the model needs again (the answer that used them is in the history)."""

from __future__ import annotations

from typing import Required

from typing_extensions import TypedDict

from app.chat.openai_wire import (
    ChatMessage,
    ContentPart,
    FunctionDefinition,
    FunctionTool,
    MessageToolCall,
    Role,
)
from app.errors import ServiceError

PASSED_OVER = frozenset({"web_search_call", "reasoning"})
"""Output items of ours a client sends back: dropped, as the reasoning of Chat Completions is."""
ROLES: dict[str, Role] = {
    "user": "user",
    "assistant": "assistant",
    "system": "system",
    "developer": "system",  # the only one local servers' chat templates know
}
TEXT_PARTS = frozenset({"input_text", "output_text", "text", "refusal"})


class InputPart(TypedDict, total=False):
    """A part of a message's content: input_text, output_text, input_image, refusal..."""

    type: Required[str]
    text: str
    refusal: str
    image_url: str | None
    detail: str


class InputItem(TypedDict, total=False):
    """One item of `input`: a message (its `type` may be left out), a `function_call` the
    model made, a `function_call_output` the client ran, or an output item of ours."""

    type: str
    role: str
    content: str | list[InputPart]
    call_id: str
    name: str
    arguments: str
    output: str | list[InputPart]


class ResponsesFunctionTool(TypedDict, total=False):
    """A client's function tool, as the Responses API declares it (flat, unlike Chat
    Completions')."""

    type: Required[str]
    name: str
    description: str | None
    parameters: dict[str, object] | None
    strict: bool | None


class UnusableInput(ServiceError):
    """An input item or tool this endpoint cannot use, naming it (OpenAI's `param`)."""

    status = 400

    def __init__(self, message: str, param: str) -> None:
        super().__init__(message)
        self.param = param


def messages_of(instructions: str | None, given: str | list[InputItem]) -> list[ChatMessage]:
    """The chat messages of a request: its instructions as a system message, then its input
    (the assistant's text and the function calls that followed it made one message)."""
    messages: list[ChatMessage] = (
        [{"role": "system", "content": instructions}] if instructions else []
    )
    if isinstance(given, str):
        return [*messages, {"role": "user", "content": given}]
    for index, item in enumerate(given):
        kind = item.get("type", "message")
        if kind == "function_call":
            calling(messages).append(function_call(item, f"input[{index}]"))
        elif kind == "function_call_output":
            messages.append(call_output(item, f"input[{index}]"))
        elif kind == "message":
            messages.append(message(item, f"input[{index}]"))
        elif kind not in PASSED_OVER:
            raise UnusableInput(
                f"input items of type {kind[:40]!r} are not supported here: send messages, "
                "function calls and function_call_output",
                f"input[{index}].type",
            )
    return messages


def message(item: InputItem, where: str) -> ChatMessage:
    role = ROLES.get(item.get("role", ""))
    if role is None:
        raise UnusableInput(
            f"{where}: a message's role is user, assistant, system or developer", f"{where}.role"
        )
    return {"role": role, "content": content(item.get("content", ""))}


def content(given: str | list[InputPart]) -> str | list[ContentPart]:
    """Text as one string (every chat template takes it); with an image, Chat Completions'
    parts."""
    if isinstance(given, str):
        return given
    if all(part["type"] in TEXT_PARTS for part in given):
        return "".join(part.get("text") or part.get("refusal") or "" for part in given)
    return [chat_part(part) for part in given]


def chat_part(part: InputPart) -> ContentPart:
    if part["type"] in TEXT_PARTS:
        return {"type": "text", "text": part.get("text") or part.get("refusal") or ""}
    if part["type"] == "input_image" and (url := part.get("image_url")):
        return {
            "type": "image_url",
            "image_url": {"url": url, "detail": part.get("detail", "auto")},
        }
    raise UnusableInput(
        f"content parts of type {part['type'][:40]!r} are not supported here", "input"
    )


def calling(messages: list[ChatMessage]) -> list[MessageToolCall]:
    """The tool calls of the assistant's last message, a new message when the last is not
    the assistant's."""
    last = messages[-1] if messages else None
    if last is None or last["role"] != "assistant":
        last = {"role": "assistant", "content": None}
        messages.append(last)
    return last.setdefault("tool_calls", [])


def function_call(item: InputItem, where: str) -> MessageToolCall:
    if "call_id" not in item or "name" not in item:
        raise UnusableInput(f"{where}: a function_call has a call_id and a name", where)
    return {
        "id": item["call_id"],
        "type": "function",
        "function": {"name": item["name"], "arguments": item.get("arguments", "")},
    }


def call_output(item: InputItem, where: str) -> ChatMessage:
    if "call_id" not in item:
        raise UnusableInput(
            f"{where}: a function_call_output names its call_id", f"{where}.call_id"
        )
    output = content(item.get("output", ""))
    return {"role": "tool", "tool_call_id": item["call_id"], "content": output}


def function_tools(tools: list[ResponsesFunctionTool]) -> list[FunctionTool]:
    """The client's function tools as Chat Completions declares them; OpenAI's own web
    search tool is ours already (searching is what this service does), and any other
    tool type is refused."""
    declared: list[FunctionTool] = []
    for index, tool in enumerate(tools):
        if tool["type"] in ("web_search", "web_search_preview"):
            continue
        if tool["type"] != "function" or not tool.get("name"):
            raise UnusableInput(
                f"tools of type {tool['type'][:40]!r} are not supported here: function tools "
                "and web_search only",
                f"tools[{index}]",
            )
        declared.append({"type": "function", "function": definition(tool)})
    return declared


def definition(tool: ResponsesFunctionTool) -> FunctionDefinition:
    """A function tool's name, description, parameters and strictness, as given."""
    defined: FunctionDefinition = {"name": tool.get("name", "")}
    if (description := tool.get("description")) is not None:
        defined["description"] = description
    if (parameters := tool.get("parameters")) is not None:
        defined["parameters"] = parameters
    if (strict := tool.get("strict")) is not None:
        defined["strict"] = strict
    return defined
