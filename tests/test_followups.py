"""Follow-up questions keep their sources: each answer keeps a digest of its tool results,
the last few go with their answers in the history as web data, the oldest are dropped
first when over budget, and a compression folds them into the summary."""

from __future__ import annotations

import html
import re
from collections.abc import Iterator
from typing import Any

import pytest
from markdown_it import MarkdownIt

from app.chat import context
from tests.chat_client import get_conversation, new_conversation, send
from tests.conftest import ChatService, chat_env, service_for
from tests.fakes.llm_server import Reply, ToolCall, context_length_exceeded
from tests.summaries import summary_reply

KEPT = re.compile(
    r'<untrusted-data source="earlier_results" id="(\w+)">\n(.*?)\n</untrusted-data id="\1">',
    re.S,
)


@pytest.fixture
def folding_chat(request, llm, searxng, tmp_path) -> Iterator[ChatService]:
    """Keeps only the last 2 messages verbatim when it folds."""
    llm.clear()
    with service_for(
        request, chat_env(llm, tmp_path, KEEP_RECENT_MESSAGES="2"), searxng.url
    ) as service:
        yield service


def kept_blocks(request_messages: list[dict[str, Any]]) -> list[str]:
    """The kept sources' text in a request, wherever it sits."""
    return [body for m in request_messages for _, body in KEPT.findall(m.get("content") or "")]


def search_turn(chat, llm, conversation_id: str, query: str, answer: str) -> dict[str, Any]:
    """A turn that searches once and answers; its search event."""
    llm.script(
        Reply(
            tool_calls=[ToolCall("web_search", {"query": query})], usage={"prompt_tokens": 12000}
        ),
        Reply(text=answer, usage={"prompt_tokens": 12000, "completion_tokens": 20}),
    )
    events = send(chat, conversation_id, f"Tell me about {query}")
    assert events[-1]["type"] == "done"
    return next(e for e in events if e["type"] == "search")


def test_a_follow_up_sees_the_last_answers_results_and_page_as_web_data(chat, llm, pages):
    article = f"{pages.url}/article"
    llm.script(
        Reply(tool_calls=[ToolCall("web_search", {"query": "python asyncio"})]),
        Reply(tool_calls=[ToolCall("web_fetch", {"url": article})]),
        Reply(text="Asyncio runs coroutines on an event loop [1].", usage={"prompt_tokens": 900}),
        Reply(text="The second result also says more.", usage={"prompt_tokens": 2000}),
    )
    conversation_id = new_conversation(chat)
    events = send(chat, conversation_id, f"How does asyncio work? Start from {article}")
    search, fetch = events[0], events[1]
    results_text = llm.requests[1].body["messages"][-1]["content"]
    page_text = llm.requests[2].body["messages"][-1]["content"]

    done = send(chat, conversation_id, "What else did the second result say?")[-1]
    follow_up = llm.requests[3].body["messages"]
    answer = follow_up[-2]
    assert answer["role"] == "assistant"
    assert answer["content"].startswith("Asyncio runs coroutines on an event loop [1].")
    [kept] = kept_blocks(follow_up)
    assert kept in answer["content"]  # with its answer, not as an instruction of ours
    second = search["results"][1]
    # Numbered as the answer cited them, dated, with the result's own snippet.
    assert f"[2] {second['title']}" in kept and second["url"] in kept
    if second["date"]:
        assert second["date"] in kept
    snippet = results_text.split(second["url"] + "\n", 1)[1].split("\n")[0]
    assert snippet[:80] in kept
    # The page read: its start, under the number the answer cites.
    page_start = page_text.split("\n\n", 1)[1][:200]
    assert f"[{fetch['source']}] " in kept and page_start in kept
    assert len(kept) <= 4_000 + 100
    # The context bar counts the kept sources as their own part.
    assert done["budget"]["parts"]["kept_sources"] > 0
    # The next request carries them byte for byte: the server's prompt cache still hits.
    llm.script(Reply(text="Nothing more."))
    send(chat, conversation_id, "Thanks")
    assert llm.requests[4].body["messages"][2] == answer


def test_only_the_last_answers_keep_their_sources(chat, llm):
    conversation_id = new_conversation(chat)
    topics = ["python asyncio", "docker compose", "linux systemd", "postgres databases"]
    searches = [
        search_turn(chat, llm, conversation_id, topic, f"About {topic} [1].") for topic in topics
    ]
    llm.script(Reply(text="Follow-up answer."))
    send(chat, conversation_id, "And the first one?")
    follow_up = llm.requests[-1].body["messages"]
    kept = "\n".join(kept_blocks(follow_up))
    # KEEP_SOURCES_TURNS is 3: the first answer's results are gone, the last three's stay.
    assert searches[0]["results"][0]["url"] not in kept
    for search in searches[1:]:
        assert search["results"][0]["url"] in kept
    assert len(kept_blocks(follow_up)) == 3
    # The answer itself stays in the history.
    assert any(m["content"].startswith("About python asyncio") for m in follow_up)


def test_over_budget_the_oldest_sources_go_before_any_message_is_folded(chat, llm):
    conversation_id = new_conversation(chat)
    first = search_turn(chat, llm, conversation_id, "python asyncio", "About asyncio [1].")
    second = search_turn(chat, llm, conversation_id, "docker compose", "About compose [1].")
    stored = get_conversation(chat, conversation_id)["messages"]
    older, newer = (context.estimate_tokens(context.sources_text(m)) for m in stored[1::2])
    # A budget the history, the reply's reserve and the newer sources fit in, but not the
    # older sources too. The last measured prompt (12,000) held the older sources.
    pending = "What did they say?"
    fits = 12000 - older + context.estimate_tokens(pending) + 8 + 4096 + newer
    budget = {"settings": {"context_budget": fits + older // 2}}
    chat.http.patch(f"/api/conversations/{conversation_id}", json=budget)

    llm.script(Reply(text="They said things."))
    events = send(chat, conversation_id, pending)
    assert [e["type"] for e in events if e["type"] not in ("delta",)] == ["done"]  # no folding
    follow_up = llm.requests[-1].body["messages"]
    kept = "\n".join(kept_blocks(follow_up))
    assert second["results"][0]["url"] in kept
    assert first["results"][0]["url"] not in kept
    assert any(m["content"] == "Tell me about python asyncio" for m in follow_up)
    assert events[-1]["budget"]["parts"]["kept_sources"] == newer


def test_a_context_overflow_retries_without_the_kept_sources(chat, llm):
    conversation_id = new_conversation(chat)
    search = search_turn(chat, llm, conversation_id, "python asyncio", "About asyncio [1].")
    llm.script(context_length_exceeded(), Reply(text="Answer without them."))
    events = send(chat, conversation_id, "And the first result?")
    assert events[-1]["type"] == "done"
    refused, retried = llm.requests[-2].body["messages"], llm.requests[-1].body["messages"]
    assert search["results"][0]["url"] in "\n".join(kept_blocks(refused))
    assert kept_blocks(retried) == []
    assert retried[1:] == [
        {"role": "user", "content": "Tell me about python asyncio"},
        {"role": "assistant", "content": "About asyncio [1]."},
        {"role": "user", "content": "And the first result?"},
    ]


def test_a_compression_folds_the_last_answers_sources_into_the_summary_request(folding_chat, llm):
    conversation_id = new_conversation(folding_chat)
    topics = ["python asyncio", "docker compose", "linux systemd", "postgres databases"]
    searches = [
        search_turn(folding_chat, llm, conversation_id, topic, f"About {topic} [1].")
        for topic in topics
    ]
    llm.script(Reply(text="Plain answer.", usage={"prompt_tokens": 12000}))
    send(folding_chat, conversation_id, "Thanks")
    small = {"settings": {"context_budget": 1000}}
    folding_chat.http.patch(f"/api/conversations/{conversation_id}", json=small)

    llm.script(summary_reply("Asked about four topics.", []), Reply(text="Answer."))
    events = send(folding_chat, conversation_id, "Another question")
    assert next(e for e in events if e["type"] == "compression")["messages"] == 10
    summary_request = llm.requests[-2].body["messages"][0]["content"]
    folded = "\n".join(body for _, body in KEPT.findall(summary_request))
    # The summary sees what the sources said, as web data; like a history, at most the
    # last KEEP_SOURCES_TURNS (3) answers' sources.
    for search in searches[1:]:
        assert search["results"][0]["title"] in folded and search["results"][0]["url"] in folded
    assert searches[0]["results"][0]["url"] not in folded
    assert "About python asyncio [1]." in summary_request
    # Folded: the answers' sources no longer go with the history.
    assert kept_blocks(llm.requests[-1].body["messages"]) == []


@pytest.fixture
def folding_chat_of_4(request, llm, searxng, tmp_path) -> Iterator[ChatService]:
    """Keeps at most the last 4 messages verbatim when it folds."""
    llm.clear()
    with service_for(
        request, chat_env(llm, tmp_path, KEEP_RECENT_MESSAGES="4"), searxng.url
    ) as service:
        yield service


def test_a_compression_reads_the_sources_of_the_answers_it_folds(folding_chat_of_4, llm):
    """A turn reads only the latest digests (those it sends). The answers a compression
    folds can be older than those: their sources are read for the summary all the same."""
    folding_chat = folding_chat_of_4
    conversation_id = new_conversation(folding_chat)
    topics = ["python asyncio", "docker compose", "linux systemd", "postgres databases", "nginx"]
    searches = [
        search_turn(folding_chat, llm, conversation_id, topic, f"About {topic} [1].")
        for topic in topics
    ]
    small = {"settings": {"context_budget": 1000}}
    folding_chat.http.patch(f"/api/conversations/{conversation_id}", json=small)

    llm.script(summary_reply("Asked about five topics.", []), Reply(text="Answer."))
    events = send(folding_chat, conversation_id, "Another question")
    # Folded: the first four turns; the fifth stays, its digest among those the turn read.
    assert next(e for e in events if e["type"] == "compression")["messages"] == 8
    folded = "\n".join(
        body for _, body in KEPT.findall(llm.requests[-2].body["messages"][0]["content"])
    )
    for search in searches[1:4]:  # the last three among the folded answers
        assert search["results"][0]["url"] in folded
    for search in (searches[0], searches[4]):
        assert search["results"][0]["url"] not in folded


def test_an_answer_its_digest_and_export_are_numbered_as_the_answer_cites(chat, llm, pages):
    # The page read is the turn's source 21 (after 20 results); the answer cites it first,
    # then result 3. The user reads [1] and [2]: so do the stored answer, the digest the
    # model gets with it next turn and the export.
    article = f"{pages.url}/article"
    llm.script(
        Reply(tool_calls=[ToolCall("web_search", {"query": "pierogi czas gotowania"})]),
        Reply(tool_calls=[ToolCall("web_fetch", {"url": article})]),
        Reply(text="Four minutes [21], salted water [3]; code `a[3]` is not cited."),
        Reply(text="It said four minutes."),
    )
    conversation_id = new_conversation(chat)
    events = send(chat, conversation_id, f"Jak długo gotować pierogi? {article}")
    assert llm.requests[2].body["messages"][-1]["content"].startswith("[21] ")  # as given
    search, done = events[0], events[-1]
    third = search["results"][2]
    expected = "Four minutes [1], salted water [2]; code `a[3]` is not cited."
    assert done["text"] == expected
    assert [s["url"] for s in done["sources"][:2]] == [article, third["url"]]
    stored = get_conversation(chat, conversation_id)["messages"][-1]
    assert stored["content"] == expected and stored["sources"] == done["sources"]
    assert next(a for a in stored["activity"] if a["type"] == "fetch")["source"] == 1
    # Uncited sources follow in their order: the first result is now 3.
    assert done["sources"][2]["url"] == search["results"][0]["url"]

    send(chat, conversation_id, "What did [2] say?")
    [kept] = kept_blocks(llm.requests[3].body["messages"])
    assert "[1] Pierogi, step by step" in kept and f"[2] {third['title']}" in kept
    assert kept.index("[1] ") < kept.index("[2] ")
    assert "[21] " not in kept

    exported = chat.http.get(f"/api/conversations/{conversation_id}/export").text
    assert expected in exported
    # Read as a Markdown viewer shows it: a title may hold characters the export escapes
    # (the fake's titles change with the hour, and some end in " | <site>").
    assert exported_sources(exported)[:2] == [
        ("Pierogi, step by step", article),
        (third["title"], third["url"]),
    ]


def exported_sources(markdown: str) -> list[tuple[str, str]]:
    """The first answer's sources in an export, as a Markdown viewer shows them: (the
    link's text, its target), in their order."""
    rendered = MarkdownIt("commonmark").render(markdown)
    listed = rendered.split("<p>Sources:</p>", 1)[1].split("</ol>", 1)[0]
    return [
        (html.unescape(text), html.unescape(target))
        for target, text in re.findall(r'<li><a href="([^"]*)">(.*?)</a></li>', listed)
    ]
