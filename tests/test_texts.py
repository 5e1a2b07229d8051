"""Texts a user acts on say what the service really does: .env.example's description of
DATA_DIR, and the fix the README and the page's error card give for a refused key."""

from __future__ import annotations

import re

from tests.chat_client import new_conversation, send
from tests.conftest import ROOT
from tests.fakes.llm_server import Reply


def comment_above(setting: str) -> str:
    """The comment lines right above `setting=` in .env.example."""
    lines = (ROOT / ".env.example").read_text().splitlines()
    index = next(i for i, line in enumerate(lines) if line.startswith(f"{setting}="))
    comment: list[str] = []
    while index > 0 and lines[index - 1].startswith("# ") and "---" not in lines[index - 1]:
        index -= 1
        comment.insert(0, lines[index][2:])
    return " ".join(comment)


def test_env_example_names_what_data_dir_holds(chat, llm):
    llm.script(Reply(text="Hello."))
    send(chat, new_conversation(chat), "Hi")
    assert chat.http.put("/api/memory", json={"text": "- a fact\n"}).status_code == 200
    assert chat.http.put("/api/models", json={"models": ["fake-small"]}).status_code == 200
    held = {
        path.name
        for path in chat.settings.data_dir.iterdir()
        if not path.name.endswith(("-wal", "-shm"))  # SQLite's own, beside its database
    }
    described = comment_above("DATA_DIR")
    named = set(re.findall(r"[\w.-]+\.(?:db|md|json)\b", described))
    assert named == held, described


def test_the_readme_and_the_error_card_give_the_same_fix_for_a_refused_key():
    readme = (ROOT / "README.md").read_text()
    row = next(line for line in readme.splitlines() if line.startswith("| `auth` |"))
    card = (ROOT / "app/api/static/js/message.js").read_text()
    advice = re.search(r'const advice = \{\s*auth: "([^"]+)"', card)
    assert advice, "the card's advice for auth is not where this test looks for it"
    for text in (row, advice.group(1)):
        assert "LLM_API_KEY" in text and ".env" in text and "restart" in text, text
        assert "in settings" not in text.lower(), text
