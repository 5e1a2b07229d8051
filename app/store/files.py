"""The plain files of DATA_DIR: the folder and files made private whatever the umask, the
access token, memory.md (a file people edit) and the atomic write they share
(docs/security.md)."""

from __future__ import annotations

import contextlib
import os
import secrets
import tempfile
from pathlib import Path

from app.store.errors import Damaged

TOKEN_FILE = "access-token"
"""The token made at first start under Compose when AUTH_TOKEN is empty."""
MEMORY_FILE = "memory.md"
PEOPLES_MEMORY = "memory"
"""The folder of DATA_DIR with each person's memory.md in household mode, named by their id."""


def private_dir(path: Path) -> None:
    """DATA_DIR, made readable by its owner alone whatever the umask: it holds every
    conversation, memory.md and the access token."""
    if not path.is_dir():
        path.mkdir(parents=True, exist_ok=True)
        path.chmod(0o700)


def private_file(path: Path) -> None:
    """An empty file only its owner may read, unless it exists (SQLite gives its journal
    files the database's mode)."""
    private_dir(path.parent)
    with contextlib.suppress(FileExistsError):
        os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
        path.chmod(0o600)  # whatever the umask took away or not


def stored_token(data_dir: Path) -> tuple[str, bool]:
    """The access token kept in DATA_DIR, made (256 random bits, a file only its owner can
    read) if there is none yet: (token, made now). Written aside, then linked into place, so
    the file is never seen empty: replicas starting together on one volume all read the one
    made first. An empty one (a full disk) reads as "", which the caller refuses."""
    private_dir(data_dir)
    path = data_dir / TOKEN_FILE
    token = secrets.token_urlsafe(32)
    fd, aside = tempfile.mkstemp(dir=data_dir, prefix=f".{TOKEN_FILE}.", suffix=".tmp")
    try:
        os.fchmod(fd, 0o600)  # whatever the umask
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            out.write(token + "\n")
        try:
            os.link(aside, path)
        except FileExistsError:
            return path.read_text(encoding="utf-8").strip(), False
    finally:
        os.unlink(aside)
    return token, True


def kept_token(data_dir: Path) -> str | None:
    """The access token serve made and kept in DATA_DIR (stored_token), without making one:
    None when there is none yet."""
    path = data_dir / TOKEN_FILE
    return path.read_text(encoding="utf-8").strip() if path.exists() else None


def write_atomic(path: Path, text: str) -> None:
    """A reader sees the old text or the new, never part of it; a crash meanwhile leaves a
    hidden .tmp file beside it, which `remove_leftovers` takes at the next start."""
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


def remove_leftovers(root: Path) -> int:
    """The temporary files a crash left mid-write (see `write_atomic`): how many went."""
    leftovers = [*root.glob(".*.tmp"), *(root / PEOPLES_MEMORY).glob(".*.tmp")]
    for leftover in leftovers:
        leftover.unlink(missing_ok=True)
    return len(leftovers)


def memory_file(root: Path, person: int | None) -> Path:
    """memory.md: the single-user modes' in DATA_DIR (`person` None), else that person's
    (a users rowid) in DATA_DIR/memory/."""
    return root / MEMORY_FILE if person is None else root / PEOPLES_MEMORY / f"{person}.md"


def adopt_memory(root: Path, person: int) -> bool:
    """The single-user modes' memory.md made that person's, unless they have one already
    (it is then left where it is): whether it moved. Replicas starting together move it
    once: the one that finds it gone has nothing to do."""
    shared, own = root / MEMORY_FILE, memory_file(root, person)
    if own.exists() or not shared.exists():
        return False
    own.parent.mkdir(exist_ok=True)
    try:
        os.rename(shared, own)
    except FileNotFoundError:
        return False
    return True


def memory_text(path: Path) -> str:
    """memory.md, empty when there is none; Damaged when it is not UTF-8."""
    try:
        return path.read_bytes().decode("utf-8")
    except FileNotFoundError:
        return ""
    except UnicodeDecodeError as exc:
        raise Damaged(
            f"{path} is not UTF-8 text (byte {exc.start}): "
            "save it as UTF-8, or replace it in Settings"
        ) from None


def forget_memory(root: Path, person: int) -> None:
    """A removed person's memory.md gone (after their rows: a failure here leaves a file
    no one reads, never a person without their file)."""
    memory_file(root, person).unlink(missing_ok=True)
