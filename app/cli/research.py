"""`research`: one question answered by a bounded run of searches and pages read, its
progress on the terminal (stderr), its report on stdout (docs/research.md)."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import shutil
import signal
import sys
import time
from collections.abc import Iterator
from typing import TYPE_CHECKING, TextIO

from app import config
from app.cli.exits import EXIT_ERROR, EXIT_REFUSED
from app.cli.searching import searcher, searxng_url
from app.research.budget import Budget, Spent, most_cost, most_queries

if TYPE_CHECKING:
    from app.research.events import Event, ResearchResult
    from app.research.run import Research

EXIT_NOTHING_FOUND = 3


def research_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    command = commands.add_parser(
        "research",
        help="answer a question with a bounded research: a report citing the pages read",
        description="Plans searches, reads the best results, keeps quoted notes, writes a "
        "report from the notes only. Exit 0: a report (complete, or stopped by a bound); "
        "3: nothing found; 1: a failure. Ctrl-C stops and prints what was found.",
    )
    command.add_argument("query", metavar="QUESTION")
    command.add_argument("--locale", help="search locale (default: SEARCH_LOCALE)")
    command.add_argument(
        "--max-searches",
        type=int,
        help="searches at most (default RESEARCH_SEARCHES, 12)",
    )
    command.add_argument(
        "--max-pages",
        type=int,
        help="pages read at most (default RESEARCH_PAGES, 20)",
    )
    command.add_argument(
        "--max-minutes",
        type=float,
        help="minutes at most (default RESEARCH_MINUTES, 10)",
    )
    command.add_argument(
        "--dry-run",
        action="store_true",
        help="show what the budget may spend against the Brave plan, and run nothing",
    )
    command.add_argument("--json", action="store_true", help="print the result as one object")
    command.set_defaults(run=cmd_research)


def cmd_research(args: argparse.Namespace, settings: config.Settings) -> int:
    from app.research.budget import BudgetError

    try:
        asked = (args.max_searches, args.max_pages, args.max_minutes)
        budget = Budget.asked(settings.research, *asked).checked()
    except BudgetError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_REFUSED
    locale = config.check_locale(args.locale or settings.search_locale)
    if args.dry_run:
        with searxng_url(settings) as url:
            per_search = asyncio.run(queries_per_search(url, settings))
        return dry_run(budget, settings, per_search, as_json=args.json)
    with searxng_url(settings) as url:
        result = asyncio.run(researched(args.query, budget, locale, url, settings))
    return told(result, as_json=args.json)


async def researched(
    question: str, budget: Budget, locale: str, url: str, settings: config.Settings
) -> ResearchResult:
    from app.model.client import ModelClient
    from app.research.events import Finished
    from app.research.start import prepared

    progress = ProgressLine(sys.stderr, budget)
    ticking = asyncio.create_task(progress.ticking())
    client = ModelClient.from_settings(settings)
    try:
        async with searcher(url, settings) as searching:
            research = await prepared(
                question,
                budget,
                settings=settings,
                searcher=searching,
                client=client,
                locale=locale,
            )
            with stopped_by_ctrl_c(research):
                async with contextlib.aclosing(research.events()) as events:
                    async for event in events:
                        progress.show(event)
                        if isinstance(event, Finished):
                            return event.result
    finally:
        ticking.cancel()
        progress.done()
        await client.aclose()
    raise RuntimeError("a research ends with its result")


@contextlib.contextmanager
def stopped_by_ctrl_c(research: Research) -> Iterator[None]:
    """Ctrl-C stops the run (it ends with what it found); a second one is Python's own."""
    loop = asyncio.get_running_loop()

    def stop() -> None:
        research.stop.set()
        loop.remove_signal_handler(signal.SIGINT)

    try:
        loop.add_signal_handler(signal.SIGINT, stop)
    except (ValueError, RuntimeError):  # not the main thread (a test's in-process run)
        yield None
        return
    try:
        yield None
    finally:
        loop.remove_signal_handler(signal.SIGINT)


class ProgressLine:
    """The step and the counters against the budget on one line of a terminal, rewritten
    in place, its seconds every second (a slow model's step can take minutes); nothing
    when stderr is not a terminal (a pipe, a log)."""

    def __init__(self, stream: TextIO, budget: Budget) -> None:
        self.stream = stream
        self.live = stream.isatty()
        self.budget = budget
        self.spent = Spent()
        self.step = ""

    def show(self, event: Event) -> None:
        from app.research.events import Progress, StepStarted

        if isinstance(event, StepStarted):
            self.step = f"{event.step}: {event.about}" if event.about else event.step
        elif isinstance(event, Progress):
            self.spent, self.budget = event.spent, event.budget
        else:
            return
        self.render()

    def render(self) -> None:
        if not self.live:
            return
        budget, spent = self.budget, self.spent
        seconds = time.monotonic() - spent.started
        counters = (
            f"searches {spent.searches}/{budget.searches}  pages {spent.pages}/{budget.pages}"
            f"  {seconds:.0f}/{budget.minutes * 60:.0f} s  tokens {spent.tokens:,}/"
            f"{budget.tokens:,}"
        )
        # One column short of the terminal's width: a line that wraps is no longer rewritten.
        width = shutil.get_terminal_size().columns - 1
        self.stream.write(f"\r{f'{counters}  {self.step}'[:width]:<{width}}")
        self.stream.flush()

    async def ticking(self) -> None:
        while self.live:
            await asyncio.sleep(1)
            self.render()

    def done(self) -> None:
        if self.live:
            self.stream.write("\r" + " " * (shutil.get_terminal_size().columns - 1) + "\r")
            self.stream.flush()


def told(result: ResearchResult, *, as_json: bool) -> int:
    """The result on stdout (the report, or the JSON object), what went wrong on stderr;
    the exit status."""
    if as_json:
        print(json.dumps(result.as_dict(), ensure_ascii=False, indent=2))
    elif result.report:
        print(result.report, end="")
    if result.status == "failed":
        print(f"error: the research failed: {result.error}", file=sys.stderr)
        return EXIT_ERROR
    if result.status == "nothing_found":
        print(result.tried_text(), file=sys.stderr)
        return EXIT_NOTHING_FOUND
    return 0


async def queries_per_search(url: str, settings: config.Settings) -> int:
    """The Brave queries one of the run's searches sends, as the run would count them."""
    async with searcher(url, settings) as searching:
        return await searching.queries_per_search()


def dry_run(budget: Budget, settings: config.Settings, per_search: int, *, as_json: bool) -> int:
    """What the budget may spend against the Brave plan's queries left this month, each
    search sending `per_search` queries (SearXNG's default engines of ours)."""
    from app.search.plan import PlanReader, cost

    plan = PlanReader(settings.search_plan_file, settings.search_rate).read()
    left = plan.monthly_remaining if plan is not None else None
    price = settings.brave_price_per_1000
    queries = most_queries(budget, per_search)
    if as_json:
        shown = {
            "searches": budget.searches,
            "queries": queries,
            "pages": budget.pages,
            "minutes": budget.minutes,
            "monthly_remaining": left,
            "monthly_limit": plan.monthly_limit if plan is not None else None,
            "cost": most_cost(budget, price, per_search),
        }
        print(json.dumps(shown, indent=2))
        return 0
    if per_search == 1:
        print(f"searches: at most {budget.searches} Brave queries (fewer when cached)")
    else:
        print(
            f"searches: at most {budget.searches}, {queries} Brave queries ({per_search} a "
            "search: our engines among SearXNG's defaults; fewer when cached)"
        )
    if price:
        print(f"  about {cost(queries, price)} at {price:g} $ per 1,000 queries")
    if plan is None:
        print("  the Brave plan is not known yet: Brave states it in its first answer")
    elif left is None:
        print("  the Brave plan has no monthly cap")
    else:
        share = queries / max(1, left)
        print(f"  {left:,} of {plan.monthly_limit:,} queries left this month ({share:.1%})")
        if queries > left:
            print("  more than the queries left: the run will stop when they are spent")
    print(f"pages: at most {budget.pages} read")
    print(f"time: at most {budget.minutes:g} minutes")
    print("model tokens: the served window 4 times over (the model server is not asked now)")
    return 0
