"""The Research switch beside Send, as a person meets it: it is for one send (a research
costs up to a dozen searches), as a reload always showed it; a research refused before it
started comes back to the box still a research. Real Chromium, the real service, the model
scripted as a researcher (tests/research_model.py)."""

from __future__ import annotations

from playwright.sync_api import expect

from tests.page_actions import send, wait_turn_end
from tests.research_model import QUESTION, article, research_page, researcher, service

__all__ = ["article", "researcher", "service"]  # fixtures, imported to be used here


def test_the_switch_turns_off_once_a_research_is_sent_and_a_reload_agrees(
    browser, service, researcher, article
):
    with research_page(browser, service, pause=0.5) as page:
        switch = page.locator("#research-switch")
        switch.click()
        expect(page.locator("#composer-input")).to_have_attribute(
            "placeholder", "A question to research… (Enter shows the plan)"
        )
        send(page, QUESTION)
        expect(switch).to_have_attribute("aria-pressed", "false")
        expect(page.locator("#composer-input")).to_have_attribute(
            "placeholder", "Message… (Enter sends, Shift+Enter for a new line)"
        )
        wait_turn_end(page)
        page.reload()
        page.wait_for_selector("body[data-ready]", state="attached")
        expect(switch).to_have_attribute("aria-pressed", "false")
        # The next message is a message: no second plan, no searches.
        planned = researcher.asked.count("plan")
        send(page, "Thanks, and with butter?")
        wait_turn_end(page)
        expect(page.locator(".plan-card")).to_have_count(0)
        assert researcher.asked.count("plan") == planned
        assert page.log.errors == []


def test_a_research_refused_before_it_starts_comes_back_to_the_box_as_a_research(
    browser, service, researcher, article
):
    # a pause beyond the service's hour: refused
    with research_page(browser, service, pause=99999) as page:
        page.locator("#research-switch").click()
        send(page, QUESTION)
        expect(page.locator(".notice")).to_contain_text("Not sent")
        expect(page.locator("#composer-input")).to_have_value(f"/research {QUESTION}")
        page.evaluate("localStorage.setItem('research-plan-seconds', '0.5')")
        page.locator("#composer-input").press("Enter")
        expect(page.locator(".message.user").last).to_have_text(QUESTION)
        wait_turn_end(page)
        assert researcher.asked[0] == "plan"
