"""Our tools by hand: a search, a locale's measure, a page fetched, local files
extracted, each as the model (or an MCP client) would get it."""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from dataclasses import asdict
from pathlib import Path

from app import config
from app.chat.web_fetch import WEB_FETCH, page_text
from app.chat.web_search import WEB_SEARCH
from app.cli.exits import EXIT_ERROR, EXIT_REFUSED
from app.cli.searching import searcher, searxng_url
from app.cli.tools import tool_arguments
from app.search import lab


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


def cmd_measure_locale(args: argparse.Namespace, settings: config.Settings) -> int:
    """The search lab's measurement (app/search/lab.py), with its defaults and checks, as
    the page's lab and the MCP server's measure_locale run it."""

    async def run(url: str) -> lab.Measurement:
        async with searcher(url, settings) as client:
            return await lab.measurement(
                client,
                args.query,
                locales=args.locales or "",
                locale="",
                target=args.target or "",
                top=str(args.top),
                engines=args.engines or "",
                home=settings.search_locale,
            )

    try:
        with searxng_url(settings) as url:
            found = asyncio.run(run(url))
    except (lab.LabRefused, lab.UnknownEngine) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_REFUSED
    if args.json:
        print(json.dumps(asdict(found), ensure_ascii=False, indent=2))
        return 0
    target, rows = found.target, found.rows
    print(f"Results in '{target}' among the top {found.top} for {found.query!r}:\n")
    width = max(len("locale"), *(len(r.locale) for r in rows))
    print(f"| {'locale':<{width}} | in '{target}' |")
    print(f"|{'-' * (width + 2)}|{'-' * (len(target) + 8)}|")
    for r in rows:
        print(f"| {r.locale:<{width}} | {f'{r.in_target}/{r.total}':>{len(target) + 6}} |")
    return 0


def cmd_fetch(args: argparse.Namespace, settings: config.Settings) -> int:
    from app.pages.errors import FetchFailed, FetchRefused
    from app.pages.fetch import fetch_page

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
    from app.pages.extract import extract_file

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
