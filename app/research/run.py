"""A research run, step by step: the plan, rounds of searches and pages read (each page's
notes), a reflection after each round, the report. Searches and reads go through the
registry's web_search and web_fetch in a ToolRunner, as the model's own calls do: the one
Searcher (paced to the plan, the cache first, the locale), the safe fetcher, and its rule
that only an address from a search result or from the question is read. The run itself
picks the addresses (search results, in their rank); the model only writes text.

    async with aclosing(research.events()) as events:
        async for event in events:
            ...  # the last one is Finished(result)

Every wait goes through `bounded`: Stop (the `stop` event) and the minutes bound end the
gathering there, and the report is written from what was found."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
from collections.abc import AsyncGenerator, Awaitable, Callable, Coroutine, Mapping
from dataclasses import dataclass, field
from datetime import date
from typing import Any, TypeVar, cast

from app.chat.context import completion_reserve, estimate_tokens
from app.chat.events import Source
from app.chat.tools import ToolRunner
from app.errors import ServiceError
from app.model.tool_calls import ToolCall
from app.research.budget import Bound, Budget, Spent
from app.research.events import (
    Event,
    Finished,
    Found,
    FoundPage,
    Noted,
    PageRead,
    Planned,
    Progress,
    Reported,
    ResearchResult,
    Searched,
    SourceView,
    Status,
    StepStarted,
    Tried,
)
from app.research.notes import (
    PROMPT_MARGIN_TOKENS,
    Note,
    PageNotes,
    fitted_text,
    kept_notes,
    notes_messages,
)
from app.research.plan import (
    ENGLISH,
    PlannedQuery,
    Reflection,
    ResearchPlan,
    plan_messages,
    reflect_messages,
)
from app.research.report import (
    Cited,
    cited_only,
    finished,
    found_text,
    not_found,
    report_messages,
    whole_sentences,
)
from app.research.writer import Writer
from app.webtext import untrusted

logger = logging.getLogger(__name__)

T = TypeVar("T")
Approval = Callable[[ResearchPlan], Awaitable[ResearchPlan]]
"""Shown the plan before any search: the plan to run (edited, or as it was)."""

READS_PER_SEARCH = 3
"""The results of each search read, in their rank, at once (the fetcher has no rate)."""
PAGE_MIN_TOKENS = 128
NOTES_PROMPT_TOKENS = 512
"""The notes' request beside the page: its instructions, the question, the sub-questions."""
STEP_TOKENS = 1024
"""The reply's share of a structured step (a plan, a page's notes, a reflection), at most
a quarter of the window."""


class Halted(Exception):
    """The gathering ends here: a bound reached, or Stop."""

    def __init__(self, bound: Bound, why: str = "") -> None:
        super().__init__(why or str(bound))
        self.bound = bound
        self.why = why


@dataclass
class Research:
    question: str
    budget: Budget
    writer: Writer
    runner: ToolRunner
    """web_search and web_fetch, with their uses left set from the budget."""
    window: int
    """The model's served window (or the assumed one), which every request fits."""
    max_completion_tokens: int
    stop: asyncio.Event = field(default_factory=asyncio.Event)
    approve: Approval | None = None
    """Waited for after the plan, before any search (the page's plan editor); the wait is
    no part of the run's minutes. Stop ends it as it ends any step."""
    today: date = field(default_factory=date.today)
    plan: ResearchPlan | None = None
    notes: list[Note] = field(default_factory=list)
    tried: Tried = field(default_factory=Tried)
    read: list[int] = field(default_factory=list)
    """The runner's numbers of the pages read, in order."""
    cited: list[int] = field(default_factory=list)
    """The runner's numbers of the pages read with a note: the report's [1], [2]..."""
    stopped_by: Bound | None = None
    cut_short: str | None = None

    @property
    def spent(self) -> Spent:
        return self.writer.spent

    async def events(self) -> AsyncGenerator[Event, None]:
        """The run's events; the last is Finished with the result."""
        yield StepStarted("plan", self.question)
        try:
            self.plan = await self.bounded(
                self.writer.structured(
                    "plan",
                    plan_messages(self.question, self.runner.locale, self.today),
                    ResearchPlan,
                    self.step_tokens,
                )
            )
            yield Planned(self.plan)
            if self.approve is not None:
                self.plan = await self.approved(self.approve)
                yield Planned(self.plan, approved=True)
            yield self.progress()
            async with contextlib.aclosing(self.gathering(self.plan)) as gathering:
                async for event in gathering:
                    yield event
        except Halted as halt:
            self.halted(halt)
        except ServiceError as exc:  # the model server failed, or its output was unreadable
            logger.info("research failed: %s", exc)
            yield Finished(self.result("failed", "", error=str(exc)))
            return
        async with contextlib.aclosing(self.ending()) as ending:
            async for event in ending:
                yield event

    async def approved(self, approve: Approval) -> ResearchPlan:
        assert self.plan is not None
        asked = time.monotonic()
        try:
            return await self.bounded(approve(self.plan), timed=False)
        finally:
            self.spent.started += time.monotonic() - asked

    def halted(self, halt: Halted) -> None:
        self.stopped_by = halt.bound
        self.cut_short = halt.why or cut_short_by(halt.bound, self.budget)
        logger.info("research gathering ended: %s", self.cut_short)

    async def gathering(self, plan: ResearchPlan) -> AsyncGenerator[Event, None]:
        """Rounds of searches and reads, each followed by a reflection, until nothing is
        left to search or a bound is reached (Halted)."""
        queue = [q for sub in plan.subquestions for q in sub.queries]
        while queue:
            for planned in queue:
                async with contextlib.aclosing(self.searched(planned)) as searched:
                    async for event in searched:
                        yield event
            yield StepStarted("reflect")
            reflection = await self.bounded(
                self.writer.structured(
                    "reflection", self.reflect_messages(plan), Reflection, self.step_tokens
                )
            )
            yield self.progress()
            made = {q.casefold() for q in self.tried.queries}
            queue = [q for q in reflection.queries if q.query.casefold() not in made]
            if queue and self.spent.searches >= self.budget.searches:
                raise Halted(Bound.SEARCHES)  # more was wanted than the budget allows

    def reflect_messages(self, plan: ResearchPlan) -> list[dict[str, str]]:
        """The reflection's request, with the notes that fit the window beside its reply."""
        left = self.budget.searches - self.spent.searches
        bare = reflect_messages(self.question, plan, "", self.tried.queries, left)
        used = sum(estimate_tokens(m["content"]) for m in bare)
        room = self.window - self.step_tokens - PROMPT_MARGIN_TOKENS - used
        notes = fitted_text(self.notes, room)
        return reflect_messages(self.question, plan, notes, self.tried.queries, left)

    async def searched(self, planned: PlannedQuery) -> AsyncGenerator[Event, None]:
        """One search, then its first results read and noted."""
        if planned.query.casefold() in {q.casefold() for q in self.tried.queries}:
            return
        if self.spent.searches >= self.budget.searches:
            raise Halted(Bound.SEARCHES)
        locale = ENGLISH if planned.english else self.runner.locale
        yield StepStarted("search", planned.query)
        arguments = {"query": planned.query, "locale": locale}
        result = await self.bounded(self.runner.run(call("web_search", arguments)))
        told = result.event
        if told["type"] != "search":  # the runner's refusal: its uses are spent
            raise Halted(Bound.SEARCHES)
        self.tried.queries.append(planned.query)
        self.spent.searches += 1
        self.spent.searches_cached += "cached_age" in told
        listed = told.get("results", [])
        cached = "cached_age" in told
        yield Searched(planned.query, locale, len(listed), cached, told.get("error"))
        yield self.progress()
        if error := told.get("error"):
            # The engines refused (the month's quota, the rate, a suspension): searching
            # again would only fail again.
            self.failed("search failed", error)
            raise Halted(Bound.SEARCH_UNAVAILABLE, f"The searching was cut short: {error}.")
        # A page Brave read (its LLM Context engine) is a page read, without a fetch.
        given = [n for n in told.get("read", []) if n not in self.read][:READS_PER_SEARCH]
        async with contextlib.aclosing(self.given_pages(given)) as reading:
            async for step in reading:
                yield step
        wanted = READS_PER_SEARCH - len(given)
        urls = [r["url"] for r in listed if not self.was_read(r["url"])][:wanted]
        async with contextlib.aclosing(self.reading(urls)) as reading:
            async for step in reading:
                yield step

    def was_read(self, url: str) -> bool:
        return any(self.runner.sources[n - 1]["url"] == url for n in self.read)

    async def reading(self, urls: list[str]) -> AsyncGenerator[Event, None]:
        """The pages read at once (within the pages left), then each one's notes."""
        left = self.budget.pages - self.spent.pages
        if not urls:
            return
        if left <= 0:
            raise Halted(Bound.PAGES)
        urls = urls[:left]
        for url in urls:
            yield StepStarted("read", url)
        arguments = [{"url": url, "max_tokens": self.page_tokens()} for url in urls]
        calls = [self.runner.run(call("web_fetch", each)) for each in arguments]
        results = await self.bounded(asyncio.gather(*calls))
        for url, result in zip(urls, results, strict=True):
            event = result.event
            if event["type"] != "fetch":  # the runner's refusal: its uses are spent
                raise Halted(Bound.PAGES)
            if error := event.get("error"):
                self.failed("fetch refused" if event.get("refused") else "fetch failed", error)
                yield PageRead(url, error=error)
                continue
            page = self.page_read(
                event["source"], event["url"], event.get("title", ""), result.text
            )
            async with contextlib.aclosing(page) as steps:
                async for step in steps:
                    yield step

    async def given_pages(self, numbers: list[int]) -> AsyncGenerator[Event, None]:
        """The pages a search gave already read (within the pages left), each one noted."""
        for number in numbers:
            if self.spent.pages >= self.budget.pages:
                raise Halted(Bound.PAGES)
            source = self.runner.sources[number - 1]
            text = untrusted(self.runner.passages.get(number, ""), "web_search")
            async with contextlib.aclosing(
                self.page_read(number, source["url"], source["title"], text)
            ) as steps:
                async for step in steps:
                    yield step

    async def page_read(
        self, number: int, url: str, title: str, text: str
    ) -> AsyncGenerator[Event, None]:
        """A page read: counted, told, then noted."""
        self.read.append(number)
        self.spent.pages += 1
        yield PageRead(url, title)
        async with contextlib.aclosing(self.noted(number, text)) as noted:
            async for note in noted:
                yield note
        yield self.progress()

    async def noted(self, number: int, page_text: str) -> AsyncGenerator[Event, None]:
        """The page's notes, numbered as the report will cite the page: pages with a note
        are numbered 1, 2... in the order they were read."""
        assert self.plan is not None
        found = await self.bounded(
            self.writer.structured(
                "notes",
                notes_messages(self.question, self.plan, page_text),
                PageNotes,
                self.step_tokens,
            )
        )
        source = len(self.cited) + 1
        kept = kept_notes(found, source, page_text, len(self.plan.subquestions))
        if kept:
            self.cited.append(number)
        for note in kept:
            self.notes.append(note)
            yield Noted(note)

    def page_tokens(self) -> int:
        """A page's share of the window: what the notes' request leaves beside its reply."""
        return max(PAGE_MIN_TOKENS, self.window - self.step_tokens - NOTES_PROMPT_TOKENS)

    @property
    def step_tokens(self) -> int:
        return completion_reserve(STEP_TOKENS, self.window)

    def failed(self, kind: str, what: str) -> None:
        self.tried.failures.setdefault(kind, []).append(what)

    async def ending(self) -> AsyncGenerator[Event, None]:
        """The report from the notes, or "nothing found" without any; after Stop, what
        was found as it was found (`written` makes the report of it, when asked)."""
        if self.stopped_by is Bound.UNSTARTED:
            yield Finished(self.result("stopped", self.unstarted()))
            return
        if not self.notes or self.plan is None:
            yield Finished(self.result("nothing_found", ""))
            return
        if self.stopped_by is Bound.USER:
            yield Finished(self.result("stopped", self.found()))
            return
        async with contextlib.aclosing(self.written()) as writing:
            async for event in writing:
                yield event

    async def written(self) -> AsyncGenerator[Event, None]:
        """The report from the notes: the run's last step, or after Stop "write the report
        from what was found" (Stop again, and the result is what was found)."""
        assert self.plan is not None and self.notes, "a report is written from notes"
        self.stop.clear()
        yield StepStarted("report")
        pages = self.pages()
        reserve = completion_reserve(self.max_completion_tokens, self.window)
        messages = report_messages(self.question, self.plan, self.notes, self.window, reserve)
        try:
            written = await self.bounded(self.writer.text(messages, reserve), timed=False)
        except Halted:
            yield Finished(self.result("stopped", self.found()))
            return
        except ServiceError as exc:
            yield Finished(self.result("failed", "", error=str(exc)))
            return
        missing = not_found(self.plan, self.notes)
        readable = {page.number for page in pages}
        # A report cut off at its tokens ends at its last whole sentence (one that ends
        # in a list or a table is whole as it is).
        body = whole_sentences(written.text) if written.cut else written.text
        text = finished(cited_only(body, readable), pages, missing, self.cut_short)
        yield Reported(text)
        yield self.progress()
        yield Finished(self.result("stopped" if self.stopped_by else "complete", text))

    def unstarted(self) -> str:
        """A plan nobody started: the line that says so, then the plan as it waited."""
        assert self.plan is not None
        questions = "\n".join(f"- {question}" for question in self.plan.questions())
        return f"{self.cut_short}\n\nThe plan:\n\n{questions}"

    def found_so_far(self) -> Found:
        """What the run found, to keep: `resumed` takes it back."""
        assert self.plan is not None
        return Found(
            plan=self.plan,
            notes=[(note.source, note.subquestion, note.quote) for note in self.notes],
            pages=[FoundPage.model_validate(page.source) for page in self.pages()],
        )

    def resumed(self, found: Found) -> None:
        """The run as a Stop left it, its plan, notes and pages those of `found`: then
        `written()` writes the report from what was found."""
        self.plan = found.plan
        self.notes = [Note(*note) for note in found.notes]
        self.runner.sources = [cast(Source, page.model_dump()) for page in found.pages]
        self.read = list(range(1, len(found.pages) + 1))
        self.cited = list(self.read)
        self.halted(Halted(Bound.USER))

    def found(self) -> str:
        """What was found, without a report: the notes and their sources."""
        assert self.plan is not None
        missing = not_found(self.plan, self.notes)
        return found_text(self.notes, self.pages(), missing, self.cut_short or "")

    def pages(self) -> list[Cited]:
        """The pages read with a note, numbered as the notes cite them."""
        return [Cited(n, self.runner.sources[number - 1]) for n, number in enumerate(self.cited, 1)]

    def sources(self) -> list[SourceView]:
        """The pages the report may cite, as it numbers them; then the other pages read;
        then the results seen and not read."""
        order = self.cited + [n for n in self.read if n not in self.cited]
        order += [n for n in range(1, len(self.runner.sources) + 1) if n not in order]
        listed = [self.runner.sources[number - 1] for number in order]
        return [
            {"n": n, "url": s["url"], "title": s["title"], "read": s["read"]}
            for n, s in enumerate(listed, 1)
        ]

    def result(self, status: Status, report: str, *, error: str | None = None) -> ResearchResult:
        spent = self.spent.snapshot()
        logger.info(
            "research %s%s: %d searches (%d from the cache), %d pages, %d notes, %.1f s, %d tokens",
            status,
            f" (stopped by {self.stopped_by})" if self.stopped_by else "",
            spent.searches,
            spent.searches_cached,
            spent.pages,
            len(self.notes),
            spent.seconds,
            spent.tokens,
        )
        missing = not_found(self.plan, self.notes) if self.plan else []
        return ResearchResult(
            status=status,
            report=report,
            plan=self.plan.questions() if self.plan else [],
            sources=self.sources(),
            not_found=missing,
            spent=spent,
            stopped_by=self.stopped_by,
            tried=self.tried,
            notes=list(self.notes),
            error=error,
            cut_short=self.cut_short,
        )

    def progress(self) -> Progress:
        return Progress(self.spent.snapshot(), self.budget)

    async def bounded(self, work: Awaitable[T], *, timed: bool = True) -> T:
        """The work's result, unless Stop comes first, or (`timed`) the run's minutes end,
        or its tokens are spent: then the work is cancelled and the gathering Halted."""
        bound = Bound.USER if self.stop.is_set() else self.spent.reached(self.budget)
        if bound is not None and (timed or bound is Bound.USER):
            closed(work)
            raise Halted(bound)
        task = asyncio.ensure_future(work)
        stopping = asyncio.ensure_future(self.stop.wait())
        left = self.budget.minutes * 60 - self.spent.seconds if timed else None
        try:
            done, _ = await asyncio.wait(
                {task, stopping},
                timeout=max(0.0, left) if left is not None else None,
                return_when=asyncio.FIRST_COMPLETED,
            )
        finally:
            stopping.cancel()
            if not task.done():
                task.cancel()
        if task in done:
            return task.result()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        raise Halted(Bound.USER if self.stop.is_set() else Bound.MINUTES)


def closed(work: Awaitable[Any]) -> None:
    """A coroutine never awaited, closed (else Python warns it was never awaited)."""
    if isinstance(work, Coroutine):
        work.close()
    elif isinstance(work, asyncio.Future):
        work.cancel()


def call(name: str, arguments: Mapping[str, object]) -> ToolCall:
    return ToolCall(id=f"research-{name}", name=name, arguments=json.dumps(arguments))


def cut_short_by(bound: Bound, budget: Budget) -> str:
    """The bound that ended the gathering, as the report's first line says it."""
    said = {
        Bound.SEARCHES: f"its {budget.searches} searches",
        Bound.PAGES: f"its {budget.pages} pages",
        Bound.MINUTES: f"its {budget.minutes:g} minutes",
        Bound.TOKENS: f"its {budget.tokens:,} model tokens",
    }.get(bound)
    if said is None:
        return "The research was stopped before it was done; this is from what it had found."
    return f"The research stopped at {said}; this report is written from what it found by then."
