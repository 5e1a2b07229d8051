"""The JSON files of the versions before the database (DATA_DIR/conversations/*.json and
models.json), imported on first start, then moved aside."""

from __future__ import annotations

import logging
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypeAlias, cast

from app import jsoncodec
from app.store.nul import json_text
from app.store.picker import Picker
from app.store.rows import Message, check_id, now

LegacyConversation: TypeAlias = dict[str, Any]
"""A conversation file of earlier versions as read: its id, title, settings and messages
checked (`parse_conversation`), the rest kept as the file had it. Free-form JSON: those
versions wrote what they wrote."""

logger = logging.getLogger(__name__)


class LegacyImport(Picker):
    """The import, each conversation in its own transaction."""

    def import_files(self, root: Path) -> int:
        """Conversations from DATA_DIR/conversations/*.json, then the folder is renamed
        aside (never deleted). Safe to repeat after a crash: an id already here is skipped.
        Returns how many were imported."""
        folder = root / "conversations"
        imported = 0
        for path in sorted(folder.glob("*.json")) if folder.is_dir() else []:
            try:
                conversation = parse_conversation(path.read_bytes())
                check_id(conversation["id"])
            except (OSError, ValueError) as exc:
                logger.warning("not imported, kept in the folder set aside: %s (%s)", path, exc)
                continue
            imported += self.import_one(conversation)
        models_file = root / "models.json"
        if models_file.exists():
            try:
                listed = jsoncodec.loads(models_file.read_text(encoding="utf-8"))
                self.set_models([m for m in listed if isinstance(m, str)])
            except ValueError as exc:
                logger.warning("models.json not imported (%s)", exc)
            models_file.rename(root / "models.json.imported")
        if folder.is_dir():
            aside = root / f"conversations.imported-{datetime.now(UTC):%Y%m%d-%H%M%S}"
            folder.rename(aside)
            logger.info(
                "imported %d conversation files into %s; the files are in %s",
                imported,
                self.path,
                aside,
            )
        return imported

    def import_one(self, conversation: LegacyConversation) -> int:
        """One conversation as `parse_conversation` read it; 0 if its id is here already."""
        with self.write(durable=True):
            exists = "SELECT 1 FROM conversations WHERE id = ?"
            if self.db.execute(exists, (conversation["id"],)).fetchone():
                return 0
            stamp = now()
            optional = [conversation.get(k) for k in ("totals", "usage", "budget")]
            inserted = self.db.execute(
                "INSERT INTO conversations (id, title, title_from_message, created, updated, "
                "settings, summary, summarized, totals, usage, budget) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING rowid",
                (
                    conversation["id"],
                    conversation["title"],
                    int(bool(conversation.get("title_from_message"))),
                    str(conversation.get("created") or stamp),
                    str(conversation.get("updated") or stamp),
                    json_text(conversation["settings"]),
                    str(conversation.get("summary") or ""),
                    int(conversation.get("summarized") or 0),
                    *(None if value is None else json_text(value) for value in optional),
                ),
            )
            (rowid,) = inserted.fetchone()
            for position, message in enumerate(conversation["messages"]):
                if isinstance(message, dict) and isinstance(message.get("role"), str):
                    # Only its role is checked: the rest is kept as the file had it.
                    kept = cast(Message, {**message, "content": str(message.get("content") or "")})
                    self.insert(rowid, position, kept)
            return 1


def parse_conversation(raw: bytes) -> LegacyConversation:
    """A conversation file of earlier versions, or ValueError saying what is wrong."""
    try:
        conversation = jsoncodec.loads(raw.decode("utf-8"))
    except UnicodeDecodeError:
        raise ValueError("not UTF-8") from None
    except ValueError as exc:
        raise ValueError(f"not valid JSON: {exc}") from None
    if not isinstance(conversation, dict):
        raise ValueError("not a JSON object")
    for key, kind in (("id", str), ("title", str), ("settings", dict), ("messages", list)):
        if not isinstance(conversation.get(key), kind):
            raise ValueError(f"its {key!r} is missing or not a {kind.__name__}")
    return conversation
