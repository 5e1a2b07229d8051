"""A conversation's automatic title: its first message as one line of plain words, cut
between words."""

from __future__ import annotations

import re

TITLE_CHARS = 60
"""At most this many characters, the ellipsis of a cut included."""
FENCE = re.compile(r"^[ \t]*(?:```|~~~).*$", re.MULTILINE)
"""A code fence's line, its info string (the language) too: the code inside stays."""
LINK = re.compile(r"!?\[([^\]\n]*)\]\([^)\n]*\)")
"""A link or an image: its text stays, its address goes."""
BLOCK_MARK = re.compile(r"^[ \t]*(?:#{1,6}|>|[-+*]|\d{1,9}[.)])[ \t]+", re.MULTILINE)
"""A heading's, a quote's or a list item's mark at a line's start."""
INLINE_MARK = re.compile(r"`+|(?<!\w)[*_~]+|[*_~]+(?!\w)")
"""Backticks, and emphasis marks at a word's edge (snake_case keeps its underscore)."""


def title_from(message: str) -> str:
    """The words of `message` without Markdown's marks, cut between words with an
    ellipsis when they do not fit; a first word longer than the title is cut inside."""
    text = FENCE.sub(" ", message)
    text = LINK.sub(r"\1", text)
    text = BLOCK_MARK.sub(" ", text)
    words = INLINE_MARK.sub(" ", text).split() or message.split()
    whole = " ".join(words)
    if len(whole) <= TITLE_CHARS:
        return whole
    kept = ""
    for word in words:
        if len(kept) + len(word) + 2 > TITLE_CHARS:  # a space and the ellipsis
            break
        kept = f"{kept} {word}" if kept else word
    return f"{kept or whole[: TITLE_CHARS - 1]}…"
