"""What PostgreSQL's refusals mean to whoever runs the service: one line naming the server
(host:port/database, never the password) and what to check, for each way a connection
fails (docs/architecture.md, "A lost database"). Used by postgres.py."""

from __future__ import annotations

import re

PREFIX = re.compile(r'^connection failed: connection to server at "[^"]*", port \d+ failed:\s*')
FATAL = re.compile(r"^(FATAL|ERROR):\s+")
MISSING_DATABASE = re.compile(r'database "([^"]*)" does not exist')
LOGIN = re.compile(r"password authentication failed|no password supplied|authentication failed")


def reason_of(error: str) -> str:
    """psycopg's message, its first line without the repeated preamble."""
    lines = [line.strip() for line in error.strip().splitlines() if line.strip()]
    first = PREFIX.sub("", lines[0]) if lines else ""
    return FATAL.sub("", first) or "no reason given"


def cannot_connect(where: str, error: str, url: str) -> str:
    """The one line a failed connection gives (at start: `serve`, `doctor`). libpq may
    quote a piece of a malformed URL: its password never shows."""
    if re.match(r"^[a-z]+://[^/?#]*@[^/?#]*@", url):  # libpq would take a piece as the host
        return (
            "DATABASE_URL is not a valid PostgreSQL URL: an @ in its user or password must be "
            "written %40"
        )
    reason = reason_of(error)
    if secret := password_of(url):
        reason = reason.replace(secret, "***")
    if missing := MISSING_DATABASE.search(reason):
        return (
            f"PostgreSQL at {where} has no database {missing.group(1)!r}: create it "
            f"(createdb {missing.group(1)}) or fix the database name in DATABASE_URL"
        )
    if LOGIN.search(reason):
        return (
            f"PostgreSQL at {where} refused the login ({reason}): check the user and "
            "password in DATABASE_URL"
        )
    return (
        f"cannot reach PostgreSQL at {where} ({reason}): check that the server runs and "
        "accepts connections from here, and the host and port in DATABASE_URL"
    )


def password_of(url: str) -> str:
    """The password a postgresql:// URL holds, as written (its user part ends at the last @
    before the host)."""
    found = re.match(r"^[a-z]+://[^/?#]*?:(.*)@[^@/?#]*(?:[/?#]|$)", url)
    if found is None:
        found = re.search(r"password=([^\s&]+)", url)
    return found.group(1) if found and found.group(1) else ""


def stopped_answering(where: str, error: str) -> str:
    """A query that failed because the server or the network went away."""
    return f"the database (PostgreSQL at {where}) does not answer: {reason_of(error)}"
