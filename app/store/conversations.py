"""The conversations: made, read, listed and searched, changed, deleted, swept when
abandoned, and shown at another version of one of their turns."""

from __future__ import annotations

import contextlib
import secrets
from datetime import UTC, datetime, timedelta

from app import jsoncodec
from app.store.dialect import search_words
from app.store.errors import Conflict, Damaged, NotFound
from app.store.nul import json_text
from app.store.rows import (
    Conversation,
    Entry,
    Message,
    StoredSettings,
    brief,
    check_id,
    conversation_from_row,
    detailed,
    now,
    settings_of,
)
from app.store.versions import Versions

NO_POSITION = 2**62
"""After every message."""
HAS_MESSAGES = "EXISTS (SELECT 1 FROM messages WHERE messages.conversation = conversations.rowid)"
EMPTY_KEPT = timedelta(hours=1)
"""How long a conversation with no message is kept after its last change: the page creates
one and sends its first message at once, and after a failed first turn it keeps the id to
send again; older than this, nobody is coming back to it (see Conversations.drop_empty)."""


class Conversations(Versions):
    """The queries of whole conversations; each write its own transaction."""

    def create(
        self, title: str, settings: StoredSettings, owner: int | None = None
    ) -> Conversation:
        """`owner`: the person's (users.rowid) in household mode; None in the single-user
        modes."""
        conversation_id = datetime.now(UTC).strftime("%Y%m%d-") + secrets.token_hex(5)
        stamp = now()
        with self.write():
            self.drop_empty()  # each new conversation sweeps the abandoned ones
            self.db.execute(
                "INSERT INTO conversations (id, title, created, updated, settings, owner) "
                "VALUES (?, ?, ?, ?, ?, ?)",
                (conversation_id, title, stamp, stamp, json_text(settings), owner),
            )
        return self.load(conversation_id)

    def load(
        self, conversation_id: str, *, details: bool = True, digests: int | None = None
    ) -> Conversation:
        """The conversation; without `details` its messages are role, text and digest only
        (what a turn sends the model): their details (activity, sources) are most of the
        parsing. `digests`: only that many of the latest digests (a turn sends no more, and
        each is a few KB to read)."""
        row = self.row(conversation_id)
        try:
            conversation = conversation_from_row(row)
            conversation["messages"] = self.messages(row.rowid, details=details, digests=digests)
            if details:
                messages = conversation["messages"]
                for position, mark in self.version_marks(row.rowid).items():
                    if position < len(messages) and messages[position]["role"] == "user":
                        messages[position]["versions"] = mark
        except ValueError as exc:
            raise Damaged(
                f"conversation {conversation_id} is damaged in {self.path} ({exc}): "
                f"export what is readable with `python -m app export {conversation_id}`, "
                "or delete it"
            ) from None
        return conversation

    def owner(self, conversation_id: str) -> int | None:
        """Whose the conversation is (None: no one's, the single-user modes'); InvalidId,
        NotFound as `row`."""
        found = self.db.execute(
            "SELECT owner FROM conversations WHERE id = ?", (check_id(conversation_id),)
        ).fetchone()
        if found is None:
            raise NotFound(f"no conversation {conversation_id}")
        owner: int | None = found[0]
        return owner

    def settings(self, conversation_id: str) -> StoredSettings:
        """Only the settings: what a request checks before a turn starts."""
        return settings_of(self.row(conversation_id))

    def messages(self, rowid: int, *, details: bool, digests: int | None) -> list[Message]:
        since = 0 if digests is None else self.digests_since(rowid, digests)
        columns = "role, content, CASE WHEN position >= ? THEN digest END"
        if details:
            columns += ", details"
        rows = self.db.execute(
            f"SELECT {columns} FROM messages WHERE conversation = ? ORDER BY position",
            (since, rowid),
        )
        if not details:
            return [brief(role, content, digest) for role, content, digest in rows]
        return [detailed(role, content, digest, text) for role, content, digest, text in rows]

    def digests_since(self, rowid: int, count: int) -> int:
        """The position from which the last `count` digests are."""
        since: int | None = self.scalar(
            "SELECT min(position) FROM (SELECT position FROM messages WHERE conversation = ? "
            "AND digest IS NOT NULL ORDER BY position DESC LIMIT ?) AS latest",
            (rowid, count),
        )
        return NO_POSITION if since is None else since

    def digests(self, conversation_id: str, start: int, end: int) -> dict[int, str]:
        """The digests of the messages from `start` to `end` (excluded), by position."""
        rows = self.db.execute(
            "SELECT position, digest FROM messages WHERE conversation = ? "
            "AND position >= ? AND position < ? AND digest IS NOT NULL",
            (self.row(conversation_id).rowid, start, end),
        )
        return {position: digest for position, digest in rows}

    def ids(self) -> list[str]:
        rows = self.db.execute("SELECT id FROM conversations ORDER BY created")
        return [conversation_id for (conversation_id,) in rows]

    def drop_empty(self) -> int:
        """Delete the conversations with no message untouched for EMPTY_KEPT and held by no
        live lease (one being answered is never taken): never listed, nothing in them to go
        back to. In the caller's transaction, or its own. Returns how many went."""
        before = (datetime.now(UTC) - EMPTY_KEPT).isoformat(timespec="microseconds")
        with contextlib.nullcontext() if self.db.in_transaction else self.write():
            self.drop_dead_leases()
            gone = self.db.execute(
                f"DELETE FROM conversations WHERE updated < ? AND NOT {HAS_MESSAGES} "
                "AND id NOT IN (SELECT conversation FROM leases "
                f"WHERE expires >= {self.dialect.clock})",
                (before,),
            ).rowcount
            if gone:
                self.db.execute(
                    "DELETE FROM leases WHERE conversation NOT IN (SELECT id FROM conversations)"
                )
        return gone

    def change(
        self, conversation_id: str, title: str | None, settings: StoredSettings
    ) -> Conversation:
        """Rename and change settings; a turn running meanwhile keeps its own copy. Neither
        moves the conversation in the list (its "updated": the last turn), except that one
        with no message yet counts its settings as a change (drop_empty's hour starts
        again)."""
        with self.write():
            row = self.row(conversation_id)
            if settings:
                merged = {**jsoncodec.loads(row.settings), **settings}
                self.db.execute(
                    "UPDATE conversations SET settings = ?, "
                    f"updated = CASE WHEN {HAS_MESSAGES} THEN updated ELSE ? END WHERE rowid = ?",
                    (json_text(merged), now(), row.rowid),
                )
            if title is not None:
                self.db.execute(
                    "UPDATE conversations SET title = ?, title_from_message = 0 WHERE rowid = ?",
                    (title, row.rowid),
                )
        return self.load(conversation_id)

    def delete(self, conversation_id: str) -> None:
        with self.write():
            self.row(conversation_id)
            self.refuse_if_held(conversation_id, "delete")
            self.db.execute("DELETE FROM conversations WHERE id = ?", (conversation_id,))
            self.db.execute("DELETE FROM leases WHERE conversation = ?", (conversation_id,))

    def switch_version(self, conversation_id: str, position: int, index: int) -> Conversation:
        """Show version `index` (from 1) of the turn whose user message is at `position`:
        the tail shown now is set aside in its slot, the chosen one takes its place."""
        with self.write():
            row = self.row(conversation_id)
            self.refuse_if_held(conversation_id, "switch versions")
            mark = self.version_marks(row.rowid).get(position)
            if mark is None:
                raise Conflict(f"the message at position {position} has no other versions")
            if not 1 <= index <= mark["count"]:
                raise Conflict(f"no version {index}: this turn has {mark['count']}")
            if position < row.summarized:
                raise Conflict("that turn is folded into the summary: its versions are kept only")
            if index != mark["index"]:
                chosen = self.scalar(
                    "SELECT rowid FROM turn_versions WHERE conversation = ? AND position = ? "
                    "AND slot = ?",
                    (row.rowid, position, index - 1),
                )
                self.set_aside(row.rowid, position)
                self.db.execute(
                    "DELETE FROM messages WHERE conversation = ? AND position >= ?",
                    (row.rowid, position),
                )
                self.bring_back(row.rowid, position, chosen)
                self.touch(row.rowid)
        return self.load(conversation_id)

    # Last: below it, `list` in an annotation would name this method.
    def list(self, query: str = "", owner: int | None = None) -> list[Entry]:
        """Newest first; with a query, those whose title or messages have words starting
        with each of the query's words (any case, accents optional). A conversation with no
        message is not listed: nothing in it to go back to (a failed first turn, a rewind of
        its only message, settings saved before the first message). `owner`: only that
        person's (household mode); None: all."""
        running = (
            "EXISTS (SELECT 1 FROM leases WHERE leases.conversation = conversations.id "
            f"AND leases.expires >= {self.dialect.clock})"
        )
        columns = f"id, title, created, updated, json_valid(settings), {running}"
        mine, whose = ("owner = ? AND ", (owner,)) if owner is not None else ("", ())
        if not query.strip():
            rows = self.db.execute(
                f"SELECT {columns} FROM conversations WHERE {mine}{HAS_MESSAGES} "
                "ORDER BY updated DESC",
                whose,
            )
        else:
            words = search_words(query)
            if not words:
                return []
            match = self.dialect.search_parameter(words)
            rows = self.db.execute(
                f"SELECT {columns} FROM conversations WHERE {mine}rowid IN "
                f"({self.dialect.search}) AND {HAS_MESSAGES} ORDER BY updated DESC",
                (*whose, match, match),
            )
        entries: list[Entry] = []
        for conversation_id, title, created, updated, valid, answering in rows:
            entry: Entry = {
                "id": conversation_id,
                "title": title,
                "created": created,
                "updated": updated,
                "running": bool(answering),
            }
            if not valid:
                entry["damaged"] = "its settings are not valid JSON"
            entries.append(entry)
        return entries
