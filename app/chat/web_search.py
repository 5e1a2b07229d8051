"""web_search: the web through our SearXNG, for our model and for MCP clients alike."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, Field, StrictInt, StrictStr

from app import config
from app.chat.events import ListedResult, SearchEvent
from app.chat.settings import ChatSettings
from app.chat.tool import PAGE_KEEP_CHARS, Answering, Tool, ToolResult, Waiting, failed
from app.errors import ServiceError
from app.search import lab
from app.search.client import Result, SearchError
from app.webtext import MAX_QUERY_CHARS, clipped, results_text

SHOWN_WAIT_SECONDS = 0.1
"""A wait for the search plan's rate shorter than this is not worth a word in the trail."""
SNIPPET_KEEP_CHARS = 300


class SearchArguments(BaseModel):
    query: Annotated[
        StrictStr,
        Field(
            description=f"what to search for (at most {MAX_QUERY_CHARS} characters)",
            # Said, not enforced here: the run refuses a longer query in its own words.
            json_schema_extra={"minLength": 1, "maxLength": MAX_QUERY_CHARS},
        ),
    ]
    locale: Annotated[
        StrictStr | None,
        Field(
            description="results' locale: 'pl-PL' (language and country), 'pl', 'all', or "
            "'en' for technical documentation; default: the user's"
        ),
    ] = None
    engines: Annotated[
        StrictStr | None, Field(description="comma list of SearXNG engines; default its own")
    ] = None
    page: Annotated[StrictInt, Field(description="result page", ge=1, le=10)] = 1
    time_range: Annotated[
        Literal["day", "week", "month", "year"] | None,
        Field(description="only results from the last day, week, month or year"),
    ] = None


class WebSearch(Tool[SearchArguments]):
    name = "web_search"
    description = (
        "Searches the web. Returns each result with its publication date (first, when "
        "known), title, address and its snippets joined; a result whose page Brave read "
        "for you comes with that page's passages (no need to fetch it). Cost: each call "
        "(and each page of results) spends queries of the user's Brave Search API plan."
    )
    arguments = SearchArguments
    placeholder = "searches"

    def cap(self, chosen: ChatSettings) -> int:
        return chosen.searches

    async def waiting(self, arguments: SearchArguments, runner: Answering) -> Waiting | None:
        if not arguments.query.strip():
            return None
        seconds = await runner.searcher.expected_wait()
        if seconds < SHOWN_WAIT_SECONDS:
            return None
        return Waiting(clipped(arguments.query, MAX_QUERY_CHARS), seconds)

    async def run(self, arguments: SearchArguments, runner: Answering) -> ToolResult:
        query = arguments.query
        locale = arguments.locale or runner.locale
        event: SearchEvent = {"type": "search", "query": query, "language": locale}
        if not query.strip():
            return failed(event, "search failed: the query is empty")
        if len(query) > MAX_QUERY_CHARS:
            event["query"] = clipped(query, MAX_QUERY_CHARS)
            return failed(
                event,
                f"search refused: the query has {len(query):,} characters, more than the "
                f"{MAX_QUERY_CHARS} allowed; search with fewer words",
            )
        runner.planted.add(query)
        try:
            config.check_locale(locale)
            engines = runner.engines
            if arguments.engines:
                engines = await lab.check_engines(runner.searcher, arguments.engines)
            response = await runner.searcher.search(
                query,
                locale=locale,
                engines=engines,
                page=arguments.page,
                time_range=arguments.time_range,
            )
        except (SearchError, ServiceError) as exc:
            return failed(event, "search failed", str(exc), self.name)
        if unavailable := response.unavailable:  # named: what happened, until when
            return failed(event, "search failed", unavailable, self.name)
        if response.waited >= SHOWN_WAIT_SECONDS:
            event["waited"] = response.waited
        if response.cached_age is not None:
            event["cached_age"] = response.cached_age
        event["queries"] = response.queries
        numbered = [listed(result, runner) for result in response.results]
        lines = [line for _, line in numbered]
        read = [
            n for (n, _), r in zip(numbered, response.results, strict=True) if r.read_through_brave
        ]
        if read:
            event["read"] = read
        event["results"] = [
            ListedResult(url=r.url, title=r.title, domain=r.domain, date=r.day)
            for r in response.results
        ]
        return ToolResult(results_text(query, lines), event)


WEB_SEARCH = WebSearch()


def listed(result: Result, runner: Answering) -> tuple[int, str]:
    """The result numbered and given to the model (its address may be read); a page Brave
    read (its LLM Context) is cited as a page read, its passages kept as a page's text."""
    read = result.read_through_brave
    number = runner.cite(result.url, result.title, result.domain, date=result.day, read=read)
    if not runner.planted.written(result.url):
        runner.given.add(result.url, "result")
    echo = f"{result.title}\n{result.content}"
    runner.given.add_text(echo, "web", planted=runner.planted)
    runner.snippets.setdefault(number, clipped(result.content, SNIPPET_KEEP_CHARS))
    if read:
        text = "\n\n".join(result.passages)
        runner.excerpts[number] = clipped(text, PAGE_KEEP_CHARS)
        runner.passages[number] = text
    return number, result.for_model(number)
