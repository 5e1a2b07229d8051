"""The household's people (docs/household.md): kept on both backends with a unique,
checked name and a password only as its Argon2id hash."""

from __future__ import annotations

import pytest

from app.store.database import Database
from app.store.errors import Conflict, Refused
from app.store.passwords import hash_password, password_matches
from app.store.users import NewUser
from tests.conftest import store_of


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
    database.add_user(NewUser("bob"))
    assert database.set_password("bob", hash_password("correct horse"))
    assert database.disable_user("bob")
    bob = database.user("bob")
    assert bob is not None and bob.disabled and password_matches(bob.password, "correct horse")
    assert not database.disable_user("carol")
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
