"""What the model picker keeps: the models the user added, and the models whose server
refused the tool declarations."""

from __future__ import annotations

from app.store.connection import Connection
from app.store.rows import ToolRefusal, now

MAX_REASON_CHARS = 500
"""A model server's refusal is kept this long: enough to say why, bounded whatever it sent."""


class Picker(Connection):
    """The picker's queries; each write its own transaction."""

    def models(self) -> list[str]:
        return [model for (model,) in self.db.execute("SELECT id FROM models ORDER BY position")]

    def set_models(self, models: list[str]) -> None:
        with self.write():
            self.db.execute("DELETE FROM models")
            self.db.executemany(
                "INSERT INTO models (position, id) VALUES (?, ?)", enumerate(models)
            )

    def tool_refusals(self) -> list[ToolRefusal]:
        rows = self.db.execute("SELECT model, at, reason FROM tool_refusals ORDER BY model")
        return [{"model": model, "at": at, "reason": reason} for model, at, reason in rows]

    def tool_refusal(self, model: str) -> ToolRefusal | None:
        found = self.db.execute(
            "SELECT model, at, reason FROM tool_refusals WHERE model = ?", (model,)
        ).fetchone()
        if found is None:
            return None
        model, at, reason = found
        return {"model": model, "at": at, "reason": reason}

    def refuse_tools(self, model: str, reason: str) -> ToolRefusal:
        refusal: ToolRefusal = {"model": model, "at": now(), "reason": reason[:MAX_REASON_CHARS]}
        with self.write():
            self.db.execute(
                "INSERT INTO tool_refusals (model, at, reason) VALUES (?, ?, ?) "
                "ON CONFLICT (model) DO UPDATE SET at = excluded.at, reason = excluded.reason",
                (refusal["model"], refusal["at"], refusal["reason"]),
            )
        return refusal

    def forget_tool_refusal(self, model: str) -> bool:
        """Whether there was one: the next turn with this model declares the tools again."""
        with self.write():
            forgotten = self.db.execute("DELETE FROM tool_refusals WHERE model = ?", (model,))
            return forgotten.rowcount == 1
