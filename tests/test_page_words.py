"""Words on the page that must not mislead a person: what the top bar says of an answer
still coming. Real Chromium, the real service, the fake model."""

from __future__ import annotations

from playwright.sync_api import expect

from tests.fakes.llm_server import Reply
from tests.page_actions import LONG_ANSWER, send, wait_turn_end

COMING = "First answer coming: its usage when it ends"


def test_an_answer_still_coming_is_not_said_to_have_reported_no_usage(page, llm):
    llm.script(Reply(text="Short."), Reply(text=LONG_ANSWER, chunk_delay=0.03))
    send(page, "First, the other conversation")
    wait_turn_end(page)
    page.locator("#new-conversation").click()
    send(page, "Tell me everything about pierogi")
    expect(page.locator(".answer")).to_contain_text("Sentence number 5")
    expect(page.locator("#totals")).to_have_text(COMING)
    page.locator(".conversation-item").filter(has_text="First, the other").click()
    expect(page.locator(".message.user")).to_contain_text("First, the other conversation")
    page.locator(".conversation-item").filter(has_text="Tell me everything").click()
    expect(page.locator("#stop")).to_be_visible()
    expect(page.locator("#totals")).to_have_text(COMING)
    page.reload()
    page.wait_for_selector("body[data-ready]", state="attached")
    expect(page.locator("#stop")).to_be_visible()
    expect(page.locator("#totals")).to_have_text(COMING)
    page.locator("#stop").click()
    expect(page.locator("#totals")).not_to_have_text(COMING)
