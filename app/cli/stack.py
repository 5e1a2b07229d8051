"""The stack's commands: the embedded SearXNG run on its own or its settings written, and
`doctor`, which checks every part and says what to fix."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import signal
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from app import config
from app.cli.exits import EXIT_ERROR
from app.cli.searching import counted, searxng_url

if TYPE_CHECKING:
    from app.doctor.check import Check


def cmd_searxng(args: argparse.Namespace, settings: config.Settings) -> int:
    from app.search import embedded

    if args.install_only:
        embedded.ensure_venv(settings.searxng_venv)
        print(f"SearXNG is installed in {settings.searxng_venv}")
        return 0
    locale = config.check_locale(args.locale or settings.search_locale)
    with embedded.EmbeddedSearxng(locale, settings=settings, port=args.port) as running:
        print(f"SearXNG with the {config.ENGINE_NAME} engine at {running.url} (locale {locale})")
        print(f"use it with: SEARXNG_URL={running.url}   stop with Ctrl-C", flush=True)
        signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
        with contextlib.suppress(KeyboardInterrupt):
            running.wait()
    return 0


def cmd_searxng_settings(args: argparse.Namespace, settings: config.Settings) -> int:
    from app.search import embedded

    locale = config.check_locale(args.locale or settings.search_locale)
    # A plain-http BRAVE_API_URL (a proxy, a fake) needs the engine's enable_http.
    http = settings.brave_api_url.startswith("http://")
    path = embedded.write_settings(Path(args.directory), locale, allow_http_engine=http)
    print(f"wrote {path} (default_lang {locale})")
    return 0


def stored_plan_check(settings: config.Settings) -> Check:
    """For the command line: the plan file and DATA_DIR's count, never created."""
    from app.doctor.searxng import plan_check
    from app.search.plan import PlanReader
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
    return plan_check(plan, spent, settings.search_rate, settings.brave_price_per_1000)


def cmd_doctor(args: argparse.Namespace, settings: config.Settings) -> int:
    from app.doctor.access import token_check
    from app.doctor.model import model_checks
    from app.doctor.searxng import searxng_checks
    from app.search.plan import PlanReader
    from app.store.database import reach

    async def run(url: str) -> list[Check]:
        plan = PlanReader(settings.search_plan_file, settings.search_rate)
        searxng = await searxng_checks(url, plan, counted(settings))
        return [*searxng, stored_plan_check(settings), *await model_checks(settings)]

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
