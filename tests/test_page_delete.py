"""Deleting a conversation from the sidebar when the service refuses it: the page stays
where it was and says why. Real Chromium, the real service, the fake model."""

from __future__ import annotations

from playwright.sync_api import expect

from tests.fakes.llm_server import Reply
from tests.page_actions import LONG_ANSWER, conversation_id, send, wait_turn_end


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
