"""A turn's outcome written late: the database stopped answering when the turn ended, and
the chat service kept the outcome to write when it answers again (app/chat/pending.py).
By then the turn's lease may have expired and another turn may have moved the conversation
on: the outcome is written only where the turn left it (docs/architecture.md, "A lost
database")."""

from __future__ import annotations

from app import jsoncodec
from app.store.rows import ConversationRow
from app.store.turns import Turns


class LateOutcomes(Turns):
    def hold_for_outcome(self, conversation_id: str, owner: str, position: int, asked: str) -> bool:
        """In one transaction: the conversation's lease for `owner` again (free, expired,
        or still its own) when the conversation is still where the turn left it, the
        question `asked` last at `position - 1` with nothing after it but the turn's own
        checkpoint; True then, and the caller writes the outcome (save_outcome, which
        releases the lease). False, with nothing taken, when it moved on (another turn, a
        rewind, an edit) or another turn holds it; NotFound when it was deleted."""
        with self.write():
            row = self.row(conversation_id)
            if not self.take(conversation_id, owner, again=True):
                return False
            if self.left_where(row, position, asked):
                return True
            self.drop_lease(conversation_id, owner)
            return False

    def left_where(self, row: ConversationRow, position: int, asked: str) -> bool:
        tail = self.db.execute(
            "SELECT position, role, content, details FROM messages "
            "WHERE conversation = ? AND position >= ? ORDER BY position",
            (row.rowid, position - 1),
        ).fetchall()
        if not tail or tuple(tail[0][:3]) != (position - 1, "user", asked):
            return False
        after = tail[1:]
        if not after:
            return True
        if len(after) > 1:
            return False
        at, role, _, details = after[0]
        checkpoint = at == position and role == "assistant"
        return checkpoint and bool(jsoncodec.loads(details).get("status") == "interrupted")
