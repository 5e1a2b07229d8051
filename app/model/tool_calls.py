"""Tool calls as a stream brings them: assembled from ``tool_calls`` deltas, or parsed from
an answer that a model wrote as text instead (docs/architecture.md: adding a model-server
convention)."""

from __future__ import annotations

import json
import re
import secrets
from dataclasses import dataclass, field
from typing import Any

from app.model.wire import RequestBody, ServerObject


@dataclass
class ToolCall:
    """One call the model asked for; ``arguments`` is JSON text, as the model wrote it."""

    id: str
    name: str
    arguments: str = ""


@dataclass
class ToolCallAssembler:
    """Tool calls rebuilt from streamed deltas: keyed by ``index``, arguments in pieces."""

    calls: dict[int, ToolCall] = field(default_factory=dict)

    def add(self, delta: ServerObject) -> None:
        index = delta.get("index", len(self.calls))
        function = delta.get("function") or {}
        call = self.calls.get(index)
        if call is None:
            call = self.calls[index] = ToolCall(id=delta.get("id") or f"call_{index}", name="")
        if delta.get("id"):
            call.id = delta["id"]
        call.name += function.get("name") or ""
        call.arguments += function.get("arguments") or ""

    def result(self) -> list[ToolCall]:
        return [self.calls[i] for i in sorted(self.calls)]


# Wrappers models put around a tool call they write as text: Hermes / Qwen templates
# (<tool_call>...</tool_call>, vllm tool_parsers/hermes_tool_parser.py), Mistral
# ([TOOL_CALLS][...], mistral_tool_parser.py), Llama 3.x (<|python_tag|> and ";" between
# calls, llama_tool_parser.py), or a markdown code fence.
TEXT_CALL_OPENERS = ("<tool_call>", "[TOOL_CALLS]", "<|python_tag|>", "```json", "```")
TEXT_CALL_WRAPPERS = re.compile(r"</?tool_call>|\[TOOL_CALLS\]|<\|python_tag\|>")
TEXT_CALL_FENCE = re.compile(r"```(?:json)?\s*(.*?)\s*```", re.S)
HOLD_LIMIT = 4000
"""Characters of content held back at most while it may be a tool call written as text."""


def declared_tools(payload: RequestBody) -> frozenset[str]:
    return frozenset(
        tool.get("function", {}).get("name", "")
        for tool in payload.get("tools") or []
        if isinstance(tool, dict)
    )


def could_be_call(text: str) -> bool:
    """Whether content that starts like this may still turn out to be a JSON tool call."""
    rest = text.lstrip()
    for opener in TEXT_CALL_OPENERS:
        if opener.startswith(rest):
            return True
        if rest.startswith(opener):
            rest = rest[len(opener) :].lstrip()
            break
    if rest.startswith("["):
        rest = rest[1:].lstrip()
    if not rest:
        return True
    if rest[0] != "{":
        return False
    rest = rest[1:].lstrip()
    return not rest or rest[0] == '"'


def json_values(text: str) -> list[Any] | None:
    """Every JSON value in the text, lists flattened, separated by spaces, ";" or ","."""
    decoder = json.JSONDecoder()
    values: list[Any] = []
    at = 0
    while True:
        while at < len(text) and text[at] in " \t\r\n;,":
            at += 1
        if at == len(text):
            return values
        try:
            value, at = decoder.raw_decode(text, at)
        except ValueError:
            return None
        values.extend(value if isinstance(value, list) else [value])


def text_call(value: Any, declared: frozenset[str]) -> ToolCall | None:
    """{"name": ..., "arguments" or "parameters": {...}}, bare or under "function"."""
    if not isinstance(value, dict):
        return None
    function = value["function"] if isinstance(value.get("function"), dict) else value
    name = function.get("name")
    arguments = function.get("arguments", function.get("parameters", {}))
    if name not in declared:
        return None
    if isinstance(arguments, dict):
        arguments = json.dumps(arguments, ensure_ascii=False)
    if not isinstance(arguments, str):
        return None
    return ToolCall(id=f"call_{secrets.token_hex(6)}", name=name, arguments=arguments)


def parse_text_calls(text: str, declared: frozenset[str]) -> list[ToolCall]:
    """The tool calls a whole answer consists of, or none when it is anything else."""
    body = TEXT_CALL_WRAPPERS.sub(" ", text).strip()
    if fenced := TEXT_CALL_FENCE.fullmatch(body):
        body = fenced.group(1)
    values = json_values(body)
    calls = [text_call(value, declared) for value in values or []]
    return [c for c in calls if c is not None] if calls and None not in calls else []


@dataclass
class TextToolCalls:
    """Content held back while it may be a tool call the model wrote as text instead of as
    ``tool_calls`` (small models do, on Ollama and vLLM without a matching tool parser).
    Only when tools were declared; an answer that starts like prose is never held."""

    declared: frozenset[str]
    held: str = ""
    holding: bool = True
    raw: str = ""
    """The text the calls were parsed from, once found."""

    def feed(self, text: str) -> str:
        """The content to show now: nothing while it may still be a call."""
        if not self.declared or not self.holding:
            return text
        self.held += text
        if len(self.held) <= HOLD_LIMIT and could_be_call(self.held):
            return ""
        self.holding = False
        return self.release()

    def finish(self, *, parse: bool) -> tuple[str, list[ToolCall]]:
        """At the stream's end: the calls the held content is, or the content to show."""
        calls = parse_text_calls(self.held, self.declared) if parse and self.held else []
        if calls:
            self.raw = self.release()
            return "", calls
        return self.release(), []

    def release(self) -> str:
        held, self.held = self.held, ""
        return held
