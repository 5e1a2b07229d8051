"""What the page says when the service refuses what a person asked: a delete of a
conversation still answering, a message too long. The page stays where it was, keeps the
text, and says why in plain words. Real Chromium, the real service, the fake model."""

from __future__ import annotations

from playwright.sync_api import expect

from tests.fakes.llm_server import Reply
from tests.page_actions import LONG_ANSWER, conversation_id, send, wait_turn_end

LIMIT = 200_000  # MAX_MESSAGE_CHARS


def test_a_conversation_still_answering_is_not_deleted_and_the_page_stays_on_it(page, llm):
    llm.script(Reply(text=LONG_ANSWER, chunk_delay=0.03))
    send(page, "Tell me everything about pierogi")
    expect(page.locator(".answer")).to_contain_text("Sentence number 5")
    shown = conversation_id(page)
    row = page.locator(".conversation-item").filter(has_text="Tell me everything")
    row.hover()
    row.locator(".item-menu").click()
    row.get_by_role("menuitem", name="Delete").click()
    page.locator(".confirm-delete").click()
    expect(page.locator(".notice")).to_contain_text(
        "Not deleted: a turn is running in this conversation; stop it first, then delete"
    )
    assert conversation_id(page) == shown  # not a new conversation in its place
    expect(page.locator("#stop")).to_be_visible()
    expect(page.locator(".message.user")).to_have_text("Tell me everything about pierogi")
    expect(row).to_have_count(1)
    expect(row.locator("a")).to_be_focused()  # as Keep leaves it
    page.locator("#stop").click()
    wait_turn_end(page)


def test_a_message_too_long_says_by_how_much_and_stays_in_the_box(page, llm):
    message = "word " * (LIMIT // 5) + "end"
    send(page, message)
    expect(page.locator(".notice")).to_have_text(
        f"Not sent: the message is {len(message):,} characters, at most {LIMIT:,} are taken."
        " Your text is in the box below."
    )
    expect(page.locator("#composer-input")).to_have_value(message)
    assert llm.requests == []
