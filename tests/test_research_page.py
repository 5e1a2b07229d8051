"""Research on the page, in Chromium (docs/research.md, "The page"): the switch beside Send
and the /research prefix, the plan card (edit, remove, Start, or the pause), the live
progress line, Stop, Regenerate as a version, a reload mid-run, a phone's width; and the
screenshots of the plan and the report, light and dark, at 1280 and 390 px."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest
from playwright.sync_api import Page, expect

from tests.page_actions import conversation_id, send, turns_ended, wait_turn_end
from tests.research_model import (
    ARTICLE_QUOTE,
    QUESTION,
    ScriptedResearcher,
    article,
    plan_of,
    research_page,
    research_service,
    scripted_on,
    service,
)

__all__ = ["article", "service"]  # fixtures, imported to be used here

REPORT_START = "Pierogi are filled dumplings"


@pytest.fixture
def researcher(llm, monkeypatch) -> ScriptedResearcher:
    scripted = scripted_on(llm, monkeypatch)
    scripted.plan = plan_of("pierogi boiling time", "pierogi fillings")
    return scripted


def research(page: Page, question: str = QUESTION) -> None:
    page.locator("#research-switch").click()
    expect(page.locator("#research-switch")).to_have_attribute("aria-pressed", "true")
    send(page, question)


def shot(page: Page, name: str, tmp_path: Path) -> Path:
    target = Path(os.environ.get("SCREENSHOT_DIR") or tmp_path)
    target.mkdir(parents=True, exist_ok=True)
    path = target / f"research-{name}.png"
    page.screenshot(path=str(path))
    return path


def test_the_switch_shows_the_plan_which_runs_as_edited_on_start_with_live_progress(
    browser, service, researcher, article, tmp_path
):
    researcher.slow = {"notes": 1.5}  # a page's notes take a while: the progress is seen
    with research_page(browser, service, pause=0) as page:
        research(page)
        card = page.locator(".plan-card")
        expect(card.locator("input")).to_have_count(2)
        expect(card.locator("input").first).to_have_value("What about pierogi boiling time?")
        expect(card).to_contain_text("waits for Start")
        expect(card).to_contain_text("Up to 12 searches, about 0.060 $ at most")
        expect(card).to_contain_text(", 20 pages, 10 minutes.")
        assert researcher.asked == ["plan"]  # nothing searched before Start
        shot(page, "plan-light", tmp_path)
        card.locator("input").nth(1).fill("frozen pierogi")
        card.get_by_role("button", name="Start").click()
        expect(card).to_have_count(0)
        progress = page.locator(".research-progress")
        expect(progress).to_contain_text("Reading")
        expect(progress).to_contain_text("/12")
        # the page is counted once fetched, its notes still being taken: 0 or 1 by now
        expect(progress).to_contain_text(re.compile(r"pages [01]/20"))
        shot(page, "progress-light", tmp_path)
        wait_turn_end(page)
        expect(progress).to_be_hidden()
        answer = page.locator(".message.assistant .answer").last
        expect(answer).to_contain_text(REPORT_START)
        expect(page.locator(".source-chip").first).to_contain_text("Pierogi, step by step")
        page.locator(".trail summary").last.click()
        trail = page.locator(".timeline").last
        expect(trail).to_contain_text("Searched 'frozen pierogi'")
        expect(trail).not_to_contain_text("pierogi fillings")
        expect(trail).to_contain_text(ARTICLE_QUOTE)
        shot(page, "report-light", tmp_path)
        assert page.log.errors == []


def test_a_plan_left_alone_starts_by_itself_after_the_pause(browser, service, researcher, article):
    with research_page(browser, service, pause=2) as page:
        send(page, f"/research {QUESTION}")  # the prefix, the switch left off
        expect(page.locator(".plan-card")).to_contain_text("starts by itself in")
        expect(page.locator(".message.user").last).to_have_text(QUESTION)
        wait_turn_end(page)
        expect(page.locator(".plan-card")).to_have_count(0)
        expect(page.locator(".message.assistant .answer").last).to_contain_text(REPORT_START)
        assert researcher.asked[:2] == ["plan", "notes"]


def test_stop_keeps_the_notes_then_the_report_is_written_from_them_and_regenerate_adds_one(
    browser, service, researcher, article, tmp_path
):
    researcher.slow = {"reflect": 30}
    with research_page(browser, service, pause=0.1) as page:
        research(page)
        expect(page.locator(".research-progress")).to_contain_text("Reflecting", timeout=20_000)
        page.locator("#stop").click()
        wait_turn_end(page)
        answer = page.locator(".message.assistant .answer").last
        expect(answer).to_contain_text(ARTICLE_QUOTE)
        expect(page.locator(".badge.interrupted")).to_be_visible()
        assert "report" not in researcher.asked
        shot(page, "stopped-light", tmp_path)
        researcher.slow = {}
        page.get_by_role("button", name="Write the report from what was found").click()
        wait_turn_end(page)
        answer = page.locator(".message.assistant .answer").last
        expect(answer).to_contain_text("stopped before it was done")
        expect(answer).to_contain_text(REPORT_START)
        expect(page.locator(".versions").last).to_contain_text("2/2")
        expect(
            page.get_by_role("button", name="Write the report from what was found")
        ).to_have_count(0)
        page.get_by_role("button", name="Regenerate").last.click()
        wait_turn_end(page)
        expect(page.locator(".message.assistant .answer").last).to_contain_text(REPORT_START)
        expect(page.locator(".versions").last).to_contain_text("3/3")
        assert researcher.asked.count("plan") == 2 and researcher.asked.count("report") == 2


def test_a_reports_figures_say_what_the_run_spent_and_no_tokens_a_second(
    browser, service, researcher, article
):
    with research_page(browser, service, pause=0.1) as page:
        research(page)
        wait_turn_end(page)
        expect(page.locator(".message.assistant .answer").last).to_contain_text(REPORT_START)
        shown = conversation_id(page)
        answer = service.http.get(f"/api/conversations/{shown}").json()["messages"][-1]
        spent = answer["research"]["spent"]
        assert spent["searches"] == 2 and spent["searches_cached"] == 0 and spent["pages"] >= 1
        pages = f"{spent['pages']} page{'' if spent['pages'] == 1 else 's'} read"
        for reloaded in (False, True):  # as the run ended, then as the answer is stored
            if reloaded:
                page.reload()
                page.wait_for_selector("body[data-ready]", state="attached")
            stats = page.locator(".message.assistant .answer-stats").last
            expect(stats).to_contain_text("2 searches, about 0.010 $")  # BRAVE_PRICE_PER_1000 5
            expect(stats).to_contain_text(pages)
            time = stats.locator("span", has_text=re.compile(r"^\d+ (ms|s)$"))
            expect(time).to_have_count(1)  # the run's time
            expect(stats).not_to_contain_text("tok/s")
        assert page.log.errors == []


def test_a_plan_nobody_starts_ends_on_the_page_saying_so_with_regenerate(
    request, browser, llm, pages, searxng, brave, tmp_path, researcher, article
):
    wait = {"RESEARCH_PLAN_WAIT_SECONDS": "1"}
    with research_service(request, llm, pages, searxng.url, tmp_path, **wait) as waiting:
        with research_page(browser, waiting, pause=0) as page:
            research(page)
            expect(page.locator(".plan-card")).to_contain_text("waits for Start")
            wait_turn_end(page)
            expect(page.locator(".plan-card")).to_have_count(0)
            answer = page.locator(".message.assistant .answer").last
            expect(answer).to_contain_text("The plan waited 1 s for Start; nothing was searched.")
            expect(answer).to_contain_text("What about pierogi fillings?")  # the plan, kept
            expect(page.locator(".badge.interrupted")).to_be_visible()
            expect(page.locator(".message.assistant .answer-stats").last).to_contain_text(
                "0 searches"
            )
            assert researcher.asked == ["plan"]
            page.get_by_role("button", name="Regenerate").last.click()
            expect(page.locator(".plan-card")).to_contain_text("waits for Start")
            assert page.log.errors == []


@pytest.mark.parametrize("width", [1280, 390])
def test_a_reload_while_the_plan_waits_shows_it_again_and_the_run_goes_on(
    browser, service, researcher, article, width
):
    researcher.slow = {"notes": 1.0}
    with research_page(browser, service, pause=0, width=width) as page:
        research(page)
        expect(page.locator(".plan-card input")).to_have_count(2)
        page.reload()
        page.wait_for_selector("body[data-ready]", state="attached")
        page.ended_before = turns_ended(page)
        card = page.locator(".plan-card")
        expect(card.locator("input")).to_have_count(2)  # reattached: the plan still waits
        card.get_by_role("button", name="Remove this sub-question").last.click()
        card.get_by_role("button", name="Start").click()
        expect(page.locator(".research-progress")).to_contain_text("Reading")
        page.reload()  # mid-run: the run goes on, its progress followed
        page.wait_for_selector("body[data-ready]", state="attached")
        page.ended_before = turns_ended(page)
        expect(page.locator("#stop")).to_be_visible()
        wait_turn_end(page)
        expect(page.locator(".message.assistant .answer")).to_have_count(1)
        expect(page.locator(".message.assistant .answer").last).to_contain_text(REPORT_START)
        assert researcher.asked.count("plan") == 1
        assert "pierogi fillings" not in str(
            service.http.get(f"/api/conversations/{conversation_id(page)}").json()["messages"][-1][
                "reasoning"
            ]
        )
        assert page.log.errors == []


def within(page: Page, selector: str, width: int) -> None:
    box = page.locator(selector).first.bounding_box()
    assert box is not None and box["x"] >= 0 and box["x"] + box["width"] <= width, (selector, box)


def overlap(page: Page, first: str, second: str) -> bool:
    a, b = page.locator(first).bounding_box(), page.locator(second).bounding_box()
    assert a is not None and b is not None
    return not (
        a["x"] + a["width"] <= b["x"]
        or b["x"] + b["width"] <= a["x"]
        or a["y"] + a["height"] <= b["y"]
        or b["y"] + b["height"] <= a["y"]
    )


@pytest.mark.parametrize("dark", [False, True])
def test_on_a_phone_the_switch_the_plan_and_the_progress_fit(
    browser, service, researcher, article, tmp_path, dark
):
    researcher.slow = {"notes": 1.5}
    width = 390
    with research_page(browser, service, pause=0, width=width, dark=dark) as page:
        for control in ("#research-switch", "#send", "#composer-input"):
            within(page, control, width)
        assert not overlap(page, "#research-switch", "#send")
        assert not overlap(page, "#research-switch", "#composer-input")
        box = page.locator("#composer-input")
        expect(box).to_have_attribute("placeholder", "Message…")
        page.locator("#research-switch").click()
        expect(box).to_have_attribute("placeholder", "Research…")
        send(page, QUESTION)
        expect(box).to_have_attribute("placeholder", "Message…")  # the switch is for one send
        card = page.locator(".plan-card")
        expect(card.locator("input")).to_have_count(2)
        for part in (".plan-card", ".plan-card input", ".plan-start"):
            within(page, part, width)
        assert not overlap(
            page, ".plan-questions li:first-child input", ".plan-questions li:first-child button"
        )
        assert page.evaluate("document.documentElement.scrollWidth") <= width
        scheme = "dark" if dark else "light"
        shot(page, f"plan-phone-{scheme}", tmp_path)
        card.get_by_role("button", name="Start").click()
        expect(page.locator(".research-progress")).to_contain_text("Reading")
        within(page, ".research-progress", width)
        shot(page, f"progress-phone-{scheme}", tmp_path)
        wait_turn_end(page)
        assert page.evaluate("document.documentElement.scrollWidth") <= width
        shot(page, f"report-phone-{scheme}", tmp_path)


def test_screenshots_of_the_plan_and_the_report_in_the_dark(
    browser, service, researcher, article, tmp_path
):
    with research_page(browser, service, pause=0, dark=True) as page:
        research(page)
        expect(page.locator(".plan-card input")).to_have_count(2)
        shot(page, "plan-dark", tmp_path)
        page.locator(".plan-card").get_by_role("button", name="Start").click()
        wait_turn_end(page)
        expect(page.locator(".message.assistant .answer").last).to_contain_text(REPORT_START)
        shot(page, "report-dark", tmp_path)


def test_a_budget_set_in_settings_is_the_next_researchs_and_its_plan_says_what_it_may_cost(
    browser, service, researcher, article
):
    with research_page(browser, service, pause=0) as page:
        page.locator("#open-settings").click()
        # The budget's heading stands apart from the pause's box above it, as a field's does.
        pause = page.locator("#research-pause").bounding_box()
        heading = page.get_by_text("Research budget: searches").bounding_box()
        assert pause and heading and heading["y"] - (pause["y"] + pause["height"]) >= 12
        page.locator("#research-searches").fill("3")
        page.locator("#research-minutes").fill("99")
        page.locator("#save-research-pause").click()
        expect(page.locator(".saved").last).to_contain_text("minutes: 1 to 60")
        page.locator("#research-minutes").fill("")
        page.locator("#save-research-pause").click()
        expect(page.locator(".saved").last).to_have_text("Saved")
        page.keyboard.press("Escape")
        research(page)
        card = page.locator(".plan-card")
        expect(card).to_contain_text("Up to 3 searches, about 0.015 $ at most")
        expect(card).to_contain_text(", 20 pages, 10 minutes.")
        page.reload()  # kept in this browser
        page.locator("#open-settings").click()
        expect(page.locator("#research-searches")).to_have_value("3")
