"""`python -m app`: the parser (parser.py) and the commands, one module per purpose. Each
command imports what only it needs when it runs: `--help` and the quick commands start
without the web stack, the extractor or the language model."""

from __future__ import annotations

import sys
from pathlib import Path

from dotenv import load_dotenv

from app import config
from app.cli.exits import EXIT_ERROR, Command
from app.cli.parser import parser


def one_line_errors() -> tuple[type[Exception], ...]:
    """What a command reports as one line, not a traceback. Imported once a command has
    failed: the modules that raise them are loaded by then, and no command pays at start
    for another's."""
    from app.search.client import SearchError
    from app.search.embedded import SearxngError
    from app.store.errors import Unavailable

    return config.ConfigError, SearchError, SearxngError, Unavailable


def main(argv: list[str] | None = None) -> int:
    load_dotenv(Path.cwd() / ".env")  # like Compose; the environment wins over the file
    args = parser().parse_args(argv)
    if getattr(args, "query", "x").strip() == "":
        print("error: the query is empty", file=sys.stderr)
        return 2
    if getattr(args, "top", 1) < 1:
        print("error: --top must be at least 1", file=sys.stderr)
        return 2
    command: Command = args.run
    try:
        return command(args, config.load())
    except one_line_errors() as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_ERROR
