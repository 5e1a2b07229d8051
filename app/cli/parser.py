"""The command line: ``python -m app <command>``. Each command is useful on its own."""

from __future__ import annotations

import argparse

from app.chat.web_fetch import WEB_FETCH
from app.chat.web_search import WEB_SEARCH
from app.cli.conversations import cmd_export, cmd_migrate_db
from app.cli.research import research_parser
from app.cli.serve import cmd_mcp, cmd_serve
from app.cli.stack import cmd_doctor, cmd_searxng, cmd_searxng_settings
from app.cli.tools import tool_command
from app.cli.users import users_parser
from app.cli.web import cmd_extract, cmd_fetch, cmd_measure_locale, cmd_search
from app.search.lab import MAX_TOP


def parser() -> argparse.ArgumentParser:
    top = argparse.ArgumentParser(prog="python -m app", description=__doc__)
    commands = top.add_subparsers(dest="command", required=True, metavar="COMMAND")

    serve = commands.add_parser("serve", help="run the chat service")
    serve.add_argument("--host", default="127.0.0.1", help="address (default 127.0.0.1)")
    serve.add_argument("--port", type=int, default=8080, help="port (default 8080)")
    serve.set_defaults(run=cmd_serve)

    search = tool_command(commands, WEB_SEARCH, "run a query through SearXNG, print results")
    search.add_argument("--json", action="store_true", help="print a JSON list of results")
    search.set_defaults(run=cmd_search)

    measure = commands.add_parser(
        "measure-locale", help="count results in a language, locale by locale"
    )
    measure.add_argument("query")
    measure.add_argument("--locales", help="comma list (default: all,<lang>,SEARCH_LOCALE)")
    measure.add_argument(
        "--target", help="language to count (default: the last locale's, else SEARCH_LOCALE's)"
    )
    measure.add_argument(
        "--top", type=int, default=20, help=f"results per locale (default 20, at most {MAX_TOP})"
    )
    measure.add_argument("--engines", help="comma list of SearXNG engine names")
    measure.add_argument("--json", action="store_true", help="print the measurement as JSON")
    measure.set_defaults(run=cmd_measure_locale)

    run = commands.add_parser("searxng", help="run the embedded SearXNG until Ctrl-C")
    run.add_argument("--locale", help="default language (default: SEARCH_LOCALE)")
    run.add_argument("--port", type=int, default=8888, help="loopback port (default 8888)")
    run.add_argument(
        "--install-only",
        action="store_true",
        help="install SEARXNG_VENV from its lock if it is not there yet, then exit",
    )
    run.set_defaults(run=cmd_searxng)

    server = commands.add_parser(
        "mcp", help="the MCP server (web_search, web_fetch, measure_locale) on stdio"
    )
    server.set_defaults(run=cmd_mcp)

    research_parser(commands)

    fetch = tool_command(commands, WEB_FETCH, "a page as web_fetch hands it to the model")
    fetch.add_argument("--json", action="store_true", help="print the page as JSON")
    fetch.set_defaults(run=cmd_fetch)

    extract = commands.add_parser("extract", help="main text of local .html / .html.gz files")
    extract.add_argument("files", nargs="+", metavar="FILE")
    extract.add_argument(
        "--json", action="store_true", help="print {FILE: {title, text, chars, charset}}"
    )
    extract.set_defaults(run=cmd_extract)

    export = commands.add_parser(
        "export", help="print conversations as Markdown or JSON, without the service"
    )
    which = export.add_mutually_exclusive_group(required=True)
    which.add_argument("id", nargs="?", help="a conversation id (see the page's address)")
    which.add_argument("--all", action="store_true", help="every conversation, oldest first")
    export.add_argument("--json", action="store_true", help="JSON as the API serves it")
    export.set_defaults(run=cmd_export)

    migrate_parser(commands)
    users_parser(commands)

    check = commands.add_parser("doctor", help="check every part of the stack, say what to fix")
    check.set_defaults(run=cmd_doctor)

    render = commands.add_parser(
        "searxng-settings", help="write SearXNG's settings for SEARCH_LOCALE into a directory"
    )
    render.add_argument("directory")
    render.add_argument("--locale", help="default language (default: SEARCH_LOCALE)")
    render.set_defaults(run=cmd_searxng_settings)
    return top


def migrate_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    migrate = commands.add_parser(
        "migrate-db", help="copy every conversation to another database, verified"
    )
    migrate.add_argument(
        "--to", required=True, metavar="URL", help="postgresql://..., sqlite:///FILE or a path"
    )
    migrate.add_argument(
        "--from", dest="source", metavar="URL", help="default: DATABASE_URL, else DATA_DIR's"
    )
    migrate.add_argument("--replace", action="store_true", help="replace what the target holds")
    migrate.set_defaults(run=cmd_migrate_db)
