"""A page that redirects to an address nobody can build is a failed fetch the model reads,
never the end of the whole answer: on the page, through /v1, through MCP and on the
command line.

httpx builds the next request of a redirect even when it does not follow it, and raises
for these Locations something other than an httpx.HTTPError (InvalidURL, an IDNA error);
the loopback page server's /redirect sends each one as it is.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from urllib.parse import quote

import pytest
from mcp import Client

from tests.chat_client import get_conversation, new_conversation, send
from tests.conftest import NO_SEARXNG, ChatService, run_main
from tests.fakes.llm_server import Reply, ToolCall
from tests.fakes.pages import PageServer


@dataclass(frozen=True)
class Malformed:
    name: str
    location: str
    said: str
    """What the tool error says."""
    refused: bool = False
    """Refused before any request (the command exits 2), rather than failed (exit 1)."""


INVALID = "redirects to an invalid address"
MALFORMED = [
    Malformed("backslashes", "http:\\\\127.0.0.1\\", INVALID),
    Malformed("empty-punycode", "http://xn--/", INVALID),
    Malformed("no-slashes", "http:foo", INVALID),
    Malformed("bad-punycode", "http://xn--a.org/", INVALID),
    Malformed("overlong-label", f"http://{'a' * 64}.example.org/", "not a valid host name", True),
    Malformed("nul", "http://a\x00b.example.org/", "illegal header line"),
    Malformed("port-out-of-range", "http://example.org:99999/", "port 99999", True),
]
IDS = [case.name for case in MALFORMED]


def redirecting(pages: PageServer, case: Malformed) -> str:
    return f"{pages.url}/redirect?to={quote(case.location)}"


def tool_error(case: Malformed) -> str:
    return "fetch refused" if case.refused else "fetch failed"


@pytest.mark.parametrize("case", MALFORMED, ids=IDS)
def test_on_the_page_the_answer_goes_on_after_the_failed_fetch(chat, llm, pages, case):
    start = redirecting(pages, case)
    llm.script(Reply(tool_calls=[ToolCall("web_fetch", {"url": start})]), Reply(text="Sorry."))
    conversation_id = new_conversation(chat)
    events = send(chat, conversation_id, f"What does {start} say?")

    assert events[-1].get("status") == "complete", events[-1]
    [fetch] = [e for e in events if e["type"] == "fetch"]
    assert fetch["error"].startswith(tool_error(case)) and case.said in fetch["error"]
    told = llm.requests[1].body["messages"][-1]
    assert told["role"] == "tool" and told["content"].startswith(tool_error(case))
    assert get_conversation(chat, conversation_id)["messages"][-1]["content"] == "Sorry."


@pytest.mark.parametrize("case", MALFORMED, ids=IDS)
def test_through_v1_the_answer_goes_on_after_the_failed_fetch(chat, llm, pages, case):
    start = redirecting(pages, case)
    llm.script(Reply(tool_calls=[ToolCall("web_fetch", {"url": start})]), Reply(text="Sorry."))
    answer = chat.http.post(
        "/v1/chat/completions",
        json={"model": "fake-model", "messages": [{"role": "user", "content": f"Read {start}"}]},
    )

    assert answer.status_code == 200, answer.text
    assert answer.json()["choices"][0]["message"]["content"] == "Sorry."
    told = llm.requests[1].body["messages"][-1]
    assert told["role"] == "tool" and told["content"].startswith(tool_error(case))
    assert case.said in told["content"]


@pytest.mark.socket  # the MCP SDK's client connects to the service's address
@pytest.mark.parametrize("case", MALFORMED, ids=IDS)
def test_through_mcp_it_is_a_tool_error_that_says_why(chat: ChatService, pages, case):
    async def scenario() -> tuple[bool, str, bool]:
        async with Client(f"{chat.url}/mcp", read_timeout_seconds=60) as client:
            failed = await client.call_tool("web_fetch", {"url": redirecting(pages, case)})
            after = await client.call_tool("web_fetch", {"url": f"{pages.url}/article"})
        text = "\n".join(getattr(block, "text", "") for block in failed.content)
        return failed.is_error, text, after.is_error

    is_error, text, after_is_error = asyncio.run(scenario())
    assert is_error and f"{tool_error(case)}:" in text and case.said in text
    assert not after_is_error  # the server goes on serving


@pytest.mark.parametrize("case", MALFORMED, ids=IDS)
def test_the_fetch_command_says_why_and_exits_with_its_code(pages, case):
    run = run_main(
        "fetch", redirecting(pages, case), searxng_url=NO_SEARXNG, FETCH_ALLOW_HOSTS=pages.host
    )
    assert run.returncode == (2 if case.refused else 1), run.stderr
    assert run.stderr.startswith("refused: " if case.refused else "error: ")
    assert case.said in run.stderr and "Traceback" not in run.stderr
