"""What the store refuses, each with the HTTP status the web layer answers with
(docs/architecture.md, "Errors"), and the standard-library base callers catch it by."""

from __future__ import annotations

from app.errors import ServiceError


class NotFound(ServiceError, LookupError):
    """No conversation with that id."""

    status = 404


class InvalidId(ServiceError, ValueError):
    """Not a conversation id: refused before anything touches the disk."""

    status = 400


class Damaged(ServiceError, ValueError):
    """Data that cannot be read as what it should be; the message says which and what to
    do. The rest of the data stays usable."""

    status = 409


class Conflict(ServiceError, RuntimeError):
    """The request does not apply to the conversation as it is now (nothing to rewind)."""

    status = 409


class Refused(ServiceError, ValueError):
    """A value the store does not keep (a user's name with a control character, a password
    too short); the message says why."""

    status = 400


class Busy(Conflict):
    """A turn holds the conversation."""


class Unavailable(ServiceError, ConnectionError):
    """The database does not answer (PostgreSQL's server or the network to it is down):
    what psycopg raised, translated where the store calls it."""

    status = 503


class Unreachable(Unavailable):
    """At start: the database named by DATABASE_URL cannot be reached; the message says
    where and what to check."""


class SchemaRefused(Unavailable):
    """At start: PostgreSQL refused to build the schema (a user not allowed to create it)."""
