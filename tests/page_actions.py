"""What a user does on the chat page in Chromium, for the tests that drive it: send a
message, wait for the turn to end, read which conversation the page shows."""

from __future__ import annotations

import re

from playwright.sync_api import Page, expect

LONG_ANSWER = [f"Sentence number {n} of a long answer. " for n in range(400)]


def turns_ended(page: Page) -> int:
    return int(page.evaluate("document.body.dataset.turnsEnded || 0"))


def send(page: Page, text: str) -> None:
    page.ended_before = turns_ended(page)
    page.fill("#composer-input", text)
    page.keyboard.press("Enter")


def wait_turn_end(page: Page) -> None:
    """The turn ended, one way or another, and the page settled: Send is back."""
    expect(page.locator("body")).to_have_attribute(
        "data-turns-ended", str(page.ended_before + 1), timeout=30_000
    )
    expect(page.locator("#send")).to_be_visible()
    expect(page.locator("#stop")).to_be_hidden()
    page.ended_before += 1


def conversation_id(page: Page) -> str:
    match = re.match(r"#/c/(.+)", page.evaluate("location.hash"))
    assert match, "the page shows no saved conversation"
    return match.group(1)
