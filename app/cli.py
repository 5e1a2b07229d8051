"""The command line: ``python -m app <command>``. Each command is useful on its own."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import gc
import importlib
import json
import logging
import signal
import sys
from collections.abc import Callable, Iterator
from dataclasses import asdict
from pathlib import Path
from typing import Any

from dotenv import load_dotenv

from app import config
from app.chat.tool import Arguments, Tool
from app.chat.web_fetch import WEB_FETCH, page_text
from app.chat.web_search import WEB_SEARCH
from app.doctor.access import token_check
from app.doctor.check import Check
from app.doctor.model import model_checks
from app.doctor.searxng import plan_check, searxng_checks
from app.pages import addresses
from app.pages.errors import FetchFailed, FetchRefused
from app.pages.extract import extract_file
from app.pages.fetch import fetch_page
from app.search import embedded, language
from app.search.client import Counter, SearchError, Searxng
from app.search.plan import PlanReader
from app.search.searcher import Searcher
from app.store.errors import Unavailable

Command = Callable[[argparse.Namespace, config.Settings], int]
"""A subcommand: its parsed arguments and the settings in, the exit status out."""

EXIT_ERROR = 1
EXIT_REFUSED = 2
# Modules that libraries import at their first use, imported at start instead: mid-stream,
# each import is 5-20 ms with the event loop held (httpx's own transport, the fetcher's; the
# asyncio backend of anyio, for the first storage call; the IDNA codec, for the first
# lookup of a name).
PRELOADED = ("httpcore", "anyio._backends._asyncio", "encodings.idna")


@contextlib.contextmanager
def searxng_url(settings: config.Settings, *, supervise: bool = False) -> Iterator[str]:
    """SEARXNG_URL when set, else an embedded SearXNG for the command's duration."""
    if settings.searxng_url:
        yield settings.searxng_url
        return
    with embedded.EmbeddedSearxng(
        settings.search_locale, settings=settings, supervise=supervise
    ) as running:
        yield running.url


def counted(settings: config.Settings) -> Counter:
    """A command's searches counted in DATA_DIR's chat.db, as the service counts its own
    (once the service has made it: a command creates no data directory)."""
    from app.store.database import Database, stored

    def count_in() -> None:
        if (path := stored(settings.data_dir, settings.database_url)) is not None:
            database = Database(path)
            try:
                database.count_search()
            finally:
                database.close()

    async def count() -> None:
        await asyncio.to_thread(count_in)

    return count


def stored_plan_check(settings: config.Settings) -> Check:
    """For the command line: the plan file and DATA_DIR's count, never created."""
    from app.store.database import Database, stored
    from app.store.searches import SearchesSpent

    path = stored(settings.data_dir, settings.database_url)
    spent = SearchesSpent(0, 0)
    if path is not None:
        database = Database(path)
        try:
            spent = database.searches_spent()
        finally:
            database.close()
    plan = PlanReader(settings.search_plan_file).read()
    return plan_check(plan, spent, settings.search_rate)


def searcher(url: str, settings: config.Settings) -> Searcher:
    """The service's way of searching, for a command: paced to the Brave plan's rate (or
    SEARCH_RATE), retried once when rate-limited, counted with the service's searches;
    without the cache: a command asks SearXNG every time. Its governor is local to the
    command's process (no store): a command makes one search and has no storage thread
    to share the turn through. Should its one query and a service's meet within Brave's
    second, the 429 is retried once after the reset (Searcher)."""
    plan = PlanReader(settings.search_plan_file, settings.search_rate)
    client = Searxng(url, timeout=settings.searxng_timeout, plan=plan, count=counted(settings))
    return Searcher.of_plan(client, plan)


def cmd_search(args: argparse.Namespace, settings: config.Settings) -> int:
    arguments = tool_arguments(WEB_SEARCH, args)
    locale = config.check_locale(arguments.locale or settings.search_locale)

    async def run(url: str) -> int:
        async with searcher(url, settings) as client:
            response = await client.search(
                arguments.query,
                locale=locale,
                engines=arguments.engines,
                page=arguments.page,
                time_range=arguments.time_range,
            )
        if args.json:
            print(json.dumps([r.as_dict() for r in response.results], ensure_ascii=False, indent=2))
        else:
            for r in response.results:
                print(f"{r.day or '----------'}  {r.title}\n  {r.url}")
                print(f"  {r.content}\n")
        for line in response.engine_errors:
            print(f"error: engine failed: {line}", file=sys.stderr)
        if response.unavailable:
            print(f"error: {response.unavailable}", file=sys.stderr)
        return EXIT_ERROR if response.engine_errors else 0

    with searxng_url(settings) as url:
        return asyncio.run(run(url))


def default_locales(settings: config.Settings) -> str:
    locales = language.default_locales(settings.search_locale)
    if not locales:
        raise config.ConfigError(
            "give --locales (e.g. all,pl,pl-PL): SEARCH_LOCALE is not set to a language"
        )
    return ",".join(locales)


def cmd_measure_locale(args: argparse.Namespace, settings: config.Settings) -> int:
    locales = [
        config.check_locale(item.strip())
        for item in (args.locales or default_locales(settings)).split(",")
        if item.strip()
    ]
    target = args.target or language.language_of(locales[-1])
    if target in ("all", "auto"):
        raise config.ConfigError("give --target: the last locale names no language")

    async def run(url: str) -> list[language.LocaleRow]:
        async with searcher(url, settings) as client:
            return await language.measure(
                client, args.query, locales, target, args.top, args.engines
            )

    with searxng_url(settings) as url:
        rows = asyncio.run(run(url))
    if args.json:
        report = {"query": args.query, "target": target, "top": args.top, "rows": rows}
        print(json.dumps(report, default=vars, ensure_ascii=False, indent=2))
        return 0
    print(f"Results in '{target}' among the top {args.top} for {args.query!r}:\n")
    width = max(len("locale"), *(len(r.locale) for r in rows))
    print(f"| {'locale':<{width}} | in '{target}' |")
    print(f"|{'-' * (width + 2)}|{'-' * (len(target) + 8)}|")
    for r in rows:
        print(f"| {r.locale:<{width}} | {f'{r.in_target}/{r.total}':>{len(target) + 6}} |")
    return 0


def cmd_searxng(args: argparse.Namespace, settings: config.Settings) -> int:
    locale = config.check_locale(args.locale or settings.search_locale)
    with embedded.EmbeddedSearxng(locale, settings=settings, port=args.port) as running:
        print(f"SearXNG with the {config.ENGINE_NAME} engine at {running.url} (locale {locale})")
        print(f"use it with: SEARXNG_URL={running.url}   stop with Ctrl-C", flush=True)
        signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
        with contextlib.suppress(KeyboardInterrupt):
            running.wait()
    return 0


def cmd_searxng_settings(args: argparse.Namespace, settings: config.Settings) -> int:
    locale = config.check_locale(args.locale or settings.search_locale)
    # A plain-http BRAVE_API_URL (a proxy, a fake) needs the engine's enable_http.
    http = settings.brave_api_url.startswith("http://")
    path = embedded.write_settings(Path(args.directory), locale, allow_http_engine=http)
    print(f"wrote {path} (default_lang {locale})")
    return 0


def compose_token(settings: config.Settings, host: str) -> str:
    """The token for a service that listens beyond loopback without AUTH_TOKEN: under
    Compose (PUBLISHED_ON_LOOPBACK), the one kept in DATA_DIR, made at first start and
    shown then; anywhere else, none: the user must choose."""
    from app.store.files import TOKEN_FILE, stored_token

    if not settings.published_on_loopback:
        raise config.ConfigError(
            f"refusing to serve on {host} without AUTH_TOKEN: anyone on that network "
            "could use your model and search; set AUTH_TOKEN or bind 127.0.0.1"
        )
    token, made = stored_token(settings.data_dir)
    path = settings.data_dir / TOKEN_FILE
    if not token:  # else the service would serve with no token at all
        raise config.ConfigError(f"{path} is empty: delete it, and the next start makes one")
    if made:
        print(
            f"No AUTH_TOKEN set: made an access token, kept in {path} (shown this once; "
            f"`python -m app doctor` shows it again). The page asks for it:\n  {token}",
            flush=True,
        )
    else:
        print(f"No AUTH_TOKEN set: the page and the API ask for the token in {path}", flush=True)
    return token


def cmd_serve(args: argparse.Namespace, settings: config.Settings) -> int:
    # Imported here: the web stack is only needed by serve, and every other command
    # starts faster without it.
    from app.api import serving
    from app.api.factory import create_app

    if not config.is_loopback(args.host) and not settings.auth_token:
        settings = dataclasses.replace(settings, auth_token=compose_token(settings, args.host))
    for entry in sorted(settings.fetch_allow_hosts):
        if addresses.names_this_service(entry, args.host, args.port):
            raise config.ConfigError(
                f"FETCH_ALLOW_HOSTS names this service itself ({entry}): through web_fetch "
                "the model could read your conversations; remove it"
            )
    logging.basicConfig(level=settings.log_level, format="%(levelname)s %(name)s: %(message)s")
    # A line per request (to the model server and SearXNG, and uvicorn's own per request)
    # only when debugging: the turns have their own lines, and each line costs CPU.
    debug = settings.log_level == "DEBUG"
    if not debug:
        logging.getLogger("httpx").setLevel(logging.WARNING)
    # uvicorn re-raises the signal it stopped on; exiting cleanly lets the embedded
    # SearXNG be stopped and its files removed.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    from app.store.database import reach

    reach(settings.database_url)
    with searxng_url(settings, supervise=True) as url:
        print(f"SearXNG: {url}; model server: {settings.llm_base_url}", flush=True)
        app = create_app(settings, url)
        for module in PRELOADED:
            importlib.import_module(module)
        # What start-up built lives as long as the process: out of the collector's sight,
        # full collections stop walking it, which they would do mid-stream.
        gc.freeze()
        options = {"log_level": "info", "access_log": debug, "loop": "uvloop"}
        serving.run(serving.server_config(app, settings, args.host, args.port, **options))
    return 0


def cmd_mcp(args: argparse.Namespace, settings: config.Settings) -> int:
    """The MCP server on stdio, for Claude Desktop, LM Studio and editors. stdout is the
    protocol: the log goes to stderr, SearXNG's to its own file."""
    from app.mcp.server import serve_stdio

    logging.basicConfig(
        level=settings.log_level, stream=sys.stderr, format="%(levelname)s %(name)s: %(message)s"
    )
    logging.getLogger("httpx").setLevel(logging.WARNING)
    # A client stops its server with SIGTERM: exiting cleanly stops the embedded SearXNG.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    with searxng_url(settings) as url:
        logging.getLogger(__name__).info("MCP server on stdio; SearXNG: %s", url)
        asyncio.run(serve_stdio(settings, searcher(url, settings)))
    return 0


def cmd_fetch(args: argparse.Namespace, settings: config.Settings) -> int:
    arguments = tool_arguments(WEB_FETCH, args)
    limit = settings.fetch_max_tokens
    try:
        page = asyncio.run(
            fetch_page(
                arguments.url,
                allow_hosts=settings.fetch_allow_hosts,
                timeout=settings.fetch_timeout,
            )
        )
    except FetchRefused as exc:
        print(f"refused: {exc}", file=sys.stderr)
        return EXIT_REFUSED
    except FetchFailed as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_ERROR
    text = page_text(page, arguments.start, min(arguments.max_tokens or limit, limit))
    if args.json:
        print(json.dumps({**asdict(page), "for_model": text}, ensure_ascii=False, indent=2))
    else:
        print(text)
    return 0


def cmd_extract(args: argparse.Namespace, settings: config.Settings) -> int:
    results = {}
    for name in args.files:
        try:
            extracted = extract_file(Path(name))
        except (OSError, ValueError) as exc:
            print(f"error: {name}: {exc}", file=sys.stderr)
            return EXIT_ERROR
        results[name] = extracted.as_dict()
    if args.json:
        print(json.dumps(results, ensure_ascii=False))
    else:
        for name, result in results.items():
            print(f"== {name}: {result['title']} ({result['chars']} chars)\n{result['text']}\n")
    return 0


def cmd_doctor(args: argparse.Namespace, settings: config.Settings) -> int:
    async def run(url: str) -> list[Check]:
        plan = PlanReader(settings.search_plan_file, settings.search_rate)
        searxng = await searxng_checks(url, plan, counted(settings))
        return [*searxng, stored_plan_check(settings), *await model_checks(settings)]

    from app.store.database import reach

    reach(settings.database_url)  # every check below reads the database
    with searxng_url(settings) as url:
        checks = asyncio.run(run(url))
    if token := token_check(settings):
        checks.append(token)
    labels = {"ok": "ok  ", "warning": "warn", "fail": "FAIL"}
    for check in checks:
        print(f"{labels[check.state]}  {check.name}: {check.detail}")
        if check.state != "ok" and check.fix:
            print(f"      fix: {check.fix}")
    return 0 if all(check.ok for check in checks) else EXIT_ERROR


def cmd_export(args: argparse.Namespace, settings: config.Settings) -> int:
    from app.store.database import DATABASE, Database, stored
    from app.store.errors import Damaged, InvalidId, NotFound
    from app.store.export import markdown

    path = stored(settings.data_dir, settings.database_url)
    if path is None:
        missing = settings.data_dir / DATABASE
        print(
            f"error: no conversations here: {missing} does not exist (DATA_DIR?)", file=sys.stderr
        )
        return EXIT_ERROR
    database = Database(path)
    wanted = database.ids() if args.all else [args.id]
    exported, status = [], 0
    for conversation_id in wanted:
        try:
            exported.append(database.load(conversation_id))
        except (NotFound, InvalidId, Damaged) as exc:
            print(f"error: {exc}", file=sys.stderr)
            status = EXIT_ERROR
    database.close()
    if not exported and not args.all:
        return status
    if args.json:
        print(json.dumps(exported if args.all else exported[0], ensure_ascii=False, indent=1))
    else:
        print("\n---\n\n".join(markdown(c) for c in exported), end="")
    return status


def cmd_migrate_db(args: argparse.Namespace, settings: config.Settings) -> int:
    from app.store import transfer
    from app.store.database import DATABASE

    try:
        configured = settings.database_url or str(settings.data_dir / DATABASE)
        source = transfer.location(args.source or configured)
        report = transfer.migrate(source, transfer.location(args.to), replace=args.replace)
    except transfer.TransferRefused as exc:
        print(f"refused: {exc}", file=sys.stderr)
        return EXIT_REFUSED
    except transfer.TransferFailed as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_ERROR
    print("\n".join(report.lines()))
    return 0


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
    measure.add_argument("--target", help="language to count (default: the last locale's)")
    measure.add_argument("--top", type=int, default=20, help="results per locale (default 20)")
    measure.add_argument("--engines", help="comma list of SearXNG engine names")
    measure.add_argument("--json", action="store_true", help="print the measurement as JSON")
    measure.set_defaults(run=cmd_measure_locale)

    run = commands.add_parser("searxng", help="run the embedded SearXNG until Ctrl-C")
    run.add_argument("--locale", help="default language (default: SEARCH_LOCALE)")
    run.add_argument("--port", type=int, default=8888, help="loopback port (default 8888)")
    run.set_defaults(run=cmd_searxng)

    server = commands.add_parser(
        "mcp", help="the MCP server (web_search, web_fetch, measure_locale) on stdio"
    )
    server.set_defaults(run=cmd_mcp)

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

    check = commands.add_parser("doctor", help="check every part of the stack, say what to fix")
    check.set_defaults(run=cmd_doctor)

    render = commands.add_parser(
        "searxng-settings", help="write SearXNG's settings for SEARCH_LOCALE into a directory"
    )
    render.add_argument("directory")
    render.add_argument("--locale", help="default language (default: SEARCH_LOCALE)")
    render.set_defaults(run=cmd_searxng_settings)
    return top


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
    except (config.ConfigError, SearchError, embedded.SearxngError, Unavailable) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_ERROR
