"""The chat page in real Chromium, against the real service, a real SearXNG with our engine
on the fake Brave API, the loopback page server and the scripted fake model server."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator

import httpx
import pytest
from playwright.sync_api import Page, expect

from tests.browser import opened
from tests.chat_client import get_conversation
from tests.conftest import ChatService, chat_env
from tests.fakes.conventions import llamacpp_stream_unparsed, ollama_routes, ollama_stream
from tests.fakes.llm_server import (
    FakeLLM,
    Reply,
    ToolCall,
    content_filtered,
    context_length_exceeded,
    invalid_api_key,
    rate_limited,
    server_error,
    tools_unsupported,
)
from tests.page_actions import LONG_ANSWER, conversation_id, send, turns_ended, wait_turn_end


def test_the_page_is_served_with_a_policy_that_forbids_inline_script(chat):
    response = chat.http.get("/")
    assert response.status_code == 200
    policy = response.headers["content-security-policy"]
    assert "script-src 'self'" in policy and "unsafe-inline" not in policy
    assert "connect-src 'self'" in policy
    # Nothing in the page itself runs or loads from elsewhere.
    assert "<script>" not in response.text
    assert not re.search(r"\son[a-z]+=", response.text)
    assert not re.search(r"https?://", response.text)


def test_an_answer_streams_in_and_ends_rendered(page, llm):
    llm.script(
        Reply(
            text="## Cooking times\n\n| Filling | Minutes |\n|---|--:|\n| Potato | 4 |\n"
            "| Cabbage | 5 |\n\n```python\nprint('gotowe')\n```\n\nDone.",
            usage={"prompt_tokens": 800, "completion_tokens": 40},
            chunk_delay=0.01,
        )
    )
    send(page, "How long do pierogi cook?")
    expect(page.locator("#stop")).to_be_visible()
    wait_turn_end(page)
    answer = page.locator(".message.assistant").last
    expect(answer.locator("table th")).to_have_text(["Filling", "Minutes"])
    expect(answer.locator("table td").first).to_have_text("Potato")
    expect(answer.locator("pre code")).to_have_text("print('gotowe')")
    answer.locator(".code-block button.copy").click()
    assert page.evaluate("navigator.clipboard.readText()") == "print('gotowe')"
    stats = answer.locator(".answer-stats")
    expect(stats).to_contain_text("in 800")
    expect(stats).to_contain_text("out 40")
    expect(stats).not_to_contain_text("cost")  # the server gave none: nothing to say
    expect(page.locator("#totals")).to_contain_text("1 turn")
    expect(page.locator(".context-label")).to_contain_text("800 tokens measured by the server")
    assert page.log.errors == []


def test_a_search_and_fetch_turn_keeps_its_trail_and_sources_after_a_reload(page, llm, pages):
    article = f"{pages.url}/article"
    llm.script(
        Reply(
            reasoning="I should look this up.",
            tool_calls=[ToolCall("web_search", {"query": "pierogi czas gotowania"})],
        ),
        Reply(tool_calls=[ToolCall("web_fetch", {"url": article})]),
        Reply(text="Boil them for four minutes [21].", usage={"prompt_tokens": 3000}),
    )
    send(page, f"Jak długo gotować pierogi? {article}")
    wait_turn_end(page)

    def check_trail_and_sources() -> None:
        trail = page.locator(".trail").last
        expect(trail.locator("summary")).to_contain_text("Searched 1× (pl-PL)")
        expect(trail.locator("summary")).to_contain_text("Read 1 page")
        trail.locator("summary").click()
        expect(trail.locator(".timeline")).to_contain_text("pierogi czas gotowania")
        expect(trail.locator(".timeline")).to_contain_text("Pierogi, step by step")
        expect(trail.locator(".thinking-text")).to_have_text("I should look this up.")
        chip = page.locator(".source-chip").first
        expect(chip).to_have_attribute("href", article)
        expect(chip).to_have_attribute("rel", "noopener noreferrer")
        expect(page.locator(".seen summary").last).to_contain_text("results")
        citation = page.locator(".answer a.citation").first
        assert citation.get_attribute("href") == f"#{chip.get_attribute('id')}"

    check_trail_and_sources()
    page.reload()
    expect(page.locator(".message.assistant")).to_have_count(1)
    check_trail_and_sources()
    expect(page.locator(".conversation-item.current")).to_contain_text("Jak długo gotować")


def test_a_follow_up_shows_the_kept_sources_on_the_context_bar(page, llm):
    llm.script(
        Reply(tool_calls=[ToolCall("web_search", {"query": "pierogi czas gotowania"})]),
        Reply(text="Boil them for four minutes [2].", usage={"prompt_tokens": 3000}),
        Reply(text="The second result also says to salt the water.", usage={"prompt_tokens": 4000}),
    )
    send(page, "Jak długo gotować pierogi?")
    wait_turn_end(page)
    expect(page.locator("#context-bar .context-track .context-part.kept_sources")).to_have_count(0)
    send(page, "Co jeszcze mówił drugi wynik?")
    wait_turn_end(page)
    segment = page.locator("#context-bar .context-track .context-part.kept_sources")
    expect(segment).to_have_count(1)
    expect(segment).to_have_attribute("title", re.compile(r"earlier answers' sources \(kept\): ~"))
    assert segment.bounding_box()["width"] > 0
    page.locator("#context-bar .context-track").focus()
    legend = page.locator("#context-bar .context-legend")
    expect(legend).to_contain_text("earlier answers' sources (kept) ~")
    assert page.log.errors == []


def test_stop_keeps_the_partial_answer_and_closes_the_model_stream(page, llm, chat):
    llm.script(Reply(text=LONG_ANSWER, chunk_delay=0.05))
    send(page, "Tell me a long story.")
    expect(page.locator(".message.assistant .answer")).to_contain_text("Sentence number 3")
    stop = page.locator("#stop")
    send_box = page.locator("#send").bounding_box()
    assert send_box is None  # Stop stands where Send was, Send is gone
    stop.click()
    wait_turn_end(page)
    assert llm.wait_hung_up() is not None, "the model server never saw the connection close"
    answer = page.locator(".message.assistant").last
    expect(answer.locator(".badge.interrupted")).to_have_text("interrupted")
    expect(answer.locator(".answer.interrupted")).to_be_visible()
    stored = get_conversation(chat, conversation_id(page))["messages"]
    assert [m["status"] for m in stored if m["role"] == "assistant"] == ["interrupted"]

    llm.script(Reply(text="A short story instead.", usage={"prompt_tokens": 100}))
    answer.locator(".regenerate").click()
    wait_turn_end(page)
    expect(page.locator(".message.assistant")).to_have_count(1)
    expect(page.locator(".message.assistant .answer")).to_have_text("A short story instead.")
    stored = get_conversation(chat, conversation_id(page))["messages"]
    assert [m["role"] for m in stored] == ["user", "assistant"]
    assert stored[1]["status"] == "complete"


def test_escape_stops_too(page, llm):
    llm.script(Reply(text=LONG_ANSWER, chunk_delay=0.05))
    send(page, "Another long story.")
    expect(page.locator(".message.assistant .answer")).to_contain_text("Sentence number 2")
    page.keyboard.press("Escape")
    wait_turn_end(page)
    assert llm.wait_hung_up() is not None
    expect(page.locator(".badge.interrupted")).to_be_visible()


def test_enter_while_an_answer_streams_says_why_it_waits(page, llm):
    llm.script(Reply(text=LONG_ANSWER, chunk_delay=0.05))
    send(page, "A long story, please.")
    expect(page.locator(".message.assistant .answer")).to_contain_text("Sentence number 2")
    page.locator("#composer-input").fill("And a follow-up")
    page.locator("#composer-input").press("Enter")
    hint = page.locator("#composer-hint")
    expect(hint).to_be_visible()
    expect(hint).to_contain_text("send this once it ends, or press Stop")
    expect(page.locator("#composer-input")).to_have_value("And a follow-up")
    expect(page.locator(".message.user")).to_have_count(1)
    page.locator("#stop").click()
    wait_turn_end(page)
    expect(hint).to_be_hidden()


@pytest.mark.parametrize(
    ("reply", "title", "action", "restored"),
    [
        (invalid_api_key(), "refused the key", "Open status", True),
        (content_filtered(), "filter blocked", "Edit & resend", True),
        (server_error(500), "model server failed", "Retry", True),
        (rate_limited(retry_after=2), "slow down", "Retry", True),
    ],
    ids=["auth", "content_filter", "upstream", "rate_limit"],
)
def test_each_failure_shows_its_action_and_gives_the_message_back(
    page, llm, chat, reply, title, action, restored
):
    llm.script(reply)
    send(page, "My carefully written question")
    wait_turn_end(page)
    card = page.locator(".error-card")
    expect(card.locator("h3")).to_contain_text(title)
    button = card.get_by_role("button", name=action)
    expect(button).to_be_visible()
    expect(page.locator("#composer-input")).to_have_value("My carefully written question")
    expect(card).to_contain_text("Your message is back in the box below.")
    expect(page.locator(".message.user")).to_have_count(0)
    assert get_conversation(chat, conversation_id(page))["messages"] == []
    if action == "Retry":
        if "slow down" in title:
            expect(button).to_be_disabled()
            expect(card.locator(".countdown")).to_contain_text("retry in")
        llm.script(Reply(text="It worked this time."))
        expect(button).to_be_enabled(timeout=5_000)
        button.click()
        wait_turn_end(page)
        expect(page.locator(".message.assistant .answer").last).to_have_text("It worked this time.")
        assert page.locator("#composer-input").input_value() == ""


def test_a_second_context_overflow_shows_its_retry(page, llm):
    llm.script(context_length_exceeded(), context_length_exceeded())
    send(page, "A message that no longer fits.")
    wait_turn_end(page)
    card = page.locator(".error-card")
    expect(card.locator("h3")).to_contain_text("no longer fits")
    expect(card.get_by_role("button", name="Retry")).to_be_visible()
    expect(page.locator("#composer-input")).to_have_value("A message that no longer fits.")


def test_a_model_without_tools_searches_first_with_a_visible_warning(page, llm):
    query = Reply(text='{"query": "news today"}')
    no_page = Reply(text='{"read": 0}')
    llm.script(tools_unsupported(), query, no_page, Reply(text="Answer from the results."))
    send(page, "Anything new?")
    wait_turn_end(page)
    answer = page.locator(".message.assistant").last
    expect(answer.locator(".answer")).to_have_text("Answer from the results.")
    expect(answer.locator(".trail summary")).to_contain_text("1 warning")
    answer.locator(".trail summary").click()
    expect(answer.locator(".timeline .warning")).to_contain_text("rejected the web tools")
    searched = answer.locator(".timeline li", has_text="Searched “news today”")
    expect(searched).to_contain_text("without tool calling")


def test_the_picker_marks_a_model_that_refused_tools_until_the_user_clears_it(page, llm, chat):
    llm.script(
        tools_unsupported(),
        Reply(text="Answer without the web."),
        Reply(text="Still without."),
        Reply(text="With the web again."),
    )
    picked = page.locator("#model-picker option:checked")
    expect(page.locator("#no-tools")).to_be_hidden()
    send(page, "Anything new?")
    wait_turn_end(page)
    # Marked as soon as the server refused, and still after a reload.
    expect(picked).to_have_text("fake-model · no tools")
    expect(page.locator("#no-tools")).to_be_visible()
    expect(page.locator("#tools-pill")).to_be_hidden()  # its "search 3 / read 2" is moot
    page.reload()
    expect(page.locator("#no-tools")).to_be_visible()
    expect(page.locator("#no-tools")).to_have_attribute("title", re.compile("does not support"))
    send(page, "And now?")
    wait_turn_end(page)
    assert "tools" not in llm.requests[-1].body
    # Another model is not marked; back on this one, the control forgets the refusal.
    page.select_option("#model-picker", "fake-small")
    expect(page.locator("#no-tools")).to_be_hidden()
    page.select_option("#model-picker", "fake-model")
    page.get_by_role("button", name="Try tools again").click()
    expect(page.locator("#no-tools")).to_be_hidden()
    expect(page.locator("#tools-pill")).to_be_visible()
    expect(picked).to_have_text("fake-model")
    assert httpx.get(f"{chat.url}/api/config").json()["tool_refusals"] == []
    send(page, "Search this time.")
    wait_turn_end(page)
    assert "tools" in llm.requests[-1].body


def test_text_of_an_attempt_the_server_discards_leaves_the_page(page, llm):
    garbage = ["You may call ", "these tools ", "by answering.\n\n", "Still garbage "]
    llm.script(
        llamacpp_stream_unparsed("fake-model", garbage, delay=0.05),
        Reply(text='{"query": "news today"}'),  # the search made first, without tools
        Reply(text='{"read": 0}'),
        Reply(text="Answer without the web."),
    )
    send(page, "Anything new?")
    wait_turn_end(page)
    answer = page.locator(".message.assistant").last
    expect(answer.locator(".answer")).to_have_text("Answer without the web.")
    answer.locator(".trail summary").click()
    expect(answer.locator(".timeline .warning")).to_contain_text("did not parse")
    assert page.log.errors == []


def test_a_lost_connection_to_the_service_says_so_and_retries(page, llm, chat):
    page.route("**/chat", lambda route: route.abort())
    send(page, "Are you there?")
    wait_turn_end(page)
    card = page.locator(".error-card")
    expect(card.locator("h3")).to_have_text("Lost the connection to the chat service")
    page.unroute("**/chat")
    llm.script(Reply(text="Here I am."))
    card.get_by_role("button", name="Retry").click()
    wait_turn_end(page)
    expect(page.locator(".message.assistant .answer").last).to_have_text("Here I am.")
    stored = get_conversation(chat, conversation_id(page))["messages"]
    assert [m["content"] for m in stored] == ["Are you there?", "Here I am."]


HOSTILE = """Here is some output.

<script>alert('script')</script>
<img src="http://203.0.113.9/pixel.png" onerror="alert('img')">
[click me](javascript:alert('link'))
[data link](data:text/html,<script>alert('data')</script>)
![tracker](http://203.0.113.9/tracker.png)
<a href="javascript:alert('a')">html link</a>

| a | b |
|---|---|
| <b onmouseover=alert(1)>cell</b> | <iframe src="http://203.0.113.9/"></iframe> |

```
<img src=x onerror="alert('fence')">
"""


def test_hostile_model_output_renders_as_text(page, llm):
    llm.script(Reply(text=HOSTILE))
    send(page, "Say something nasty.")
    wait_turn_end(page)
    answer = page.locator(".message.assistant .answer")
    expect(answer).to_contain_text("<script>alert('script')</script>")
    found = page.evaluate(
        """() => {
          const root = document.querySelector('.message.assistant .answer');
          const bad = root.querySelectorAll('script, img, iframe, object, embed, svg, style');
          const handlers = [...root.querySelectorAll('*')].filter(
            (node) => [...node.attributes].some((a) => a.name.startsWith('on')));
          const links = [...root.querySelectorAll('a[href]')].map((a) => a.href);
          return {bad: bad.length, handlers: handlers.length, links};
        }"""
    )
    assert found["bad"] == 0 and found["handlers"] == 0
    assert all(link.startswith(("http:", "https:", "mailto:")) for link in found["links"])
    page.mouse.move(400, 400)
    assert page.log.dialogs == []
    assert page.log.outside() == []
    assert page.log.errors == []


@pytest.fixture
def small_page(browser, llm, pages, searxng, brave, tmp_path) -> Iterator[Page]:
    """Keeps the last 2 messages verbatim, so a small budget compresses early."""
    llm.clear()
    env = chat_env(llm, tmp_path, pages, KEEP_RECENT_MESSAGES="2", MAX_COMPLETION_TOKENS="200")
    service = ChatService(env, searxng.url).start()
    with opened(browser, service.url) as page:
        page.service = service
        yield page
    service.stop()


def save_settings(page: Page) -> None:
    page.locator("#settings-dialog button[type=submit]").click()


def test_a_small_budget_set_in_settings_compresses_and_saves_facts(small_page, llm):
    page = small_page
    page.locator("#conversation-settings").click()
    page.fill("#setting-context_budget", "1000")
    page.locator("#setting-web_search").uncheck()
    page.locator("#setting-web_fetch").uncheck()
    save_settings(page)
    expect(page.locator("#settings-dialog .saved")).to_contain_text("Saved 3 changes")
    page.keyboard.press("Escape")
    expect(page.locator("#tools-pill")).to_have_text("web: off")

    long_text = "I keep my servers in Kraków and prefer Debian. " * 40
    llm.script(Reply(text="Noted.", usage={"prompt_tokens": 900, "completion_tokens": 5}))
    send(page, long_text)
    wait_turn_end(page)
    llm.script(
        Reply(
            text=json.dumps({"summary": "Servers in Kraków.", "facts": ["User runs Debian"]}),
            usage={"prompt_tokens": 300, "completion_tokens": 20},
        ),
        Reply(text="Second answer.", usage={"prompt_tokens": 400, "completion_tokens": 5}),
    )
    send(page, long_text)
    wait_turn_end(page)
    expect(page.locator(".notice").first).to_contain_text(
        "2 messages folded into a summary, 1 fact saved to memory"
    )
    page.locator("#open-settings").click()
    expect(page.locator("#memory-text")).to_have_value(re.compile("User runs Debian"))


def test_a_context_overflow_is_compressed_and_retried_with_a_notice(small_page, llm):
    page = small_page
    for text in ("first", "second"):
        llm.script(Reply(text=f"Answer to the {text}."))
        send(page, f"The {text} message.")
        wait_turn_end(page)
    llm.script(
        context_length_exceeded(),
        Reply(text=json.dumps({"summary": "Two earlier questions.", "facts": []})),
        Reply(text="Answered after compressing."),
    )
    send(page, "The third message.")
    wait_turn_end(page)
    expect(page.locator(".notice").first).to_contain_text("4 messages folded into a summary")
    expect(page.locator(".message.assistant .answer").last).to_have_text(
        "Answered after compressing."
    )
    expect(page.locator(".error-card")).to_have_count(0)


def test_a_refused_setting_shows_the_servers_message_at_the_field(page):
    page.locator("#conversation-settings").click()
    page.fill("#setting-compress_prompt", "Summarise the chat, please.")
    save_settings(page)
    field = page.locator('.field[data-name="compress_prompt"]')
    expect(field.locator(".field-error")).to_contain_text("must contain {transcript}")
    expect(page.locator("#settings-dialog")).to_be_visible()
    expect(page.locator("#setting-compress_prompt")).to_have_value("Summarise the chat, please.")


def test_memory_is_typed_and_saved_only_once_memory_md_is_read(page, chat):
    chat.http.put("/api/memory", json={"text": "- Lives in Kraków\n"})
    held = []
    page.route("**/api/memory", lambda route: held.append(route))
    page.locator("#open-settings").click()
    # What a person types before the file arrives would be replaced by it.
    expect(page.locator("#memory-text")).not_to_be_editable()
    expect(page.locator("#save-memory")).to_be_disabled()
    while not held:
        page.wait_for_timeout(20)
    held[0].continue_()
    expect(page.locator("#memory-text")).to_have_value("- Lives in Kraków\n")
    expect(page.locator("#memory-text")).to_be_editable()

    page.keyboard.press("Escape")
    page.unroute("**/api/memory")
    page.route("**/api/memory", lambda route: route.fulfill(status=503, json={"detail": "down"}))
    page.locator("#open-settings").click()
    expect(page.locator("#settings-dialog")).to_contain_text("Could not read memory.md")
    # Saving after a failed read would empty the file.
    expect(page.locator("#save-memory")).to_be_disabled()
    assert chat.http.get("/api/memory").json()["text"] == "- Lives in Kraków\n"


def test_help_tips_show_what_a_change_costs(page):
    page.locator("#conversation-settings").click()
    field = page.locator('.field[data-name="web_search"]')
    field.locator("button.help").focus()
    expect(field.locator(".help-text")).to_contain_text("4,000 tokens")
    field.locator("button.help").click()  # pinned
    page.locator("#setting-context_budget").focus()
    expect(field.locator(".help-text")).to_be_visible()
    page.keyboard.press("Escape")
    expect(field.locator(".help-text")).to_be_hidden()
    expect(page.locator("#settings-dialog")).to_be_visible()  # the first Escape closed the tip


def test_models_added_in_settings_appear_in_the_picker_groups(page):
    page.locator("#open-settings").click()
    page.fill("#new-model", "qwen3:8b")
    page.locator("#new-model").press("Enter")
    expect(page.locator("#added-models")).to_contain_text("qwen3:8b")
    groups = page.locator("#model-picker optgroup")
    expect(groups.last).to_have_attribute("label", "Added by you")
    expect(groups.last.locator("option")).to_have_text(["qwen3:8b"])
    expect(groups.first).to_have_attribute("label", "Configured")


def test_conversations_are_listed_searched_renamed_and_deleted(page, llm):
    for question, answer in (("Pierogi recipe", "Flour."), ("Nginx proxy", "Use proxy_pass.")):
        llm.script(Reply(text=answer))
        page.locator("#new-conversation").click()
        send(page, question)
        wait_turn_end(page)
    items = page.locator(".conversation-item")
    expect(items).to_have_count(2)
    page.keyboard.press("Control+k")
    expect(page.locator("#chat-search")).to_be_focused()
    page.keyboard.type("proxy_pass")
    expect(items).to_have_count(1)
    expect(items.first).to_contain_text("Nginx proxy")
    page.fill("#chat-search", "")
    expect(items).to_have_count(2)

    first = items.filter(has_text="Pierogi recipe")
    first.hover()
    first.locator(".item-menu").click()
    first.get_by_role("menuitem", name="Rename").click()
    page.keyboard.press("Control+a")
    page.keyboard.type("Dumplings")
    page.keyboard.press("Enter")
    expect(page.locator(".conversation-item").filter(has_text="Dumplings")).to_have_count(1)

    target = page.locator(".conversation-item").filter(has_text="Dumplings")
    target.hover()
    target.locator(".item-menu").click()
    target.get_by_role("menuitem", name="Delete").click()
    page.locator(".confirm-delete").click()
    expect(page.locator(".conversation-item")).to_have_count(1)
    expect(page.locator(".conversation-item")).to_contain_text("Nginx proxy")


def test_a_late_answer_to_an_older_search_does_not_replace_the_list(page, llm):
    for question in ("Pierogi recipe", "Nginx proxy"):
        llm.script(Reply(text="Done."))
        page.locator("#new-conversation").click()
        send(page, question)
        wait_turn_end(page)
    items = page.locator(".conversation-item")
    expect(items).to_have_count(2)
    # A search's answer comes a second late, after the search box was cleared.
    page.evaluate(
        """() => {
            const original = window.fetch;
            window.fetch = async (url, init) => {
                const response = await original(url, init);
                if (String(url).includes("q=")) await new Promise((r) => setTimeout(r, 1000));
                return response;
            };
        }"""
    )
    page.fill("#chat-search", "pierogi")
    page.wait_for_timeout(400)  # past the search box's pause: the search has left
    page.fill("#chat-search", "")
    expect(items).to_have_count(2)
    page.wait_for_timeout(1200)  # the late answer has arrived: it must change nothing
    assert items.count() == 2


def test_export_downloads_the_conversation_as_markdown(page, llm, pages):
    article = f"{pages.url}/article"
    llm.script(
        Reply(tool_calls=[ToolCall("web_fetch", {"url": article})]),
        Reply(text="Four minutes [1]."),
    )
    send(page, f"Read the recipe at {article}")
    wait_turn_end(page)
    with page.expect_download() as download:
        page.locator("#export-conversation").click()
    text = open(download.value.path(), encoding="utf-8").read()
    assert "## You\n\n> Read the recipe at " in text
    assert "Four minutes [1]." in text
    assert f"1. [Pierogi, step by step]({article})" in text


def test_a_new_conversation_offers_examples_in_the_search_language(page, llm):
    examples = page.locator(".examples button")
    expect(examples).to_have_count(3)
    expect(examples.first).to_contain_text("nginx")
    expect(examples.first).to_contain_text("Jak")  # SEARCH_LOCALE is pl-PL


def test_the_search_locale_stays_one_word_on_a_phone(browser, chat):
    with opened(browser, chat.url, width=400, height=700) as page:
        locale = page.locator(".empty p .nowrap")
        expect(locale).to_have_text("pl-PL")
        for width in range(320, 400, 2):  # wherever the line happens to break
            page.set_viewport_size({"width": width, "height": 700})
            lines = locale.evaluate("node => node.getClientRects().length")
            assert lines == 1, f"pl-PL broken over {lines} lines at {width} px"


def test_the_page_is_usable_at_400_px(browser, chat, llm):
    with opened(browser, chat.url, width=400, height=800) as page:
        expect(page.locator("#sidebar")).not_to_be_in_viewport()
        page.locator("#open-sidebar").click()
        expect(page.locator("#new-conversation")).to_be_in_viewport()
        page.keyboard.press("Escape")
        expect(page.locator("#sidebar")).not_to_be_in_viewport()
        llm.script(Reply(text="Small screens work."))
        send(page, "Hello from a phone")
        wait_turn_end(page)
        width = page.evaluate("document.documentElement.scrollWidth")
        assert width <= 400, f"the page scrolls sideways ({width}px)"


def test_shift_enter_adds_a_line_and_ctrl_shift_o_starts_a_new_conversation(page, llm):
    composer = page.locator("#composer-input")
    composer.focus()
    page.keyboard.type("first line")
    page.keyboard.press("Shift+Enter")
    page.keyboard.type("second line")
    expect(composer).to_have_value("first line\nsecond line")
    expect(page.locator(".message.user")).to_have_count(0)
    llm.script(Reply(text="Two lines received."))
    page.ended_before = turns_ended(page)
    page.keyboard.press("Enter")
    wait_turn_end(page)
    expect(page.locator(".message.user .bubble")).to_have_text("first line\nsecond line")
    page.keyboard.press("Control+Shift+O")
    expect(page.locator(".empty")).to_be_visible()
    assert page.evaluate("location.hash") == "#/"
    expect(page.locator(".conversation-item")).to_have_count(1)


def test_with_a_token_the_page_asks_for_it_and_then_works(browser, llm, guarded, auth_token):
    with opened(browser, guarded.url, ready=False) as page:
        dialog = page.locator("#login-dialog")
        expect(dialog).to_be_visible()
        page.fill("#login-token", "wrong")
        page.keyboard.press("Enter")
        expect(page.locator("#login-error")).to_contain_text("wrong access token")
        page.fill("#login-token", auth_token)
        page.keyboard.press("Enter")
        expect(page.locator("body")).to_have_attribute("data-ready", "yes")
        llm.script(Reply(text="Authorised."))
        send(page, "Hello with a token")
        wait_turn_end(page)
        expect(page.locator(".message.assistant .answer")).to_have_text("Authorised.")


def test_the_menu_reaches_every_view_at_400_px(browser, chat):
    with opened(browser, f"{chat.url}/#/lab", width=400, height=800) as page:
        expect(page.locator("#view-lab")).to_be_visible()
        page.locator("#open-sidebar").click()
        page.locator("#open-status").click()
        expect(page.locator("#view-status")).to_be_visible()
        expect(page.locator("#sidebar")).not_to_be_in_viewport()
        page.locator("#open-sidebar").click()
        page.locator("#new-conversation").click()
        expect(page.locator(".empty")).to_be_visible()


OVERLAPS = """([a, b]) => !(a.right <= b.left || b.right <= a.left || a.bottom <= b.top
    || b.bottom <= a.top)"""


def covered(page, selector: str) -> list[str]:
    """The texts of `selector`'s elements the jump button lies over."""
    return page.evaluate(
        f"""(selector) => {{
            const jump = document.querySelector("#jump-latest").getBoundingClientRect();
            const overlaps = {OVERLAPS};
            return [...document.querySelectorAll(selector)]
                .filter((node) => overlaps([node.getBoundingClientRect(), jump]))
                .map((node) => node.textContent);
        }}""",
        selector,
    )


@pytest.mark.parametrize(("width", "height"), [(1280, 700), (390, 760)], ids=["wide", "phone"])
def test_jump_to_latest_covers_no_answers_figures_or_sources(browser, chat, llm, width, height):
    with opened(browser, chat.url, width=width, height=height) as page:
        for n in range(3):
            llm.script(Reply(text=[f"Paragraph {k} of answer {n}.\n\n" for k in range(12)]))
            send(page, f"Question {n}")
            wait_turn_end(page)
        stats = page.locator(".answer-stats")
        expect(stats).to_have_count(3)
        widths = [width] if width > 900 else range(width - 30, width + 41, 5)
        for index, each in ((i, w) for i in range(3) for w in widths):
            # each answer's figures at the bottom edge in turn; on a phone at widths around
            # 390 px too, so a wrapped line that happens to end at the right edge is seen
            page.set_viewport_size({"width": each, "height": height})
            page.locator("#messages").evaluate(
                """(m, i) => {
                    const row = m.querySelectorAll(".answer-stats")[i];
                    m.scrollTop += row.getBoundingClientRect().bottom
                        - m.getBoundingClientRect().bottom + 8;
                }""",
                index,
            )
            if index < 2:
                expect(page.locator("#jump-latest")).to_be_visible()
            assert covered(page, ".answer-stats > :not(.spacer), .source-chip") == [], each


def test_on_a_phone_the_lab_and_status_scroll_below_the_menu_button(browser, chat):
    """The ☰ floats over the page on a phone: a view that scrolls under it had its first
    words (the lab chart's "all") hidden behind it."""
    with opened(browser, chat.url + "/#/lab", width=390, height=700) as page:
        for view in ("lab", "status"):
            page.evaluate(f"location.hash = '#/{view}'")
            expect(page.locator(f"#view-{view}")).to_be_visible()
            menu = page.locator("#open-sidebar").bounding_box()
            scroller = page.locator(f"#view-{view}").bounding_box()
            assert scroller["y"] >= menu["y"] + menu["height"], (view, scroller, menu)


def test_the_view_follows_the_stream_until_the_reader_scrolls_up(browser, chat, llm):
    with opened(browser, chat.url, width=1000, height=500) as page:
        llm.script(Reply(text=[f"Paragraph {n}.\n\n" for n in range(120)], chunk_delay=0.03))
        send(page, "A long answer, please.")
        expect(page.locator(".answer")).to_contain_text("Paragraph 20")
        at_bottom = "(m => m.scrollHeight - m.scrollTop - m.clientHeight < 48)"
        page.wait_for_function(f"{at_bottom}(document.querySelector('#messages'))")
        page.locator("#messages").evaluate("m => m.scrollTo(0, 0)")
        expect(page.locator("#jump-latest")).to_be_visible()
        expect(page.locator(".answer")).to_contain_text("Paragraph 60")
        assert page.locator("#messages").evaluate("m => m.scrollTop") == 0  # left alone
        page.locator("#jump-latest").click()
        expect(page.locator("#jump-latest")).to_be_hidden()
        page.wait_for_function(f"{at_bottom}(document.querySelector('#messages'))")
        page.keyboard.press("Escape")
        wait_turn_end(page)


def test_a_refused_and_unsolicited_fetch_shows_in_the_trail(page, llm):
    metadata = "http://169.254.169.254/latest/meta-data/"
    llm.script(
        Reply(tool_calls=[ToolCall("web_fetch", {"url": metadata})]),
        Reply(text="I could not read that address."),
    )
    send(page, "Summarise the news, please.")
    wait_turn_end(page)
    trail = page.locator(".trail").last
    expect(trail.locator("summary")).to_contain_text("1 warning")
    trail.locator("summary").click()
    step = trail.locator(".timeline li.failed")
    expect(step).to_contain_text(f"Refused to read “{metadata}”")
    expect(step.locator(".unsolicited")).to_have_text("not from a result or your message")
    assert page.log.outside() == []


def test_ollamas_default_window_is_noted_on_the_context_bar(browser, pages, searxng, tmp_path):
    routes = ollama_routes("fake-model")  # not loaded, no num_ctx: Ollama's default window
    with FakeLLM(models=["fake-model", "fake-small"], routes=routes) as fake:
        service = ChatService(chat_env(fake, tmp_path, pages), searxng.url).start()
        try:
            with opened(browser, service.url) as page:
                fake.script(ollama_stream("fake-model", ["Warsaw."]))
                send(page, "What is the capital of Poland?")
                wait_turn_end(page)
                note = page.locator(".context-label .window-note.warning")
                expect(note).to_be_visible()
                expect(note).to_contain_text("default window (assumed 4096 tokens)")
                expect(note).to_contain_text("OLLAMA_CONTEXT_LENGTH")
                # Reopened, the conversation's stored budget brings the note back.
                page.reload()
                expect(page.locator(".context-label .window-note.warning")).to_be_visible()
                assert page.log.errors == []
        finally:
            service.stop()
