"""Edit in place and answer versions on the page, in real Chromium against the real service
and the scripted fake model server."""

from __future__ import annotations

from playwright.sync_api import Page, expect

from tests.chat_client import get_conversation
from tests.fakes.llm_server import Reply, content_filtered, server_error
from tests.page_actions import conversation_id, send, turns_ended, wait_turn_end


def ask(page: Page, llm, question: str, answer: str) -> None:
    llm.script(Reply(text=answer))
    send(page, question)
    wait_turn_end(page)


def start_edit(page: Page) -> None:
    page.locator(".message.user .edit").last.click()
    expect(page.locator(".edit-box textarea")).to_be_focused()


def answers(page: Page):
    return page.locator(".message.assistant .answer")


def test_edit_opens_in_the_bubble_and_cancel_changes_nothing(page, llm, chat):
    ask(page, llm, "A question with a typo", "First answer.")
    stored = get_conversation(chat, conversation_id(page))
    asked = len(llm.requests)
    start_edit(page)
    expect(page.locator(".edit-box textarea")).to_have_value("A question with a typo")
    expect(page.locator("#composer-input")).to_have_value("")
    expect(answers(page)).to_have_text(["First answer."])
    page.locator(".edit-box textarea").fill("Something else entirely")
    page.get_by_role("button", name="Cancel").click()
    expect(page.locator(".edit-box")).to_have_count(0)
    expect(page.locator(".message.user .bubble")).to_have_text("A question with a typo")
    expect(answers(page)).to_have_text(["First answer."])
    # Escape cancels too.
    start_edit(page)
    page.keyboard.press("Escape")
    expect(page.locator(".edit-box")).to_have_count(0)
    assert get_conversation(chat, conversation_id(page)) == stored
    assert len(llm.requests) == asked
    assert page.log.errors == []


def test_save_sends_the_edit_and_the_old_turn_stays_as_a_version(page, llm, chat):
    ask(page, llm, "Capital of Frnace?", "Paris.")
    start_edit(page)
    page.locator(".edit-box textarea").fill("Capital of Germany?")
    llm.script(Reply(text="Berlin.", chunk_delay=0.01))
    page.ended_before = turns_ended(page)
    page.get_by_role("button", name="Save").click()
    wait_turn_end(page)
    expect(page.locator(".message.user .bubble")).to_have_text(["Capital of Germany?"])
    expect(answers(page)).to_have_text(["Berlin."])
    assert llm.requests[-1].body["messages"][-1]["content"] == "Capital of Germany?"
    control = page.locator(".versions")
    expect(control.locator(".version-count")).to_have_text("2/2")

    control.get_by_role("button", name="Previous version").click()
    expect(page.locator(".message.user .bubble")).to_have_text(["Capital of Frnace?"])
    expect(answers(page)).to_have_text(["Paris."])
    expect(page.locator(".versions .version-count")).to_have_text("1/2")
    page.reload()
    expect(answers(page)).to_have_text(["Paris."])
    expect(page.locator(".versions .version-count")).to_have_text("1/2")
    assert page.log.errors == []


def test_an_earlier_message_is_edited_in_place_and_the_later_turns_become_its_version(
    page, llm, chat
):
    for question, answer in (("Q1", "A1"), ("Q2 with a typo", "A2"), ("Q3", "A3")):
        ask(page, llm, question, answer)
    edits = page.locator(".message.user .edit")
    expect(edits).to_have_count(3)  # each message of yours, without a reload
    edits.nth(1).click()
    expect(page.locator(".edit-box textarea")).to_have_value("Q2 with a typo")
    page.locator(".edit-box textarea").fill("Q2 fixed")
    llm.script(Reply(text="B2", chunk_delay=0.01))
    page.ended_before = turns_ended(page)
    page.get_by_role("button", name="Save").click()
    wait_turn_end(page)
    expect(page.locator(".message.user .bubble")).to_have_text(["Q1", "Q2 fixed"])
    expect(answers(page)).to_have_text(["A1", "B2"])
    assert [m["content"] for m in llm.requests[-1].body["messages"][-3:]] == [
        "Q1",
        "A1",
        "Q2 fixed",
    ]
    expect(page.locator(".versions .version-count")).to_have_text("2/2")
    expect(edits).to_have_count(2)

    page.get_by_role("button", name="Previous version").click()
    expect(page.locator(".message.user .bubble")).to_have_text(["Q1", "Q2 with a typo", "Q3"])
    expect(answers(page)).to_have_text(["A1", "A2", "A3"])
    page.reload()
    expect(answers(page)).to_have_text(["A1", "A2", "A3"])
    expect(page.locator(".versions .version-count")).to_have_text("1/2")
    expect(edits).to_have_count(3)
    assert page.log.errors == []


def test_an_edit_that_fails_before_any_output_stays_with_retry_and_its_versions(page, llm, chat):
    ask(page, llm, "Capital of France?", "Paris.")
    start_edit(page)
    page.locator(".edit-box textarea").fill("Capital of Spain?")
    llm.script(server_error(500))
    page.ended_before = turns_ended(page)
    page.get_by_role("button", name="Save").click()
    wait_turn_end(page)
    card = page.locator(".error-card")
    expect(card.locator("h3")).to_contain_text("model server failed")
    expect(page.locator(".message.user .bubble")).to_have_text(["Capital of Spain?"])
    expect(page.locator(".versions .version-count")).to_have_text("2/2")
    expect(page.locator("#composer-input")).to_have_value("")
    llm.script(Reply(text="Madrid."))
    page.ended_before = turns_ended(page)
    card.get_by_role("button", name="Retry").click()
    wait_turn_end(page)
    expect(answers(page).filter(has_text="Madrid.")).to_have_count(1)
    stored = get_conversation(chat, conversation_id(page))["messages"]
    assert [m["content"] for m in stored] == ["Capital of Spain?", "Madrid."]
    page.get_by_role("button", name="Previous version").click()
    expect(page.locator(".message.user .bubble")).to_have_text(["Capital of France?"])
    expect(answers(page)).to_have_text(["Paris."])


def test_a_regenerate_that_fails_before_any_output_keeps_the_answer_as_a_version(page, llm, chat):
    ask(page, llm, "Which is the longest river?", "The Nile.")
    llm.script(server_error(500))
    page.ended_before = turns_ended(page)
    page.get_by_role("button", name="Regenerate").click()
    wait_turn_end(page)
    expect(page.locator(".error-card h3")).to_contain_text("model server failed")
    expect(page.locator(".message.user .bubble")).to_have_text(["Which is the longest river?"])
    expect(page.locator("#composer-input")).to_have_value("")
    page.get_by_role("button", name="Previous version").click()
    expect(answers(page)).to_have_text(["The Nile."])
    stored = get_conversation(chat, conversation_id(page))["messages"]
    assert [m["content"] for m in stored] == ["Which is the longest river?", "The Nile."]


def test_a_filtered_edit_shows_the_old_turn_and_gives_the_text_back(page, llm, chat):
    ask(page, llm, "Capital of France?", "Paris.")
    start_edit(page)
    page.locator(".edit-box textarea").fill("Something filtered")
    llm.script(content_filtered())
    page.ended_before = turns_ended(page)
    page.get_by_role("button", name="Save").click()
    wait_turn_end(page)
    expect(page.locator(".error-card h3")).to_contain_text("filter blocked")
    expect(page.locator(".message.user .bubble")).to_have_text(["Capital of France?"])
    expect(answers(page).first).to_have_text("Paris.")
    expect(page.locator("#composer-input")).to_have_value("Something filtered")


def test_going_elsewhere_mid_edit_leaves_nothing_behind(page, llm, chat):
    ask(page, llm, "First conversation's question", "First answer.")
    first = conversation_id(page)
    page.locator("#new-conversation").click()
    ask(page, llm, "Second conversation's question", "Second answer.")
    page.locator(".conversation-item").filter(has_text="First conversation").click()
    expect(answers(page)).to_have_text(["First answer."])
    stored = get_conversation(chat, first)

    start_edit(page)
    page.keyboard.type(" and a half-written edit")
    page.locator(".conversation-item").filter(has_text="Second conversation").click()
    expect(answers(page)).to_have_text(["Second answer."])
    expect(page.locator(".edit-box")).to_have_count(0)
    expect(page.locator("#composer-input")).to_have_value("")

    page.locator(".conversation-item").filter(has_text="First conversation").click()
    expect(answers(page)).to_have_text(["First answer."])
    expect(page.locator(".message.user .bubble")).to_have_text(["First conversation's question"])
    expect(page.locator(".edit-box")).to_have_count(0)
    expect(page.locator("#composer-input")).to_have_value("")
    assert get_conversation(chat, first) == stored
    expect(page.locator(".conversation-item")).to_have_count(2)


def test_regenerate_shows_the_versions_and_they_survive_a_reload(page, llm, chat):
    ask(page, llm, "Which is the longest river?", "The Nile.")
    llm.script(Reply(text="The Amazon.", chunk_delay=0.01))
    page.ended_before = turns_ended(page)
    page.get_by_role("button", name="Regenerate").click()
    wait_turn_end(page)
    expect(answers(page)).to_have_text(["The Amazon."])
    count = page.locator(".versions .version-count")
    expect(count).to_have_text("2/2")
    expect(page.get_by_role("button", name="Next version")).to_be_disabled()

    page.get_by_role("button", name="Previous version").click()
    expect(answers(page)).to_have_text(["The Nile."])
    expect(count).to_have_text("1/2")
    page.reload()
    expect(answers(page)).to_have_text(["The Nile."])
    expect(count).to_have_text("1/2")
    page.get_by_role("button", name="Next version").click()
    expect(answers(page)).to_have_text(["The Amazon."])
    expect(count).to_have_text("2/2")
    # The follow-up is asked on the version shown.
    ask(page, llm, "How long is it?", "Long.")
    texts = [m["content"] for m in llm.requests[-1].body["messages"]]
    assert "The Amazon." in texts and "The Nile." not in texts
    assert page.log.errors == []
