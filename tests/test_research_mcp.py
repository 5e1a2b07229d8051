"""The MCP server's `research` tool through the official MCP SDK's client, over stdio
(``python -m app mcp``) and over Streamable HTTP at the service's /mcp: progress
notifications while it runs, the report and its sources as structured content,
cancellation stopping the run. On the real SearXNG over the fake Brave, the loopback page
server and the fake model scripted as a researcher."""

from __future__ import annotations

import asyncio
import sys
from typing import Any

import anyio
import pytest
from mcp import Client, StdioServerParameters

from tests.conftest import ROOT, chat_env
from tests.research_model import (
    QUESTION,
    article,
    plan_of,
    research_service,
    researcher,
    service,
)

__all__ = ["researcher", "article", "service"]  # fixtures, imported to be used here

# The MCP SDK's clients make their own connections, to the service's address.
pytestmark = pytest.mark.socket


@pytest.fixture
def stdio(llm, searxng, pages, brave, tmp_path) -> StdioServerParameters:
    env = chat_env(llm, tmp_path, pages, SEARCH_RATE="50", SEARXNG_URL=searxng.url)
    return StdioServerParameters(
        command=sys.executable,
        args=["-m", "app", "mcp"],
        cwd=ROOT,
        env={**env, "PYTHONPATH": str(ROOT)},
    )


@pytest.fixture(params=["stdio", "http"])
def server(request: pytest.FixtureRequest) -> Any:
    if request.param == "stdio":
        return request.getfixturevalue("stdio")
    return f"{request.getfixturevalue('service').url}/mcp"


def test_a_research_reports_progress_and_returns_its_report_and_sources(
    server, researcher, article
):
    progress: list[tuple[float, str | None]] = []

    async def told(value: float, total: float | None, message: str | None) -> None:
        progress.append((value, message))

    async def scenario() -> Any:
        async with Client(server, read_timeout_seconds=120) as client:
            return await client.call_tool(
                "research", {"question": QUESTION, "searches": 3}, progress_callback=told
            )

    result = asyncio.run(scenario())
    assert not result.is_error, result.content
    messages = [m for _, m in progress]
    assert "Planning the research" in messages
    assert any(m and m.startswith("Searched 'pierogi boiling time'") for m in messages)
    assert f"Read 'Pierogi, step by step' ({article.split('/')[2].split(':')[0]})" in messages
    assert [v for v, _ in progress] == sorted({v for v, _ in progress})  # each one further
    found = result.structured_content
    assert found["status"] == "complete" and found["stopped_by"] is None
    assert found["report"].startswith("Pierogi are filled dumplings [1].")
    assert found["sources"][0] == {
        "n": 1,
        "url": article,
        "title": found["sources"][0]["title"],
        "read": True,
    }
    assert found["spent"]["searches"] == 1 and found["spent"]["pages"] >= 1
    assert result.content[0].text == found["report"]


def test_a_research_that_asks_no_budget_runs_within_the_services(
    request, llm, pages, searxng, tmp_path, researcher, article
):
    researcher.plan = plan_of("pierogi boiling time", "pierogi fillings")
    env = {"RESEARCH_SEARCHES": "1"}

    async def scenario(url: str) -> Any:
        async with Client(url, read_timeout_seconds=120) as client:
            return await client.call_tool("research", {"question": QUESTION})

    with research_service(request, llm, pages, searxng.url, tmp_path, **env) as service:
        result = asyncio.run(scenario(f"{service.url}/mcp"))
    found = result.structured_content
    assert (found["stopped_by"], found["spent"]["searches"]) == ("searches", 1)


def test_a_cancelled_research_lets_the_models_request_go(server, llm, researcher, article):
    researcher.silent.add("plan")  # a model server slow to plan

    async def calling(client: Client) -> None:  # no progressToken: cancelled all the same
        await client.call_tool("research", {"question": QUESTION})

    async def scenario() -> None:
        async with Client(server, read_timeout_seconds=120) as client:
            with anyio.move_on_after(30) as waited:
                async with anyio.create_task_group() as group:
                    group.start_soon(calling, client)
                    while not llm.requests:  # the plan asked for
                        await anyio.sleep(0.05)
                    group.cancel_scope.cancel()
            assert not waited.cancelled_caught

    asyncio.run(scenario())
    assert llm.wait_hung_up(timeout=10) is not None  # the plan's request was let go
    assert researcher.asked == ["plan"]


def test_bad_budgets_are_tool_errors(service, llm):
    async def scenario() -> list[Any]:
        async with Client(f"{service.url}/mcp", read_timeout_seconds=60) as client:
            return [
                await client.call_tool("research", {"question": QUESTION, **bad})
                for bad in ({"searches": 0}, {"pages": 61}, {"minutes": 0})
            ]

    for result, bound in zip(
        asyncio.run(scenario()), ("searches", "pages", "minutes"), strict=True
    ):
        assert result.is_error and bound in result.content[0].text, result.content
    assert llm.requests == []
