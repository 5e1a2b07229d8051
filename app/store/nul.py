"""NUL (U+0000) kept out of everything the store writes, on both backends alike.

PostgreSQL's text refuses the character, and its jsonb the JSON escape `\\u0000`; SQLite
takes both. A page, a search result, a model or a client can send one, and one refused
write would lose a turn's answer. So every text a query is given loses its NULs
(`NulDropped`, the connection's `db`), and every JSON the store writes is made without the
escape (`json_text`): SQLite stores what PostgreSQL does, and a move between them
(migrate-db, transfer.py) changes nothing. docs/security.md, "What the web writes".
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from typing import Any

from app import jsoncodec
from app.store.dialect import Cursor, Session

NUL = "\x00"
JSON_NUL = re.compile(r"(?<!\\)((?:\\\\)*)\\u0000")
"""The escape of a NUL in JSON text: `\\u0000` after an even run of backslashes (after an
odd one it is the text `\\u0000`, an escaped backslash and `u0000`)."""


def without_nul(text: str) -> str:
    return text.replace(NUL, "") if NUL in text else text


def json_without_nul(text: str) -> str:
    """JSON text whose strings have lost their NULs."""
    return JSON_NUL.sub(r"\1", text) if "\\u0000" in text else text


def json_text(value: object) -> str:
    """`value` as JSON for a TEXT column: the store's one JSON writer."""
    return json_without_nul(jsoncodec.dumps_text(value))


def parameters_without_nul(parameters: Sequence[Any]) -> Sequence[Any]:
    """A query's parameters, each text without its NULs (the same sequence when none has
    one: the common case costs a scan)."""
    if not any(isinstance(value, str) and NUL in value for value in parameters):
        return parameters
    return [without_nul(value) if isinstance(value, str) else value for value in parameters]


class NulDropped:
    """A Session (either backend's) whose queries never see a NUL in a text parameter: the
    one door every write, and every search, goes through."""

    def __init__(self, session: Session) -> None:
        self.session = session

    @property
    def in_transaction(self) -> bool:
        return self.session.in_transaction

    def execute(self, sql: str, parameters: Sequence[Any] = (), /) -> Cursor:
        return self.session.execute(sql, parameters_without_nul(parameters))

    def executemany(self, sql: str, parameters: Iterable[Sequence[Any]], /) -> Cursor:
        return self.session.executemany(sql, map(parameters_without_nul, parameters))

    def close(self) -> None:
        self.session.close()
