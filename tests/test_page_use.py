"""The page as a person uses it in the first ten minutes (issue 20): citations, wide tables,
several conversations streaming at once, error cards, the sign-in, the answer's own
controls, sources, the top bar on a phone, the sidebar, the keyboard, Settings, failure
wording and the smaller things. Real Chromium, the real service, the fakes outside."""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from contextlib import contextmanager

import httpx
from playwright.sync_api import expect

from tests.browser import opened
from tests.chat_client import new_conversation
from tests.chat_client import send as api_send
from tests.conftest import ChatService, chat_env
from tests.fakes.conventions import lmstudio_stream
from tests.fakes.llm_server import (
    FakeLLM,
    Reply,
    ToolCall,
    context_length_exceeded,
    server_error,
)
from tests.page_actions import LONG_ANSWER, conversation_id, send, turns_ended, wait_turn_end


def search_and_fetch(pages, answer: str | list[str], **reply) -> list[Reply]:
    """A search, then a read of the article (web_fetch reads only an address the model was
    given, so the tests that read it put its address in the user's message)."""
    return [
        Reply(tool_calls=[ToolCall("web_search", {"query": "pierogi czas gotowania"})]),
        Reply(tool_calls=[ToolCall("web_fetch", {"url": f"{pages.url}/article"})]),
        Reply(text=answer, **reply),
    ]


# -- 1. citations ---------------------------------------------------------------------------


def test_a_citation_shows_its_source_and_never_leaves_the_conversation(page, llm, pages):
    # The page read is the turn's source 21 (after 20 results): cited first, it shows as [1].
    llm.script(*search_and_fetch(pages, "Boil them for four minutes [21]. See also [2]."))
    send(page, f"Jak długo gotować pierogi? {pages.url}/article")
    wait_turn_end(page)
    address = page.url
    citations = page.locator(".answer a.citation")
    expect(citations).to_have_text(["[1]", "[2]"])
    citations.first.click()
    chip = page.locator(".source-chip").first
    expect(chip).to_have_class(re.compile("flash"))
    assert page.url == address
    expect(page.locator(".message.user")).to_have_count(1)
    # A result the model only saw, but cited: a chip beside the page read, in the order
    # cited, not folded away in the list of results seen.
    chips = page.locator(".source-chip .source-number")
    expect(chips).to_have_text(["1", "2"])
    expect(page.locator(".seen li")).to_have_count(19)
    citations.nth(1).click()
    expect(page.locator(".source-chip").nth(1)).to_have_class(re.compile("flash"))
    expect(page.locator(".flash")).to_have_count(1)  # [1]'s source no longer lit beside it
    assert page.url == address
    assert page.log.errors == []


def test_a_citation_clicked_while_the_answer_streams_keeps_the_stream(page, llm):
    # A search alone, no page read: the first page a service reads starts its extraction
    # worker, at low priority, which a busy machine can hold back for longer than the wait
    # for the stream below; what is tested here is the click while it streams.
    llm.script(
        Reply(tool_calls=[ToolCall("web_search", {"query": "pierogi czas gotowania"})]),
        Reply(text=["See [3].\n\n", *LONG_ANSWER], chunk_delay=0.03),
    )
    send(page, "Jak długo gotować pierogi?")
    expect(page.locator(".answer a.citation").first).to_be_visible()
    address = page.url
    page.locator(".answer a.citation").first.click()
    expect(page.locator("#stop")).to_be_visible()
    expect(page.locator(".message.user")).to_have_count(1)
    expect(page.locator(".answer")).to_contain_text("Sentence number 10")
    assert page.url == address
    page.locator("#stop").click()
    wait_turn_end(page)


# -- 2. wide tables -------------------------------------------------------------------------

WIDE_TABLE = (
    "| "
    + " | ".join(f"Column {n}" for n in range(1, 11))
    + " |\n|:--|"
    + "|".join([":--:"] * 4 + ["--:"] * 5)
    + "|\n"
    + "".join(
        "| " + " | ".join(f"value{row}.{n}" for n in range(1, 11)) + " |\n" for row in range(1, 4)
    )
)


def test_a_wide_table_keeps_its_words_and_scrolls_sideways(page, llm):
    llm.script(Reply(text=f"Here:\n\n{WIDE_TABLE}\nDone."))
    send(page, "A wide table, please.")
    wait_turn_end(page)
    table = page.locator(".answer table")
    found = table.evaluate(
        """t => ({
          scrolls: t.scrollWidth > t.clientWidth + 10,
          pageWidth: document.documentElement.scrollWidth,
          lines: [...t.querySelectorAll('td')].map(td => {
            const r = document.createRange(); r.selectNodeContents(td);
            return r.getClientRects().length; }),
          right: getComputedStyle(t.querySelector('td.align-right')).textAlign,
          center: getComputedStyle(t.querySelector('td.align-center')).textAlign,
        })"""
    )
    assert found["scrolls"], "the table does not scroll sideways"
    assert max(found["lines"]) == 1, "a cell's word was broken across lines"
    assert found["pageWidth"] <= 1280
    assert found["right"] == "right" and found["center"] == "center"


# -- 4. several conversations streaming -----------------------------------------------------


def test_each_conversation_has_its_own_stream_and_stop(page, llm):
    llm.script(Reply(text=LONG_ANSWER, chunk_delay=0.05))
    send(page, "First: a long story.")
    expect(page.locator(".answer")).to_contain_text("Sentence number 2")
    first = conversation_id(page)
    page.locator("#new-conversation").click()
    expect(page.locator(".empty")).to_be_visible()
    expect(page.locator("#send")).to_be_visible()
    expect(page.locator("#stop")).to_be_hidden()
    streaming = page.locator(f'.conversation-item.streaming[data-id="{first}"]')
    expect(streaming).to_have_count(1)

    llm.script(Reply(text=[f"Second {n}. " for n in range(60)], chunk_delay=0.05))
    page.fill("#composer-input", "Second: another one.")
    page.keyboard.press("Enter")  # not ignored while the first answers
    expect(page.locator(".answer")).to_contain_text("Second 3")
    second = conversation_id(page)
    assert second != first
    page.locator(f'.conversation-item[data-id="{first}"] a').click()
    expect(page.locator(".message.user .bubble")).to_have_text("First: a long story.")
    expect(page.locator("#stop")).to_be_visible()
    expect(page.locator(".answer")).to_contain_text("Sentence number 40")  # still streaming
    page.locator("#stop").click()
    expect(page.locator(".badge.interrupted")).to_be_visible()
    expect(page.locator("#send")).to_be_visible()
    # The second went on, and ends while the first is shown: marked as unseen.
    unseen = page.locator(f'.conversation-item.unseen[data-id="{second}"]')
    expect(unseen).to_have_count(1, timeout=20_000)
    page.locator(f'.conversation-item[data-id="{second}"] a').click()
    expect(page.locator(".answer")).to_contain_text("Second 59")
    expect(page.locator(".badge.interrupted")).to_have_count(0)
    expect(page.locator(f'.conversation-item.unseen[data-id="{second}"]')).to_have_count(0)
    assert page.log.errors == []


def test_the_text_left_in_the_box_stays_with_its_conversation(page, llm):
    llm.script(Reply(text="First answer."))
    send(page, "First question")
    wait_turn_end(page)
    first = conversation_id(page)
    page.fill("#composer-input", "Half a follow-up")
    page.locator("#new-conversation").click()
    expect(page.locator(".empty")).to_be_visible()
    expect(page.locator("#composer-input")).to_have_value("")
    page.fill("#composer-input", "A new idea")
    page.locator(f'.conversation-item[data-id="{first}"] a').click()
    expect(page.locator("#composer-input")).to_have_value("Half a follow-up")
    page.locator("#new-conversation").click()
    expect(page.locator("#composer-input")).to_have_value("A new idea")


def test_the_text_left_in_a_box_survives_a_reload(page, llm):
    llm.script(Reply(text="First answer."))
    send(page, "First question")
    wait_turn_end(page)
    first = conversation_id(page)
    page.locator("#composer-input").press_sequentially("Half a follow-up")
    page.locator("#new-conversation").click()
    page.locator("#composer-input").press_sequentially("A new idea")
    page.reload()
    page.wait_for_selector("body[data-ready]", state="attached")
    expect(page.locator("#composer-input")).to_have_value("A new idea")
    page.locator(f'.conversation-item[data-id="{first}"] a').click()
    expect(page.locator("#composer-input")).to_have_value("Half a follow-up")
    page.reload()
    page.wait_for_selector("body[data-ready]", state="attached")
    expect(page.locator("#composer-input")).to_have_value("Half a follow-up")
    llm.script(Reply(text="Second answer."))
    page.ended_before = turns_ended(page)
    page.locator("#composer-input").press("Enter")
    wait_turn_end(page)
    page.reload()
    page.wait_for_selector("body[data-ready]", state="attached")
    expect(page.locator(".message.assistant .answer").last).to_have_text("Second answer.")
    expect(page.locator("#composer-input")).to_have_value("")  # sent, the draft went


def test_a_message_given_back_by_a_failure_keeps_its_card_and_retry_after_a_reload(page, llm):
    llm.script(server_error(500))
    send(page, "My carefully written question")
    wait_turn_end(page)
    expect(page.locator(".error-card")).to_contain_text("Your message is back in the box below.")
    for _ in range(2):  # and again after the Retry's own reload
        page.reload()
        page.wait_for_selector("body[data-ready]", state="attached")
        expect(page.locator("#composer-input")).to_have_value("My carefully written question")
        card = page.locator(".error-card")
        expect(card).to_have_count(1)
        expect(card.locator("h3")).to_have_text("The model server failed")
        expect(card).to_contain_text("Your message is back in the box below.")
        expect(page.locator(".empty")).to_have_count(0)
        # Nothing answered, nothing measured, nothing to export (nor is it listed).
        expect(page.locator("#totals")).to_have_text("No turns yet")
        expect(page.locator(".context-label")).to_contain_text("measured after the first answer")
        expect(page.locator("#export-conversation")).to_be_disabled()
        expect(page.locator(".conversation-item")).to_have_count(0)
    llm.script(Reply(text="It worked this time."))
    page.ended_before = turns_ended(page)
    card.get_by_role("button", name="Retry").click()
    wait_turn_end(page)
    expect(page.locator(".message.assistant .answer").last).to_have_text("It worked this time.")
    page.reload()
    page.wait_for_selector("body[data-ready]", state="attached")
    expect(page.locator(".message.assistant .answer").last).to_have_text("It worked this time.")
    expect(page.locator(".error-card")).to_have_count(0)
    expect(page.locator("#composer-input")).to_have_value("")


def test_a_long_message_of_yours_folds_and_its_code_is_monospace(page, llm):
    code = "```nginx\nserver {\n    listen 80;\n}\n```"
    message = "Why does this fail?\n" + code + "\n" + "\n".join(f"log line {n}" for n in range(30))
    llm.script(Reply(text="Look at line 2."))
    send(page, message)
    wait_turn_end(page)
    bubble = page.locator(".message.user .bubble")
    font = bubble.locator(".bubble-code").evaluate("node => getComputedStyle(node).fontFamily")
    assert "mono" in font.lower(), font
    assert bubble.evaluate("node => node.textContent") == message  # exactly what was sent
    folded = bubble.bounding_box()["height"]
    toggle = page.get_by_role("button", name="Show more")
    toggle.click()
    expect(page.get_by_role("button", name="Show less")).to_have_attribute("aria-expanded", "true")
    assert bubble.bounding_box()["height"] > folded * 1.5
    page.get_by_role("button", name="Show less").click()
    expect(page.get_by_role("button", name="Show more")).to_be_visible()
    page.locator(".message.user .edit").click()
    expect(page.locator(".edit-box textarea")).to_have_value(message)


# -- 5. one error card; no empty conversation -------------------------------------------------


def test_a_resent_message_replaces_its_error_card_and_no_empty_conversation_is_listed(page, llm):
    for _ in range(3):
        llm.script(server_error(500))
        send(page, "A first message that keeps failing")
        wait_turn_end(page)
        expect(page.locator(".error-card")).to_have_count(1)
    expect(page.locator(".conversation-item")).to_have_count(0)
    llm.script(Reply(text="At last."))
    send(page, "A first message that keeps failing")
    wait_turn_end(page)
    expect(page.locator(".error-card")).to_have_count(0)
    expect(page.locator(".conversation-item")).to_have_count(1)


def test_settings_saved_on_a_new_conversation_do_not_list_it(page):
    page.locator("#conversation-settings").click()
    page.locator("#setting-web_fetch").uncheck()
    page.locator("#settings-dialog button[type=submit]").click()
    expect(page.locator("#settings-dialog .saved")).to_contain_text("Saved 1 change")
    page.keyboard.press("Escape")
    page.reload()
    page.wait_for_selector("body[data-ready]", state="attached")
    expect(page.locator(".conversation-empty")).to_have_text("No conversations yet.")


# -- 6. the sign-in -------------------------------------------------------------------------


def test_escape_does_not_dismiss_the_sign_in(browser, guarded, auth_token):
    with opened(browser, guarded.url, ready=False) as page:
        dialog = page.locator("#login-dialog")
        expect(dialog).to_be_visible()
        for _ in range(3):
            page.keyboard.press("Escape")
            page.wait_for_timeout(100)
            expect(dialog).to_be_visible()
        page.fill("#login-token", auth_token)
        page.keyboard.press("Enter")
        expect(page.locator("body")).to_have_attribute("data-ready", "yes")
        expect(page.locator("#model-picker option")).not_to_have_count(0)


# -- 8. the answer's controls and the title --------------------------------------------------


def test_an_answer_shows_its_model_and_time_copies_whole_and_the_title_shows(page, llm, pages):
    llm.script(*search_and_fetch(pages, "## Boiling\n\nFour minutes [21], **salted** water."))
    send(page, f"Jak długo gotować pierogi? {pages.url}/article")
    wait_turn_end(page)

    def check() -> None:
        answer = page.locator(".message.assistant").last
        expect(answer.locator(".answer-model")).to_have_text("fake-model")
        expect(answer.locator(".answer-meta time")).to_have_text(re.compile(r"\d{1,2}:\d{2}"))
        answer.locator(".copy-answer").click()
        copied = page.evaluate("navigator.clipboard.readText()")
        assert copied.startswith("## Boiling\n\nFour minutes [1], **salted** water.")
        assert f"1. [Pierogi, step by step]({pages.url}/article)" in copied
        expect(page.locator("#conversation-title")).to_have_text(
            re.compile(r"^Jak długo gotować pierogi\?")
        )

    check()
    page.reload()
    check()


# -- 9. sources -----------------------------------------------------------------------------


def test_a_chip_shows_the_pages_title_and_host_and_numbers_start_at_one(page, llm, pages):
    llm.script(*search_and_fetch(pages, "Four minutes [21], salted water [3]."))
    send(page, f"Jak długo gotować pierogi? {pages.url}/article")
    wait_turn_end(page)
    # The model saw it under another number: the service renumbers as the answer cites.
    tools = [m["content"] for r in llm.requests for m in r.body["messages"] if m["role"] == "tool"]
    assert any(text.startswith("[21] ") for text in tools)
    chip = page.locator(".source-chip").first
    expect(chip.locator(".source-number")).to_have_text("1")
    expect(chip.locator(".source-title")).to_have_text("Pierogi, step by step")
    expect(chip.locator(".source-host")).to_have_text("127.0.0.1")
    expect(page.locator(".answer a.citation")).to_have_text(["[1]", "[2]"])
    # The second one cited comes next, a chip too; the results only seen follow, folded.
    expect(page.locator(".source-chip .source-number")).to_have_text(["1", "2"])
    expect(page.locator(".seen li").first).to_have_attribute("value", "3")


# -- 10. the top bar on a phone -------------------------------------------------------------


def test_the_top_bar_on_a_phone_is_one_line_with_details_on_demand(browser, chat, llm):
    with opened(browser, chat.url, width=400, height=800) as page:
        llm.script(server_error(500))  # the message comes back: the attempt left nothing
        send(page, "Hello from a phone")
        wait_turn_end(page)
        llm.script(Reply(text="Hi.", usage={"prompt_tokens": 900, "completion_tokens": 5}))
        send(page, "Hello from a phone")
        wait_turn_end(page)
        totals = page.locator("#totals")
        expect(totals).to_contain_text("in 900")
        text = totals.inner_text()
        assert "not reported" not in text and not re.search(r"\b0 (turns|searches|pages)", text)
        assert "in 0" not in text and "out 0" not in text
        height = page.locator(".topbar").bounding_box()["height"]
        assert height <= 120, f"the top bar takes {height}px of 800"
        expect(page.locator(".context-label")).to_be_hidden()
        totals.click()
        expect(page.locator(".context-label")).to_be_visible()


# -- 11. the sidebar ------------------------------------------------------------------------


def two_conversations(chat, llm) -> tuple[str, str]:
    ids = []
    for question in ("Pierogi recipe with a long title that fills the row", "Nginx proxy"):
        llm.script(Reply(text="Done."))
        conversation = new_conversation(chat)
        assert api_send(chat, conversation, question)[-1]["type"] == "done"
        ids.append(conversation)
    return ids[0], ids[1]


def test_the_sidebar_rows_give_titles_the_row_and_a_menu_renames_in_place(page, chat, llm):
    older, newer = two_conversations(chat, llm)
    page.reload()
    page.wait_for_selector("body[data-ready]", state="attached")
    rows = page.locator(".conversation-item")
    expect(rows).to_have_count(2)
    row = rows.filter(has_text="Pierogi")
    link, box = row.locator("a").bounding_box(), row.bounding_box()
    assert link["width"] >= box["width"] - 2, "the title does not get the whole row"
    row.hover()
    row.locator(".item-menu").click()
    page.get_by_role("menuitem", name="Rename").click()
    page.keyboard.press("Control+a")
    page.keyboard.type("Dumplings")
    page.keyboard.press("Enter")
    expect(rows.first).to_contain_text("Nginx proxy")  # renaming does not move it up
    expect(rows.last).to_contain_text("Dumplings")
    rows.last.locator("a").dblclick()
    page.keyboard.press("Control+a")
    page.keyboard.type("Pierogi again")
    page.keyboard.press("Enter")
    expect(rows.last).to_contain_text("Pierogi again")
    expect(rows.first).to_contain_text("Nginx proxy")
    listed = [c["id"] for c in httpx.get(f"{chat.url}/api/conversations").json()]
    assert listed == [newer, older]


def test_a_rename_is_saved_once_and_escape_saves_nothing(page, chat, llm):
    """Enter saves the new title once: the row drawn again afterwards must not save it a
    second time (nor draw the list again under a double-click that starts the next
    rename, whose typing would then go to the message box and be sent). Escape saves
    nothing, however the box goes away."""
    older, _ = two_conversations(chat, llm)
    page.reload()
    page.wait_for_selector("body[data-ready]", state="attached")
    row = page.locator(f'.conversation-item[data-id="{older}"]')
    row.locator("a").dblclick()
    page.keyboard.press("Control+a")
    page.keyboard.type("Dumplings")
    page.keyboard.press("Enter")
    expect(row).to_contain_text("Dumplings")
    row.locator("a").dblclick()
    page.keyboard.press("Control+a")
    page.keyboard.type("Not this one")
    page.keyboard.press("Escape")
    expect(row.locator("a")).to_have_text("Dumplings")
    page.wait_for_timeout(500)  # time for a late save to show itself
    renames = [r for r in page.log.responses if r[0] == "PATCH"]
    assert len(renames) == 1, renames
    titles = {c["id"]: c["title"] for c in httpx.get(f"{chat.url}/api/conversations").json()}
    assert titles[older] == "Dumplings"


def test_on_a_touch_screen_the_row_menu_is_a_44_px_target(browser, chat, llm):
    two_conversations(chat, llm)
    context = browser.new_context(
        viewport={"width": 400, "height": 800}, has_touch=True, is_mobile=True
    )
    page = context.new_page()
    try:
        page.goto(chat.url)
        page.wait_for_selector("body[data-ready]", state="attached")
        page.locator("#open-sidebar").tap()
        menu = page.locator(".conversation-item .item-menu").first
        expect(menu).to_be_visible()
        size = menu.bounding_box()
        # Chromium gives the box in floats, its edges moved by the sidebar's transform: a
        # 44 px button has measured 43.99999237 wide at x = 96.85: compared to 0.01 px.
        assert round(size["width"], 2) >= 44 and round(size["height"], 2) >= 44, size
        menu.tap()
        expect(page.get_by_role("menuitem", name="Delete")).to_be_visible()
    finally:
        context.close()


# -- 12. the keyboard -----------------------------------------------------------------------


def test_the_keyboard_reaches_the_message_box_in_few_steps(page, chat, llm):
    for n in range(4):
        llm.script(Reply(text="Done."))
        assert api_send(chat, new_conversation(chat), f"Question {n}")[-1]["type"] == "done"
    page.reload()
    page.wait_for_selector("body[data-ready]", state="attached")
    expect(page.locator(".conversation-item")).to_have_count(4)
    # From the top of the page, as after clicking outside any control.
    page.evaluate("document.body.tabIndex = -1; document.body.focus()")
    page.keyboard.press("Tab")
    expect(page.locator("#skip-link")).to_be_focused()
    page.keyboard.press("Enter")
    expect(page.locator("#composer-input")).to_be_focused()
    assert page.evaluate("location.hash") in ("", "#/")

    page.locator("#chat-search").focus()
    page.keyboard.press("Tab")
    links = page.locator(".conversation-item a")
    expect(links.first).to_be_focused()
    page.keyboard.press("ArrowDown")
    expect(links.nth(1)).to_be_focused()
    page.keyboard.press("Tab")  # one stop for the whole list
    expect(page.locator("#open-lab")).to_be_focused()
    links.nth(2).click()
    expect(page.locator(".message.user")).to_have_count(1)
    expect(page.locator("#composer-input")).to_be_focused()


def test_escape_and_keep_leave_the_delete_undone_and_the_focus_on_the_row(page, chat, llm):
    """The inline confirmation starts on Keep, so an Enter pressed out of habit deletes
    nothing; Escape keeps too; either way the keyboard goes on from the same row, and so
    does Escape in a rename."""
    older, newer = two_conversations(chat, llm)
    page.reload()
    page.wait_for_selector("body[data-ready]", state="attached")
    row = page.locator(f'.conversation-item[data-id="{older}"]')
    row.locator("a").focus()
    page.keyboard.press("Delete")
    expect(row.locator(".confirm-delete")).to_be_visible()
    expect(row.get_by_role("button", name="Keep")).to_be_focused()
    page.keyboard.press("Enter")
    expect(row.locator("a")).to_be_focused()
    page.keyboard.press("Delete")
    expect(row.locator(".confirm-delete")).to_be_visible()
    page.keyboard.press("Escape")
    expect(row.locator(".confirm-delete")).to_have_count(0)
    expect(row.locator("a")).to_be_focused()
    page.keyboard.press("F2")
    expect(row.locator("input")).to_be_focused()
    page.keyboard.press("Escape")
    expect(row.locator("a")).to_be_focused()
    listed = [c["id"] for c in httpx.get(f"{chat.url}/api/conversations").json()]
    assert listed == [newer, older]  # nothing deleted


def test_the_arrow_keys_reach_the_search_results(page, chat, llm):
    two_conversations(chat, llm)
    page.reload()
    page.wait_for_selector("body[data-ready]", state="attached")
    page.keyboard.press("Control+k")
    page.keyboard.type("nginx")
    rows = page.locator(".conversation-item")
    expect(rows).to_have_count(1)
    page.keyboard.press("ArrowDown")
    expect(rows.first.locator("a")).to_be_focused()
    page.keyboard.press("ArrowUp")
    expect(page.locator("#chat-search")).to_be_focused()
    page.keyboard.press("ArrowDown")
    page.keyboard.press("Enter")
    expect(page.locator(".message.user")).to_contain_text("Nginx proxy")


# -- 13. Settings ---------------------------------------------------------------------------


def test_the_two_settings_are_named_apart_and_a_saved_form_offers_close(page):
    sidebar = page.locator("#open-settings")
    chat_settings = page.get_by_role("button", name="Chat settings")
    expect(sidebar).to_have_text("Settings")
    expect(chat_settings).to_be_visible()
    chat_settings.click()
    page.locator("#setting-web_fetch").uncheck()
    dialog = page.locator("#settings-dialog")
    expect(dialog.get_by_role("button", name="Cancel")).to_be_visible()
    dialog.locator("button[type=submit]").click()
    expect(dialog.locator(".saved")).to_contain_text("Saved 1 change")
    expect(dialog.get_by_role("button", name="Cancel")).to_have_count(0)  # nothing to cancel
    dialog.get_by_role("button", name="Close", exact=True).click()
    expect(dialog).to_be_hidden()


def test_an_answer_says_only_what_its_server_reported(page, llm):
    """No "cost not reported" under every answer of a local server, and the totals count
    an answer without usage in plain words."""
    llm.script(lmstudio_stream("fake-model", ["Four ", "minutes."]))  # it sends no usage
    send(page, "How long do pierogi boil?")
    wait_turn_end(page)
    stats = page.locator(".message.assistant .answer-stats")
    expect(stats).to_contain_text("usage not reported")
    expect(stats).not_to_contain_text("cost")
    totals = page.locator("#totals")
    expect(totals).to_contain_text("1 answer without token counts")
    expect(totals).not_to_contain_text("attempt")


def test_help_tips_stay_inside_the_viewport(browser, chat):
    for width, height in ((1280, 900), (400, 800)):
        with opened(browser, chat.url, width=width, height=height) as page:
            page.locator("#conversation-settings").click()
            buttons = page.locator("#settings-dialog button.help")
            for index in range(buttons.count()):
                button = buttons.nth(index)
                button.scroll_into_view_if_needed()
                button.focus()
                tip = page.locator(".help-text:not([hidden])")
                expect(tip).to_have_count(1)
                box = tip.bounding_box()
                assert box["x"] >= 0 and box["x"] + box["width"] <= width, (width, index, box)
                assert box["y"] >= 0 and box["y"] + box["height"] <= height, (width, index, box)
                # Shown whole: its far corner is not cut off by the dialog's edge.
                corner = tip.evaluate(
                    """t => { const r = t.getBoundingClientRect();
                      const at = document.elementFromPoint(r.right - 3, r.bottom - 3);
                      return at === t || t.contains(at); }"""
                )
                assert corner, (width, index, "the tip is cut off")


def test_a_refused_value_reads_in_plain_words_and_save_stays_in_sight(browser, chat):
    with opened(browser, chat.url, width=1280, height=700) as page:
        page.locator("#conversation-settings").click()
        save = page.locator("#settings-dialog button[type=submit]")
        expect(save).to_be_in_viewport()
        page.fill("#setting-context_budget", "20000000")
        save.click()
        error = page.locator('.field[data-name="context_budget"] .field-error')
        expect(error).to_have_text("At most 10,000,000.")
        page.locator("#setting-compress_prompt").scroll_into_view_if_needed()
        expect(save).to_be_in_viewport()
        locale = page.locator("#setting-search_locale")
        options = page.locator("#setting-locale-list option")
        assert "pl-PL" in [options.nth(n).get_attribute("value") for n in range(options.count())]
        assert locale.get_attribute("list") == "setting-locale-list"
        page.fill("#setting-context_budget", "20000")
        page.fill("#setting-search_locale", "pt-BR")  # free entry still taken
        save.click()
        expect(page.locator("#settings-dialog .saved")).to_contain_text("Saved")


def test_the_budget_is_checked_against_the_served_window(browser, pages, searxng, tmp_path):
    with FakeLLM(models=["fake-model", "fake-small"], n_ctx=32768) as fake:
        service = ChatService(chat_env(fake, tmp_path, pages), searxng.url).start()
        try:
            with opened(browser, service.url) as page:
                page.locator("#conversation-settings").click()
                page.fill("#setting-context_budget", "40000")
                page.locator("#settings-dialog button[type=submit]").click()
                error = page.locator('.field[data-name="context_budget"] .field-error')
                expect(error).to_contain_text("At most 32,768 tokens")
                page.fill("#setting-context_budget", "30000")
                page.locator("#settings-dialog button[type=submit]").click()
                expect(page.locator("#settings-dialog .saved")).to_contain_text("Saved 1 change")
        finally:
            service.stop()


# -- 14. failure wording --------------------------------------------------------------------


def test_a_model_server_that_dies_mid_answer_says_so_and_retry_survives_a_reload(page, llm):
    llm.script(Reply(text=LONG_ANSWER, break_after=5, chunk_delay=0.01))
    send(page, "Tell me a story.")
    wait_turn_end(page)

    def check() -> None:
        expect(page.locator(".message.assistant .answer")).to_contain_text("Sentence number 3")
        card = page.locator(".error-card")
        expect(card.locator("h3")).to_have_text(
            "The model server closed the answer before it ended"
        )
        expect(card.locator("details.detail")).to_be_attached()
        expect(card.get_by_role("button", name="Retry")).to_be_visible()

    check()
    page.reload()
    check()
    llm.script(Reply(text="A whole story."))
    page.ended_before = turns_ended(page)
    page.locator(".error-card").get_by_role("button", name="Retry").click()
    wait_turn_end(page)
    expect(page.locator(".message.assistant .answer")).to_have_text("A whole story.")
    expect(page.locator(".error-card")).to_have_count(0)


def test_overflow_advice_says_what_will_happen(page, llm):
    llm.script(context_length_exceeded(), context_length_exceeded())
    send(page, "A message that no longer fits.")
    wait_turn_end(page)
    card = page.locator(".error-card")
    expect(card).to_contain_text("already folded")
    expect(card).to_contain_text("shorten the message")
    expect(card).not_to_contain_text("folded into a summary when you retry")


@contextmanager
def clocked(browser) -> Iterator:
    """A blank page on a fake clock (its waits pass only when the test moves it)."""
    with opened(browser, "about:blank", ready=False) as page:
        page.clock.install()
        yield page


def answered(page, path: str, answers: list) -> list[str]:
    """Asks for `path` answered by `answers` in turn (a route's answer each), then by the
    service: the addresses asked, as they come."""
    asked: list[str] = []

    def answer(route) -> None:
        asked.append(route.request.url)
        if len(asked) <= len(answers):
            answers[len(asked) - 1](route)
        else:
            route.continue_()

    page.route(path, answer)
    return asked


def never(route) -> None:
    """A connection a proxy or a NAT dropped without a word: no answer, no error."""


def test_a_page_opened_while_the_service_cannot_answer_starts_by_itself_once_it_does(browser, chat):
    bad_gateway = "<html><body><h1>502 Bad Gateway</h1><hr>nginx</body></html>"
    with clocked(browser) as page:
        asked = answered(
            page,
            "**/api/config",
            [
                lambda route: route.abort("connectionreset"),  # the service restarting
                lambda route: route.fulfill(status=502, content_type="text/html", body=bad_gateway),
            ],
        )
        page.goto(chat.url)
        notice = page.locator("#start-notice")
        # As long as open_page gives a page to get ready (a busy machine's load).
        expect(notice.locator(".start-reason")).to_contain_text(
            "The chat service did not answer", timeout=15_000
        )
        expect(notice.locator(".start-retry")).to_contain_text("Trying again in 2 s.")
        expect(page.locator("#app")).to_be_hidden()
        page.clock.run_for(1_000)
        expect(notice.locator(".start-retry")).to_contain_text("Trying again in 1 s.")
        assert len(asked) == 1, "asked again before its wait"
        page.clock.run_for(1_000)  # asked again: a proxy's page now
        expect(notice.locator(".start-reason")).to_have_text(
            "The chat service cannot serve the page now: HTTP 502"
        )
        expect(notice.locator(".start-retry")).to_contain_text("Trying again in 4 s.")
        page.get_by_role("button", name="Try now").click()  # no need to wait the 4 s
        expect(page.locator("body")).to_have_attribute("data-ready", "yes", timeout=15_000)
        expect(notice).to_have_count(0)
        expect(page.locator("#app")).to_be_visible()
        expect(page.locator(".conversation-empty")).to_have_text("No conversations yet.")
        expect(page.locator("#model-picker option")).not_to_have_count(0)
        assert len(asked) == 3


def test_a_page_whose_first_ask_is_never_answered_gives_up_on_it_and_asks_again(browser, chat):
    with clocked(browser) as page:
        asked = answered(page, "**/api/config", [never])
        page.goto(chat.url)
        notice = page.locator("#start-notice")
        wait_asked(page, asked)  # its wait starts with its ask
        page.clock.run_for(19_000)
        expect(notice).to_have_count(0)
        page.clock.run_for(1_000)
        expect(notice.locator(".start-reason")).to_have_text(
            "The chat service did not answer within 20 s"
        )
        page.clock.run_for(2_000)
        expect(page.locator("body")).to_have_attribute("data-ready", "yes", timeout=15_000)
        assert len(asked) == 2


def test_a_conversation_whose_answer_never_comes_is_said_and_the_page_starts(browser, chat):
    with clocked(browser) as page:
        asked = answered(page, "**/api/conversations/*", [never])
        page.goto(f"{chat.url}/#/c/0123456789abcdef")
        wait_asked(page, asked)
        page.clock.run_for(20_000)
        expect(page.locator("body")).to_have_attribute("data-ready", "yes", timeout=15_000)
        expect(page.locator("#messages .notice.warning")).to_have_text(
            "That conversation could not be opened: the chat service did not answer within 20 s"
        )


def wait_asked(page, asked: list[str]) -> None:
    """Until the page has asked (15 s at most, as open_page gives a page to get ready)."""
    deadline = time.monotonic() + 15
    while not asked:
        assert time.monotonic() < deadline, "the page never asked"
        page.wait_for_timeout(50)


def test_a_refusal_of_the_page_is_said_once_and_not_asked_again(browser, chat):
    refusal = {"detail": "this address is not one the service answers on"}
    with clocked(browser) as page:
        asked = answered(
            page, "**/api/config", [lambda route: route.fulfill(status=403, json=refusal)]
        )
        page.goto(chat.url)
        notice = page.locator("#start-notice")
        expect(notice.locator(".start-reason")).to_have_text(
            f"The chat service cannot serve the page now: {refusal['detail']}", timeout=15_000
        )
        expect(notice.locator(".start-retry")).to_be_hidden()
        page.clock.run_for(120_000)
        assert len(asked) == 1
        expect(page.locator("body")).not_to_have_attribute("data-ready", "yes")


def test_a_list_whose_answer_is_cut_is_said_and_the_page_still_starts(browser, chat):
    cut = '[{"id": "4f1c", "title": "Pierogi", "upd'  # the connection broke here
    with clocked(browser) as page:
        answered(
            page,
            "**/api/conversations",
            [lambda route: route.fulfill(status=200, content_type="application/json", body=cut)],
        )
        page.goto(chat.url)
        expect(page.locator("body")).to_have_attribute("data-ready", "yes", timeout=15_000)
        expect(page.locator("#conversation-list .list-error")).to_contain_text(
            "Conversations could not be loaded: the chat service's answer did not come whole"
        )
        page.clock.run_for(2_000)  # asked again by itself
        expect(page.locator(".conversation-empty")).to_have_text("No conversations yet.")


def test_a_list_the_service_refuses_is_said_and_not_asked_again(browser, chat):
    refusal = {"detail": "q: a search is at most 200 characters"}
    with clocked(browser) as page:
        asked = answered(
            page, "**/api/conversations*", [lambda route: route.fulfill(status=400, json=refusal)]
        )
        page.goto(chat.url)
        expect(page.locator("body")).to_have_attribute("data-ready", "yes", timeout=15_000)
        expect(page.locator("#conversation-list .list-error")).to_have_text(
            f"Conversations could not be loaded: {refusal['detail']}"
        )
        page.clock.run_for(120_000)
        assert len(asked) == 1  # asking again would be refused again


# -- 15. smaller things ---------------------------------------------------------------------


def test_a_bullet_list_before_a_numbered_list_stays_tight(page, llm):
    llm.script(Reply(text="Take:\n\n- flour\n- water\n\n1. Mix.\n2. Knead."))
    send(page, "How?")
    wait_turn_end(page)
    answer = page.locator(".message.assistant .answer")
    expect(answer.locator("ul > li")).to_have_count(2)
    expect(answer.locator("ul > li > p")).to_have_count(0)
    expect(answer.locator("ol > li > p")).to_have_count(0)


def test_the_placeholder_fits_the_message_box_on_a_phone(browser, chat):
    with opened(browser, chat.url, width=400, height=800) as page:
        fits = page.locator("#composer-input").evaluate(
            """box => {
              const copy = box.cloneNode(); copy.value = box.placeholder;
              copy.style.height = getComputedStyle(box).height;
              copy.style.width = getComputedStyle(box).width; copy.style.flex = "none";
              box.after(copy); const ok = copy.scrollHeight <= copy.clientHeight + 1;
              copy.remove(); return ok; }"""
        )
        assert fits, "the placeholder is clipped"


def test_export_names_the_file_after_the_title(page, llm):
    llm.script(Reply(text="Four minutes."))
    send(page, "Jak długo gotować pierogi?")
    wait_turn_end(page)
    with page.expect_download() as download:
        page.locator("#export-conversation").click()
    assert download.value.suggested_filename == "Jak-długo-gotować-pierogi.md"


def test_the_theme_switch_picks_light_dark_or_the_system(browser, chat):
    with opened(browser, chat.url, dark=False) as page:
        background = "getComputedStyle(document.body).backgroundColor"
        light = page.evaluate(background)
        page.select_option("#theme", "dark")
        dark = page.evaluate(background)
        assert dark != light
        page.reload()
        page.wait_for_selector("body[data-ready]", state="attached")
        assert page.evaluate(background) == dark
        page.select_option("#theme", "system")
        assert page.evaluate(background) == light


def test_the_status_panel_says_the_tool_check_generates_tokens(page):
    page.locator("#open-status").click()
    expect(page.locator(".status-intro")).to_contain_text("up to 8 tokens")
    expect(page.locator(".status-intro")).not_to_contain_text("spend nothing")
