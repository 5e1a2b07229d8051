"""What a research run tells its surface as it goes, and what it ends with: typed values a
surface renders (the command line's progress line and report, later the page's trail,
/v1's reasoning and MCP's progress notifications)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal
from urllib.parse import urlsplit

# pydantic reads a TypedDict on Python 3.11 only from typing_extensions (the surfaces to
# come answer these as JSON).
from pydantic import BaseModel
from typing_extensions import TypedDict

from app.research.budget import Bound, Budget, Spent
from app.research.notes import Note
from app.research.plan import ResearchPlan

Step = Literal["plan", "search", "read", "reflect", "report"]
Status = Literal["complete", "stopped", "nothing_found", "failed"]

STEP_LINES: dict[Step, str] = {
    "plan": "Planning the research",
    "reflect": "Reflecting on the notes",
    "report": "Writing the report",
}


@dataclass(frozen=True)
class StepStarted:
    """A step begins: what it is about (a query, an address, a sub-question)."""

    step: Step
    about: str = ""


@dataclass(frozen=True)
class Planned:
    """The plan, before any search; again once approved, where the run waits for that."""

    plan: ResearchPlan
    approved: bool = False


@dataclass(frozen=True)
class Searched:
    query: str
    locale: str
    results: int
    cached: bool
    error: str | None = None


@dataclass(frozen=True)
class PageRead:
    """A page asked for: read, or why not."""

    url: str
    title: str = ""
    error: str | None = None


@dataclass(frozen=True)
class Noted:
    note: Note


@dataclass(frozen=True)
class Progress:
    """The counters against the budget, after each search, page and model request."""

    spent: Spent
    budget: Budget


@dataclass(frozen=True)
class Reported:
    text: str


class SourceView(TypedDict):
    """A source as the command's --json lists it."""

    n: int
    url: str
    title: str
    read: bool


class SpentView(TypedDict):
    searches: int
    searches_cached: int
    pages: int
    seconds: float
    prompt_tokens: int
    completion_tokens: int


class ResultView(TypedDict):
    """The run's result as one JSON object (the command's --json)."""

    status: Status
    report: str
    plan: list[str]
    sources: list[SourceView]
    not_found: list[str]
    spent: SpentView
    stopped_by: str | None


@dataclass(frozen=True)
class Tried:
    """What the run tried, for a run that found nothing: it says so rather than answer
    from the model's memory."""

    queries: list[str] = field(default_factory=list)
    failures: dict[str, list[str]] = field(default_factory=dict)
    """Each kind of failure ("search failed", "fetch refused", ...) with what it named."""


@dataclass(frozen=True)
class ResearchResult:
    status: Status
    report: str
    plan: list[str]
    sources: list[SourceView]
    not_found: list[str]
    spent: Spent
    stopped_by: Bound | None
    tried: Tried
    notes: list[Note] = field(default_factory=list)
    """Kept whatever the end: a stopped or failed run keeps what it found."""
    error: str | None = None
    """Why the run failed (status "failed")."""
    cut_short: str | None = None
    """Why the searching ended early, in words (a quota, an engine suspended, a bound)."""

    def as_dict(self) -> ResultView:
        spent = self.spent
        return {
            "status": self.status,
            "report": self.report,
            "plan": self.plan,
            "sources": self.sources,
            "not_found": self.not_found,
            "spent": {
                "searches": spent.searches,
                "searches_cached": spent.searches_cached,
                "pages": spent.pages,
                "seconds": spent.seconds,
                "prompt_tokens": spent.prompt_tokens,
                "completion_tokens": spent.completion_tokens,
            },
            "stopped_by": str(self.stopped_by) if self.stopped_by else None,
        }

    def tried_text(self) -> str:
        """No report without sources: what was tried instead, for a run that found
        nothing."""
        tried = self.tried
        lines = ["nothing found: no page read held an answer, so no report was written."]
        if self.cut_short:
            lines.append(self.cut_short)
        queries = "; ".join(repr(q) for q in tried.queries) or "none"
        lines.append(f"searched: {queries}")
        lines.append(f"pages read: {self.spent.pages}")
        for kind, what in tried.failures.items():
            lines.append(f"{kind} ({len(what)}): " + "; ".join(what[:5]))
        return "\n".join(lines)


class FoundPage(BaseModel):
    """A page read with a note, as an answer lists its sources."""

    url: str
    title: str
    domain: str = ""
    date: str | None = None
    read: bool = True


class Found(BaseModel):
    """What a stopped run found, as a surface keeps it (JSON) to have the report written
    from it later (`Research.resumed`): the plan, the notes, the pages they cite (numbered
    1, 2... as the notes cite them)."""

    plan: ResearchPlan
    notes: list[tuple[int, int, str]]
    """Each note's source, sub-question and quote."""
    pages: list[FoundPage]


@dataclass(frozen=True)
class Finished:
    """The last event: the run's result."""

    result: ResearchResult


Event = StepStarted | Planned | Searched | PageRead | Noted | Progress | Reported | Finished


def progress_line(event: Event) -> str | None:
    """One line per step, search and page: what the run is doing, as /v1 tells it as
    reasoning and MCP as its progress notifications' message."""
    match event:
        case Planned(plan, False):
            return "Plan:\n" + "\n".join(f"- {q}" for q in plan.questions())
        case StepStarted("plan" | "reflect" | "report" as step):
            return STEP_LINES[step]
        case Searched(query, locale, results, cached, error):
            if error:
                return f"Search {query!r} ({locale}) failed: {error}"
            return f"Searched {query!r} ({locale}): {results} results" + (
                " (cached)" if cached else ""
            )
        case PageRead(url, title, error):
            host = urlsplit(url).hostname or url
            return f"Could not read {host}: {error}" if error else f"Read {title or url!r} ({host})"
    return None
