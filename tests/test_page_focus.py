"""Where the keyboard's focus goes in Settings' tabs: on the tab shown, and kept there when
a tab is chosen with Enter. Real Chromium, the real service."""

from __future__ import annotations

from playwright.sync_api import expect


def test_the_keyboard_stays_on_the_settings_tab_it_chose(page):
    page.locator("#open-settings").click()
    global_tab = page.get_by_role("tab", name="Global")
    expect(global_tab).to_have_attribute("aria-selected", "true")
    expect(global_tab).to_be_focused()  # the tab shown, not the other one
    page.keyboard.press("Shift+Tab")
    this_tab = page.get_by_role("tab", name="This conversation")
    expect(this_tab).to_be_focused()
    page.keyboard.press("Enter")
    expect(this_tab).to_have_attribute("aria-selected", "true")
    expect(page.locator(".conversation-settings")).to_be_visible()
    expect(page.get_by_role("tab", name="This conversation")).to_be_focused()
    page.keyboard.press("Tab")
    page.keyboard.press("Enter")  # on Global, the next stop
    expect(page.get_by_role("tab", name="Global")).to_have_attribute("aria-selected", "true")
