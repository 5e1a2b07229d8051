"""The page on a phone's width (390 px) as a person uses it with the ☰ menu: what the menu
covers once a choice in it is made, and where the keyboard's focus goes. Real Chromium,
the real service."""

from __future__ import annotations

from playwright.sync_api import expect

from tests.browser import open_page

PHONE = {"width": 390, "height": 844}


def test_settings_chosen_in_the_menu_closes_it_and_closing_settings_returns_to_the_chat(
    browser, chat
):
    page = open_page(browser, chat.url, **PHONE)
    try:
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
    finally:
        page.context.close()


def test_the_closed_menu_takes_no_tab_stops_and_the_keyboard_goes_in_and_out(browser, chat):
    page = open_page(browser, chat.url, **PHONE)
    try:
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
    finally:
        page.context.close()
