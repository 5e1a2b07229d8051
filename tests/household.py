"""A household's database built through the store's own methods, as the service fills it:
conversations with answers carrying sources, activity, usage and digests, regenerated
turns (versions), renamed and reconfigured conversations, an accented title, the search
cache and its counts, the picker's models, a tool refusal, its people (one with a
password, one with limits of their own on the Brave plan, and queries spent), and the
lease of a turn whose process died. Used by tests/test_migrate_db.py and
bench/migrate_db.py."""

from __future__ import annotations

import socket
import subprocess

from app.store.database import Database
from app.store.leases import new_owner
from app.store.rows import NEW_TITLE, Message, OutcomeWrite
from app.store.search_shares import ShareLimits
from app.store.users import NewUser

ALICE_PASSWORD = "$argon2id$v=19$m=65536,t=3,p=4$c2FsdHNhbHQ$aGFzaGhhc2hoYXNo"
"""A hash as passwords.py keeps one (made up: hashing 0.1 s a build is not the point)."""


def dead_owner() -> str:
    """A lease owner of this host whose process has ended: its turn died (a crash)."""
    return f"{socket.gethostname()}:{dead_pid()}:000000000000"


def dead_pid() -> int:
    process = subprocess.Popen(["true"])
    process.wait()
    return process.pid


ACCENTED = "Łódź zimą: pierogi i żurek"


SENTENCE = "Boil them in salted water until they float, then two minutes more. "
"""About 70 characters: an answer of 20 is a typical 1,400."""


def answer(number: int, turn: int) -> Message:
    """An answer as a search turn leaves it: text, activity, sources, usage and digest."""
    message = {
        "role": "assistant",
        "content": f"Answer {turn} to {number}: boil pierogi for {number % 9} minutes. "
        + SENTENCE * 20,
        "status": "complete",
        "model": "model-a",
        "created": "2026-01-02T03:04:05.000006+00:00",
        "activity": [{"type": "search", "query": f"pierogi {number}", "language": "pl"}],
        "sources": [
            {"url": f"https://example.pl/{number}/{turn}/{n}", "title": f"Źródło {number}.{n}"}
            for n in range(5)
        ],
        "usage": {"prompt_tokens": 100 + number, "completion_tokens": 20 + turn},
        "digest": f"<web_data>source {number}.{turn}: {SENTENCE * 25}</web_data>",
    }
    return message


def outcome(number: int, position: int, turn: int) -> OutcomeWrite:
    return {
        "position": position,
        "answer": answer(number, turn),
        "rewind": False,
        "summary": None,
        "summarized": None,
        "totals": {"prompt_tokens": 100 + number, "searches": 1, "cost": 0.25},
        "budget": {"window": 8192, "used": 300 + number},
        "usage": {"prompt_tokens": 100 + number, "measured_messages": position + 1},
    }


def turn(store: Database, conversation_id: str, number: int, text: str | None, turn: int) -> None:
    owner = new_owner()
    started = store.begin_turn(conversation_id, owner, text, "model-a")
    assert started is not None
    position = len(started["messages"])
    store.save_outcome(conversation_id, outcome(number, position, turn), owner)


def conversation(store: Database, number: int) -> str:
    title = ACCENTED if number == 0 else (NEW_TITLE if number % 3 else f"Topic {number}")
    made = store.create(title, {"model": "model-a", "search_locale": "pl-PL"})
    cid = made["id"]
    turn(store, cid, number, f"How long do pierogi boil, question {number}?", 1)
    if number % 4 == 0:
        turn(store, cid, number, f"And the filling for {number}?", 2)
    if number % 5 == 0:
        turn(store, cid, number, None, 3)  # Regenerate: the first answer becomes a version
        if number % 10 == 0:
            store.switch_version(cid, len(store.load(cid)["messages"]) - 2, 1)
    if number % 6 == 0:
        store.change(cid, f"Renamed {number}" if number % 12 == 6 else None, {"web_search": False})
    return cid


def build(store: Database, conversations: int) -> list[str]:
    """The household's conversation ids, oldest first."""
    ids = [conversation(store, number) for number in range(conversations)]
    # A turn that died mid-way: its question kept, its lease left behind by a dead process.
    store.begin_turn(ids[-1], dead_owner(), "A question whose answer never came", "model-b")
    for number in range(25):
        store.keep_search(f"key-{number}", f'{{"results": [{number}], "q": "żurek"}}', 1000)
    store.cached_search("key-3")
    for day in ("2026-01-01", "2026-01-02", "2026-01-02"):
        store.count_search(day)
    store.set_models(["model-a", "model-b", "qwen3:8b"])
    store.refuse_tools("model-b", "this model does not support tools")
    store.add_user(NewUser("alice", "Alice", "alice@example.org", True, ALICE_PASSWORD))
    store.change_person(store.add_user(NewUser("bob")).id, disabled=True)
    store.set_search_limits("bob", 5, "none")
    store.set_models(["alices-finetune"], 1)
    for day in ("2026-01-01", "2026-01-02"):
        store.spend_search_share(2, 2, ShareLimits(None, None), day)
    return ids
