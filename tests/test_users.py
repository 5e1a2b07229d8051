"""The household's people (docs/household.md): kept on both backends with a unique,
checked name and a password only as its Argon2id hash, and managed with `python -m app
users add|list|disable|passwd`, in-process (run_main)."""

from __future__ import annotations

import io
import subprocess
from pathlib import Path

import pytest

from app.store.database import Database
from app.store.errors import Conflict, Refused
from app.store.passwords import hash_password, password_matches
from app.store.users import NewUser
from tests.conftest import NO_SEARXNG, run_main, store_of


@pytest.fixture
def database(tmp_path, database_url):
    opened = Database(store_of(tmp_path / "data", database_url))
    yield opened
    opened.close()


# -- the store, on both backends ---------------------------------------------------------------


def test_a_person_is_kept_with_what_was_given(database):
    assert database.users() == [] and database.user_count() == 0
    alice = database.add_user(NewUser("alice", "Alice A.", "alice@example.org", admin=True))
    bob = database.add_user(NewUser("bob", password=hash_password("correct horse")))
    assert [u.name for u in database.users()] == ["alice", "bob"]
    assert database.user_count() == 2
    assert (alice.display_name, alice.email, alice.admin, alice.disabled) == (
        "Alice A.",
        "alice@example.org",
        True,
        False,
    )
    assert alice.password is None and alice.created.startswith("20")
    assert not bob.admin and bob.display_name is None
    assert database.user("carol") is None


def test_a_name_is_taken_once(database):
    database.add_user(NewUser("alice"))
    with pytest.raises(Conflict, match="already a user named 'alice'"):
        database.add_user(NewUser("alice", admin=True))
    assert [u.admin for u in database.users()] == [False]


@pytest.mark.parametrize(
    "name",
    [
        "",
        "x" * 257,
        "ali\nce",
        "ali\x00ce",
        "alice\t",
        "ali\u200bce",
        " alice",
        "alice ",
        "a\x1b[31m",
    ],
    ids=[
        "empty",
        "257-chars",
        "newline",
        "nul",
        "tab",
        "zero-width",
        "space-before",
        "space-after",
        "escape",
    ],
)
def test_a_name_the_store_does_not_keep_is_refused(database, name):
    with pytest.raises(Refused):
        database.add_user(NewUser(name))
    assert database.users() == []


def test_a_display_name_or_email_with_a_control_character_is_refused(database):
    with pytest.raises(Refused, match="display name"):
        database.add_user(NewUser("alice", display_name="Al\nice"))
    with pytest.raises(Refused, match="email"):
        database.add_user(NewUser("alice", email="a" * 257))
    assert database.users() == []


def test_the_longest_name_and_one_in_any_script_are_kept(database):
    for name in ("x" * 256, "Zoë Ł. Wójcik", "山田"):
        database.add_user(NewUser(name))
    assert database.user_count() == 3


def test_disabling_and_a_new_password_are_kept(database):
    bob_id = database.add_user(NewUser("bob")).id
    assert database.set_password("bob", hash_password("correct horse"))
    assert database.change_person(bob_id, disabled=True)
    bob = database.user("bob")
    assert bob is not None and bob.disabled and password_matches(bob.password, "correct horse")
    assert database.change_person(bob_id, disabled=False)
    bob = database.user("bob")
    assert bob is not None and not bob.disabled
    assert not database.change_person(bob_id + 1, disabled=True)
    assert not database.set_password("carol", hash_password("correct horse"))


# -- the password's hash -----------------------------------------------------------------------


def test_a_password_is_kept_only_as_an_argon2id_hash():
    hashed = hash_password("correct horse")
    assert hashed.startswith("$argon2id$") and "correct horse" not in hashed
    assert hashed != hash_password("correct horse")  # salted
    assert password_matches(hashed, "correct horse")
    assert not password_matches(hashed, "correct hors")
    assert not password_matches(None, "correct horse")  # a person without a password
    assert not password_matches(hashed, "")


def test_a_short_password_is_refused():
    with pytest.raises(Refused, match="at least 8"):
        hash_password("1234567")


# -- the commands ------------------------------------------------------------------------------


def users(*args: str, data_dir: Path, url: str = "") -> subprocess.CompletedProcess[str]:
    return run_main(
        "users", *args, searxng_url=NO_SEARXNG, DATA_DIR=str(data_dir), DATABASE_URL=url
    )


@pytest.fixture
def typed(monkeypatch):
    """What a script pipes into the command."""

    def given(text: str) -> None:
        monkeypatch.setattr("sys.stdin", io.StringIO(text))

    return given


def test_the_commands_add_list_disable_and_set_a_password(tmp_path, database_url, typed):
    data = tmp_path / "data"
    typed("correct horse\n")
    added = users("add", "alice", "--admin", "--password-stdin", data_dir=data, url=database_url)
    assert (added.returncode, added.stdout) == (0, "added alice, an admin, with a password\n")
    added = users("add", "bob", "--email", "bob@example.org", data_dir=data, url=database_url)
    assert "without a password" in added.stdout
    typed("battery staple\n")
    assert users("passwd", "bob", data_dir=data, url=database_url).returncode == 0
    assert users("disable", "bob", data_dir=data, url=database_url).returncode == 0
    listed = users("list", data_dir=data, url=database_url)
    assert listed.returncode == 0
    alice, bob = (line.split("\t") for line in listed.stdout.splitlines())
    assert alice[:2] == ["alice", "admin, password"]
    assert (
        bob[0] == "bob" and bob[1] == "user, disabled, password" and bob[3] == "<bob@example.org>"
    )
    stored = Database(store_of(data, database_url))
    try:
        kept = stored.user("bob")
        assert kept is not None and password_matches(kept.password, "battery staple")
    finally:
        stored.close()


def test_the_first_person_may_be_added_before_the_first_start(tmp_path):
    data = tmp_path / "nothing-yet"
    assert users("add", "alice", "--admin", data_dir=data).returncode == 0
    assert (data / "chat.db").stat().st_mode & 0o077 == 0  # made private, as serve makes it


@pytest.mark.parametrize(
    ("args", "stdin", "said"),
    [
        (("add", "ali\tce"), "", "refused: the name holds a control character"),
        (("add", "alice", "--password-stdin"), "short\n", "refused: a password has at least 8"),
        (("add", "alice", "--password-stdin"), "", "refused: a password has at least 8"),
        (("passwd", "alice"), "short\n", "refused: a password has at least 8"),
    ],
    ids=["control-character", "short-password", "no-password-given", "passwd-short"],
)
def test_a_command_refuses_what_the_store_does_not_keep(tmp_path, typed, args, stdin, said):
    data = tmp_path / "data"
    users("add", "alice", data_dir=data)
    typed(stdin)
    refused = users(*args, data_dir=data)
    assert (refused.returncode, refused.stdout) == (2, "")
    assert refused.stderr.startswith(said)
    assert users("list", data_dir=data).stdout.count("\n") == 1  # only alice, as she was


def test_a_name_taken_or_unknown_says_so(tmp_path, typed):
    data = tmp_path / "data"
    users("add", "alice", data_dir=data)
    taken = users("add", "alice", "--admin", data_dir=data)
    assert (taken.returncode, taken.stderr) == (
        2,
        "refused: there is already a user named 'alice'\n",
    )
    for action in ("disable", "enable", "passwd"):
        typed("correct horse\n")
        unknown = users(action, "carol", data_dir=data)
        assert (unknown.returncode, unknown.stderr) == (
            1,
            "error: there is no user named 'carol'\n",
        )
    assert "admin" not in users("list", data_dir=data).stdout


def test_no_users_says_the_service_serves_one_person(tmp_path):
    listed = users("list", data_dir=tmp_path / "data")
    assert listed.returncode == 0 and "no users" in listed.stdout
