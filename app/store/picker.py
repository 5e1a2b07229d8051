"""What the model picker keeps: the models each person added (one list in the single-user
modes), and the models whose server refused the tool declarations."""

from __future__ import annotations

from app.store.connection import Connection
from app.store.rows import ToolRefusal, now

MAX_REASON_CHARS = 500
"""A model server's refusal is kept this long: enough to say why, bounded whatever it sent."""


class Picker(Connection):
    """The picker's queries; each write its own transaction."""

    def models(self, person: int | None = None) -> list[str]:
        """The models `person` added (household mode); None: the single-user modes' list."""
        mine, whose = owned_by(person)
        rows = self.db.execute(
            f"SELECT model FROM added_models WHERE {mine} ORDER BY position", whose
        )
        return [model for (model,) in rows]

    def set_models(self, models: list[str], person: int | None = None) -> None:
        with self.write():
            self.replace_models(models, person)

    def adopt_models(self, person: int) -> int:
        """The single-user modes' models made `person`'s, unless they added their own:
        how many."""
        with self.write():
            adopted = self.models()
            if not adopted or self.models(person):
                return 0
            self.replace_models(adopted, person)
            self.replace_models([], None)
            return len(adopted)

    def replace_models(self, models: list[str], person: int | None) -> None:
        """In the caller's transaction."""
        mine, whose = owned_by(person)
        self.db.execute(f"DELETE FROM added_models WHERE {mine}", whose)
        self.db.executemany(
            "INSERT INTO added_models (id, person, position, model) VALUES (?, ?, ?, ?)",
            [
                (f"{'single' if person is None else person}:{n}", person, n, model)
                for n, model in enumerate(models)
            ],
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


def owned_by(person: int | None) -> tuple[str, tuple[int, ...]]:
    """The condition on `person` (NULL for the single-user modes) and its parameters."""
    return ("person IS NULL", ()) if person is None else ("person = ?", (person,))
