"""The household's passwords, kept only as Argon2id hashes (argon2-cffi's defaults: 64 MiB
and 3 passes a hash, which makes each guess at a stolen database costly). Hashing takes
about 0.1 s of CPU: the web layer calls these in a thread, never on the event loop."""

from __future__ import annotations

from functools import cache

from argon2 import PasswordHasher
from argon2.exceptions import InvalidHashError, VerificationError

from app.store.errors import Refused

MIN_PASSWORD_CHARS = 8
MAX_PASSWORD_CHARS = 1024
"""Bounds the work a sign-in costs, whatever a client sends."""

HASHER = PasswordHasher()


@cache
def nobody() -> str:
    """Checked against for a name with no password, so that a wrong name takes as long as a
    wrong password and the time of a refusal tells no one which names exist. Made when
    first needed: 0.1 s that a start without a sign-in need not pay."""
    return HASHER.hash("a password no one has")


def check_password(password: str) -> str:
    """`password` when it may be one; Refused, saying why, if not."""
    if len(password) < MIN_PASSWORD_CHARS:
        raise Refused(f"a password has at least {MIN_PASSWORD_CHARS} characters")
    if len(password) > MAX_PASSWORD_CHARS:
        raise Refused(f"a password has at most {MAX_PASSWORD_CHARS} characters")
    return password


def hash_password(password: str) -> str:
    return HASHER.hash(check_password(password))


def password_matches(stored: str | None, password: str) -> bool:
    """Whether `password` is the one `stored` was made from; False for no stored hash (a
    person who signs in through the proxy), after the same work."""
    if not 0 < len(password) <= MAX_PASSWORD_CHARS:
        return False
    try:
        return HASHER.verify(stored or nobody(), password) and stored is not None
    except (VerificationError, InvalidHashError):
        return False
