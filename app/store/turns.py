"""What a turn writes: its start (the lease, the user's message, or the tail a regenerate or
an edit replaces), its answer checkpointed while it streams, its outcome; and the rewind of
the last message. See docs/architecture.md."""

from __future__ import annotations

from app import jsoncodec
from app.store.conversations import Conversations
from app.store.errors import Conflict
from app.store.nul import json_text
from app.store.rows import (
    NEW_TITLE,
    Conversation,
    ConversationRow,
    EditAt,
    Message,
    OutcomeWrite,
    Totals,
    message_columns,
    now,
    settings_of,
)
from app.store.titles import title_from


class Turns(Conversations):
    """The turn's queries; the helpers run in their caller's transaction."""

    def begin_turn(
        self,
        conversation_id: str,
        owner: str,
        message: str | None,
        model: str,
        digests: int | None = None,
        *,
        edit: EditAt | None = None,
    ) -> Conversation | None:
        """A turn's start, in one transaction: the lease for `owner`, then the user's
        `message` at the end of the log (with `edit`, in the place of the user message it
        names) or, for
        Regenerate (None), what followed the last user message removed (the replaced turn
        kept as a version); the model chosen is saved. Returns the conversation as the turn reads
        it (see `load`: only the last `digests` digests), or None, with nothing written,
        if a live owner holds it; damage found while reading it undoes the whole start."""
        # No fsync of its own: the outcome's, at the turn's end, covers the message too
        # (a power cut before then loses the turn either way).
        with self.write():
            row = self.row(conversation_id)
            if not self.take(conversation_id, owner):
                return None
            if message is None:
                self.drop_answer(row)
            elif edit is not None:
                self.replace_message(row, message, edit)
            else:
                self.append_user_message(row, message)
            self.set_model(row, model)
            return self.load(conversation_id, details=False, digests=digests)

    def append_user_message(self, row: ConversationRow, text: str) -> None:
        """The first message names a conversation still called NEW_TITLE."""
        position = self.next_position(row.rowid)
        if position == 0 and row.title == NEW_TITLE:
            self.db.execute(
                "UPDATE conversations SET title = ?, title_from_message = 1 WHERE rowid = ?",
                (title_from(text), row.rowid),
            )
        self.insert(row.rowid, position, {"role": "user", "content": text, "created": now()})

    def drop_answer(self, row: ConversationRow) -> None:
        """For Regenerate: what follows the last user message goes, kept as a version of its
        turn when it holds an answer (a failed attempt or no answer at all is not worth one)."""
        last = self.last_user_position(row, "regenerate")
        answered = self.db.execute(
            "SELECT 1 FROM messages WHERE conversation = ? AND position > ? "
            "AND role = 'assistant' AND coalesce(json_extract(details, '$.status'), '') != 'error'",
            (row.rowid, last),
        ).fetchone()
        if answered and last >= row.summarized:
            self.set_aside(row.rowid, last)
        self.db.execute(
            "DELETE FROM messages WHERE conversation = ? AND position > ?", (row.rowid, last)
        )

    def replace_message(self, row: ConversationRow, text: str, edit: EditAt) -> None:
        """For Edit: the user message named and everything after it (its answer, the later
        turns with their own versions) become a version of that turn; the new text takes
        their place and is answered as the conversation's last message."""
        position = self.last_user_position(row, "edit") if edit == "last" else edit
        if edit != "last" and not self.is_user_message(row, position):
            raise Conflict(f"no message of yours at position {position}: nothing to edit there")
        if position < row.summarized:
            raise Conflict("that message is folded into the summary: it cannot be edited")
        self.set_aside(row.rowid, position)
        self.db.execute(
            "DELETE FROM messages WHERE conversation = ? AND position >= ?", (row.rowid, position)
        )
        self.insert(row.rowid, position, {"role": "user", "content": text, "created": now()})

    def is_user_message(self, row: ConversationRow, position: int) -> bool:
        found = self.db.execute(
            "SELECT 1 FROM messages WHERE conversation = ? AND position = ? AND role = 'user'",
            (row.rowid, position),
        ).fetchone()
        return found is not None

    def last_user_position(self, row: ConversationRow, what: str) -> int:
        last: int | None = self.scalar(
            "SELECT max(position) FROM messages WHERE conversation = ? AND role = 'user'",
            (row.rowid,),
        )
        if last is None:
            raise Conflict(f"nothing to {what}: the conversation has no message")
        return last

    def rewind(self, conversation_id: str) -> str:
        """Take the last user message (and what follows) out of the log; its text."""
        with self.write():
            row = self.row(conversation_id)
            self.refuse_if_held(conversation_id, "rewind")
            return self.take_back(row)

    def take_back(self, row: ConversationRow) -> str:
        found = self.db.execute(
            "SELECT position, content FROM messages WHERE conversation = ? AND role = 'user' "
            "ORDER BY position DESC LIMIT 1",
            (row.rowid,),
        ).fetchone()
        if found is None:
            raise Conflict("nothing to rewind: the conversation has no message")
        position: int
        text: str
        position, text = found
        self.db.execute(
            "DELETE FROM messages WHERE conversation = ? AND position >= ?", (row.rowid, position)
        )
        # A message that had replaced a version (an edit, a regenerate) gives it back.
        restored = self.bring_back_latest(row.rowid, position)
        # Unless a version came back, a title that came from this message goes with it.
        if not restored and position == 0 and row.title_from_message:
            self.db.execute(
                "UPDATE conversations SET title = ?, title_from_message = 0 WHERE rowid = ?",
                (NEW_TITLE, row.rowid),
            )
        self.touch(row.rowid)
        return text

    def put_message(self, conversation_id: str, position: int, message: Message) -> None:
        """An answer being streamed, at its place (a checkpoint)."""
        with self.write():
            row = self.row(conversation_id)
            self.upsert(row.rowid, position, message)
            self.touch(row.rowid)

    def drop_message(self, conversation_id: str, position: int) -> None:
        """A checkpointed answer whose text was discarded, with nothing left to keep."""
        with self.write():
            row = self.row(conversation_id)
            self.db.execute(
                "DELETE FROM messages WHERE conversation = ? AND position = ?",
                (row.rowid, position),
            )

    def save_outcome(self, conversation_id: str, outcome: OutcomeWrite, owner: str) -> Totals:
        """A turn's whole outcome in one transaction, which releases the turn's lease (the
        outcome is written before another turn can start); the conversation's new totals."""
        with self.write(durable=True):
            row = self.row(conversation_id)
            self.drop_lease(conversation_id, owner)
            if outcome["rewind"]:
                self.db.execute(
                    "DELETE FROM messages WHERE conversation = ? AND position >= ?",
                    (row.rowid, outcome["position"]),
                )
                self.take_back(row)
            elif outcome["answer"] is not None:
                self.upsert(row.rowid, outcome["position"], outcome["answer"])
            totals: Totals = jsoncodec.loads(row.totals or "{}")
            for key, value in outcome["totals"].items():
                totals[key] = totals.get(key, 0) + value
            changes: dict[str, str | int] = {
                "totals": json_text(totals),
                "updated": now(),
            }
            if outcome["summary"] is not None:
                changes["summary"] = outcome["summary"]
            if outcome["summarized"] is not None:
                changes["summarized"] = outcome["summarized"]
            if outcome["budget"] is not None:
                changes["budget"] = json_text(outcome["budget"])
            if outcome["usage"] is not None:
                changes["usage"] = json_text(outcome["usage"])
            assignments = ", ".join(f"{column} = ?" for column in changes)
            self.db.execute(
                f"UPDATE conversations SET {assignments} WHERE rowid = ?",
                (*changes.values(), row.rowid),
            )
            return totals

    def next_position(self, rowid: int) -> int:
        # Positions run from 0 without a gap (only the end is ever removed): max, which
        # the (conversation, position) index answers at once, where count reads them all.
        last: int | None = self.scalar(
            "SELECT max(position) FROM messages WHERE conversation = ?", (rowid,)
        )
        return 0 if last is None else last + 1

    def upsert(self, rowid: int, position: int, message: Message) -> None:
        self.db.execute(
            "INSERT INTO messages (conversation, position, role, content, details, digest) "
            "VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (conversation, position) DO UPDATE SET "
            "role = excluded.role, content = excluded.content, details = excluded.details, "
            "digest = excluded.digest",
            (rowid, position, *message_columns(message)),
        )

    def set_model(self, row: ConversationRow, model: str) -> None:
        """The picker's choice is saved at once; the conversation was updated either way."""
        settings = settings_of(row)
        if settings.get("model") == model:
            self.touch(row.rowid)
            return
        self.db.execute(
            "UPDATE conversations SET settings = ?, updated = ? WHERE rowid = ?",
            (json_text({**settings, "model": model}), now(), row.rowid),
        )
