"""Conversations on disk: one JSON file each under DATA_DIR, readable with cat.

Writes are atomic (temp file, fsync, rename), so a crash leaves the old file or the
new one, never half of one. A read-modify-write (`update`) never awaits, so on the
server's event loop no other request can interleave with it; a whole turn, which does
await, claims its conversation, and a second turn on it is refused meanwhile.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import tempfile
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

ID_PATTERN = r"^[a-z0-9][a-z0-9-]{5,63}$"
ID = re.compile(ID_PATTERN)


class NotFound(LookupError):
    """No conversation with that id."""


class InvalidId(ValueError):
    """Not a conversation id: refused before anything touches the disk."""


class Damaged(ValueError):
    """A file on disk that cannot be read as what it should be; the message says which
    file and what to do. The rest of the data stays usable."""


def now() -> str:
    # Microseconds: the conversation list sorts on it, and edits come within a second.
    return datetime.now(UTC).isoformat(timespec="microseconds")


def write_atomic(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as file:
            file.write(text)
            file.flush()
            os.fsync(file.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


class Storage:
    """Conversations, the memory file and the user's model list under one directory."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.conversations = root / "conversations"
        self.memory_path = root / "memory.md"
        self.models_path = root / "models.json"
        self.running: set[str] = set()

    def clean_leftovers(self) -> int:
        """Remove temporary files a crash left mid-write (the real files are intact: the
        rename never happened). Returns how many."""
        leftovers = [*self.root.glob(".*.tmp"), *self.conversations.glob(".*.tmp")]
        for leftover in leftovers:
            leftover.unlink(missing_ok=True)
        return len(leftovers)

    def path(self, conversation_id: str) -> Path:
        if not isinstance(conversation_id, str) or not ID.fullmatch(conversation_id):
            raise InvalidId(f"invalid conversation id: {conversation_id!r}")
        return self.conversations / f"{conversation_id}.json"

    def claim(self, conversation_id: str) -> bool:
        """Mark a turn as running in the conversation; False if one already is."""
        if conversation_id in self.running:
            return False
        self.running.add(conversation_id)
        return True

    def release(self, conversation_id: str) -> None:
        self.running.discard(conversation_id)

    def create(self, conversation: dict[str, Any]) -> dict[str, Any]:
        conversation = {
            "id": datetime.now(UTC).strftime("%Y%m%d-") + secrets.token_hex(5),
            "created": now(),
            "updated": now(),
            **conversation,
        }
        self.save(conversation)
        return conversation

    def load(self, conversation_id: str) -> dict[str, Any]:
        path = self.path(conversation_id)
        try:
            return parse_conversation(path.read_bytes())
        except FileNotFoundError:
            raise NotFound(f"no conversation {conversation_id}") from None
        except ValueError as exc:
            raise Damaged(
                f"conversation {conversation_id} is damaged on disk ({exc}): "
                f"repair or remove {path}"
            ) from None

    def save(self, conversation: dict[str, Any]) -> None:
        conversation["updated"] = now()
        text = json.dumps(conversation, ensure_ascii=False, indent=1)
        write_atomic(self.path(conversation["id"]), text)

    def update(
        self, conversation_id: str, change: Callable[[dict[str, Any]], Any]
    ) -> dict[str, Any]:
        """Apply change to the freshly read conversation and save it, without awaiting."""
        conversation = self.load(conversation_id)
        change(conversation)
        self.save(conversation)
        return conversation

    def delete(self, conversation_id: str) -> None:
        try:
            self.path(conversation_id).unlink()
        except FileNotFoundError:
            raise NotFound(f"no conversation {conversation_id}") from None

    def list(self, query: str = "") -> list[dict[str, Any]]:
        """Newest first; with a query, those whose title or messages contain it."""
        found = []
        needle = query.casefold()
        for path in self.conversations.glob("*.json"):
            try:
                conversation = parse_conversation(path.read_bytes())
            except OSError:
                continue
            except ValueError as exc:
                entry = damaged_entry(path, str(exc))
                if needle in entry["title"].casefold():
                    found.append(entry)
                continue
            haystack = " ".join(
                [conversation.get("title", "")]
                + [str(m.get("content", "")) for m in conversation.get("messages", [])]
            ).casefold()
            if needle in haystack:
                found.append(
                    {k: conversation.get(k) for k in ("id", "title", "created", "updated")}
                )
        return sorted(found, key=lambda c: c["updated"] or "", reverse=True)

    def read_memory(self) -> str:
        try:
            return self.memory_path.read_bytes().decode("utf-8")
        except FileNotFoundError:
            return ""
        except UnicodeDecodeError as exc:
            raise Damaged(
                f"{self.memory_path} is not UTF-8 text (byte {exc.start}): "
                "save it as UTF-8, or replace it in Settings"
            ) from None

    def write_memory(self, text: str) -> None:
        write_atomic(self.memory_path, text)

    def read_models(self) -> list[str]:
        try:
            models = json.loads(self.models_path.read_text(encoding="utf-8"))
        except (FileNotFoundError, ValueError):
            return []
        return [m for m in models if isinstance(m, str)]

    def write_models(self, models: list[str]) -> None:
        write_atomic(self.models_path, json.dumps(models, ensure_ascii=False, indent=1))


def parse_conversation(raw: bytes) -> dict[str, Any]:
    """A conversation as stored, or ValueError saying what is wrong with it."""
    try:
        conversation = json.loads(raw.decode("utf-8"))
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


def damaged_entry(path: Path, reason: str) -> dict[str, Any]:
    """How the list shows a file it cannot read: by its name, marked, never silently gone."""
    changed = datetime.fromtimestamp(path.stat().st_mtime, UTC).isoformat(timespec="microseconds")
    return {
        "id": path.stem,
        "title": f"Damaged conversation {path.stem}",
        "created": changed,
        "updated": changed,
        "damaged": reason,
    }
