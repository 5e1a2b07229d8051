"""Answer versions: a turn's tail (its user message and what follows) set aside when a
regenerate or an edit replaced it, and brought back when the user switches to it or
rewinds what replaced it. Each helper runs inside its caller's transaction."""

from __future__ import annotations

from app import jsoncodec
from app.store.leases import Leases
from app.store.nul import json_text
from app.store.rows import TailSnapshot, VersionMark, measured_messages


class Versions(Leases):
    """The versions' reads and the moves between a version and the shown tail."""

    def version_marks(self, rowid: int) -> dict[int, VersionMark]:
        """By user message position: which version is shown, of how many."""
        rows = self.db.execute(
            "SELECT position, count(*), sum(slot) FROM turn_versions WHERE conversation = ? "
            "GROUP BY position",
            (rowid,),
        )
        marks: dict[int, VersionMark] = {}
        for position, kept, slots in rows:
            count = kept + 1
            marks[position] = {"index": count * (count - 1) // 2 - slots + 1, "count": count}
        return marks

    def set_aside(self, rowid: int, position: int) -> None:
        """A copy of the tail from `position` (with the versions of its later turns and the
        prompt measured over it) becomes a version in the shown slot; the caller replaces
        the tail, which takes the next slot. The shown tail's own rows stay to the caller."""
        mark = self.version_marks(rowid).get(position)
        slot = 0 if mark is None else mark["index"] - 1
        messages = self.db.execute(
            "SELECT role, content, details, digest FROM messages WHERE conversation = ? "
            "AND position >= ? ORDER BY position",
            (rowid, position),
        ).fetchall()
        later = self.db.execute(
            "SELECT position, slot, tail FROM turn_versions WHERE conversation = ? "
            "AND position > ? ORDER BY rowid",
            (rowid, position),
        ).fetchall()
        usage, budget = self.db.execute(
            "SELECT usage, budget FROM conversations WHERE rowid = ?", (rowid,)
        ).fetchone()
        measured_here = usage is not None and measured_messages(usage) > position
        tail: TailSnapshot = {
            "messages": messages,
            "later": later,
            "usage": usage if measured_here else None,
            "budget": budget,
        }
        self.db.execute(
            "INSERT INTO turn_versions (conversation, position, slot, tail) VALUES (?, ?, ?, ?)",
            (rowid, position, slot, json_text(tail)),
        )
        self.db.execute(
            "DELETE FROM turn_versions WHERE conversation = ? AND position > ?", (rowid, position)
        )
        if measured_here:  # that prompt was measured over the tail set aside
            self.db.execute("UPDATE conversations SET usage = NULL WHERE rowid = ?", (rowid,))

    def bring_back(self, rowid: int, position: int, version: int) -> None:
        """Version row `version` becomes the tail from `position` (which the caller emptied)."""
        text = self.scalar("SELECT tail FROM turn_versions WHERE rowid = ?", (version,))
        tail: TailSnapshot = jsoncodec.loads(text)
        self.db.execute("DELETE FROM turn_versions WHERE rowid = ?", (version,))
        self.db.executemany(
            "INSERT INTO messages (conversation, position, role, content, details, digest) "
            "VALUES (?, ?, ?, ?, ?, ?)",
            [(rowid, position + i, *columns) for i, columns in enumerate(tail["messages"])],
        )
        self.db.executemany(
            "INSERT INTO turn_versions (conversation, position, slot, tail) VALUES (?, ?, ?, ?)",
            [(rowid, *later) for later in tail["later"]],
        )
        current = self.scalar("SELECT usage FROM conversations WHERE rowid = ?", (rowid,))
        if tail["usage"] is not None or (current and measured_messages(current) > position):
            self.db.execute(
                "UPDATE conversations SET usage = ? WHERE rowid = ?", (tail["usage"], rowid)
            )
        if tail["budget"] is not None:
            self.db.execute(
                "UPDATE conversations SET budget = ? WHERE rowid = ?", (tail["budget"], rowid)
            )

    def bring_back_latest(self, rowid: int, position: int) -> bool:
        """The version set aside last at `position`, shown again (the tail is empty)."""
        latest = self.scalar(
            "SELECT max(rowid) FROM turn_versions WHERE conversation = ? AND position = ?",
            (rowid, position),
        )
        if latest is None:
            return False
        self.bring_back(rowid, position, latest)
        return True
