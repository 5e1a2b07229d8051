"""The page on a phone's width (390 px) as a person uses it with the ☰ menu: what the menu
covers once a choice in it is made, and where the keyboard's focus goes; on a touch
screen, targets a finger hits. Real Chromium, the real service, the fakes outside."""

from __future__ import annotations

from playwright.sync_api import expect

from tests.browser import opened
from tests.fakes.llm_server import Reply, ToolCall
from tests.page_actions import send, wait_turn_end

PHONE = {"width": 390, "height": 844}
FINGER = 44  # px: the target a fingertip hits, as the sidebar's row menu has


def test_settings_chosen_in_the_menu_closes_it_and_closing_settings_returns_to_the_chat(
    browser, chat
):
    with opened(browser, chat.url, **PHONE) as page:
        page.locator("#open-sidebar").click()
        page.locator("#open-settings").click()
        expect(page.locator("#settings-dialog")).to_be_visible()
        page.keyboard.press("Escape")
        expect(page.locator("#settings-dialog")).to_be_hidden()
        # The chat, not the menu left open over it; the focus on the ☰ it came from.
        expect(page.locator("#sidebar")).not_to_be_in_viewport()
        expect(page.locator("#scrim")).to_be_hidden()
        expect(page.locator("#open-sidebar")).to_be_focused()
        page.locator("#composer-input").click(timeout=2_000)  # nothing lies over it


def test_the_closed_menu_takes_no_tab_stops_and_the_keyboard_goes_in_and_out(browser, chat):
    with opened(browser, chat.url, **PHONE) as page:
        page.locator("#skip-link").focus()  # the page's first stop
        page.keyboard.press("Tab")  # the ☰, not a control of the menu out of sight
        expect(page.locator("#open-sidebar")).to_be_focused()
        page.keyboard.press("Enter")
        expect(page.locator("#new-conversation")).to_be_focused()  # in the menu it opened
        page.keyboard.press("Tab")
        expect(page.locator("#close-sidebar")).to_be_focused()
        page.keyboard.press("Escape")
        expect(page.locator("#sidebar")).not_to_be_in_viewport()
        expect(page.locator("#open-sidebar")).to_be_focused()


def test_on_a_touch_screen_the_menu_button_and_each_answers_controls_take_a_finger(
    browser, chat, llm, pages
):
    llm.script(
        Reply(tool_calls=[ToolCall("web_search", {"query": "pierogi czas gotowania"})]),
        Reply(tool_calls=[ToolCall("web_fetch", {"url": f"{pages.url}/article"})]),
        Reply(text="Boil them for four minutes [21]."),
    )
    context = browser.new_context(viewport=PHONE, has_touch=True, is_mobile=True)
    page = context.new_page()
    try:
        page.goto(chat.url)
        page.wait_for_selector("body[data-ready]", state="attached")
        page.ended_before = 0
        send(page, f"Jak długo gotować pierogi? {pages.url}/article")
        wait_turn_end(page)
        menu = page.locator("#open-sidebar").bounding_box()
        # Chromium's boxes are floats (a 44 px button measured 43.99999237): to 0.01 px.
        assert round(menu["width"], 2) >= FINGER and round(menu["height"], 2) >= FINGER, menu
        title = page.locator("#conversation-title").bounding_box()
        assert menu["x"] + menu["width"] <= title["x"], (menu, title)  # beside, not over it
        for control in (
            ".message.user .edit",
            ".trail summary",
            ".source-chip",
            ".seen summary",
            ".answer-stats .copy-answer",
            ".answer-stats .regenerate",
        ):
            size = page.locator(control).first.bounding_box()
            assert round(size["height"], 2) >= FINGER, (control, size)
        page.locator(".trail summary").tap()
        expect(page.locator(".trail .timeline")).to_be_visible()
        page.locator("#open-sidebar").tap()
        page.locator("#open-lab").tap()
        heading = page.locator("#view-lab h2, #view-lab h1").first.bounding_box()
        menu = page.locator("#open-sidebar").bounding_box()
        assert menu["y"] + menu["height"] <= heading["y"], (menu, heading)  # not over the lab
    finally:
        context.close()
