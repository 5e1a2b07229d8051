"""Our tools' arguments on the command line (web_search is `search`, web_fetch `fetch`), as
the model and MCP clients read them and checked as the tool checks a model's."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from app.chat.tool import Arguments, Tool


def tool_command(
    commands: argparse._SubParsersAction[argparse.ArgumentParser], tool: Tool[Any], summary: str
) -> argparse.ArgumentParser:
    """The command of one of our tools (web_search is `search`): its arguments as the model
    and MCP clients read them, a required one positional, the others as options."""
    command = commands.add_parser(
        tool.name.removeprefix("web_"), help=summary, description=tool.description
    )
    required = set(tool.parameters.get("required", []))
    for name, spec in tool.parameters["properties"].items():
        shape = next(s for s in spec.get("anyOf", [spec]) if s.get("type") != "null")
        command.add_argument(
            name if name in required else f"--{name.replace('_', '-')}",
            type=int if shape.get("type") == "integer" else str,
            choices=shape.get("enum"),
            help=spec.get("description"),
        )
    return command


def tool_arguments(tool: Tool[Arguments], args: argparse.Namespace) -> Arguments:
    """The command's arguments checked as the tool checks a model's, each named as its
    option; exit 2 if wrong."""
    given = {name: getattr(args, name) for name in tool.arguments.model_fields}
    parsed = tool.parse({name: value for name, value in given.items() if value is not None})
    if isinstance(parsed, str):
        for name in given:
            parsed = parsed.replace(f"'{name}'", f"--{name.replace('_', '-')}")
        print(f"error: {parsed}", file=sys.stderr)
        raise SystemExit(2)
    return parsed
