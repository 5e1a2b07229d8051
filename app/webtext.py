"""Web text as a model reads it: inside <untrusted-data> blocks it is told never to obey,
with a closing marker no page can guess; and the limits of what a model may send out
(a search query). Used by our tools, the MCP server's and the checks alike."""

from __future__ import annotations

import re
import secrets

MAX_QUERY_CHARS = 400
"""The longest search query a model may write: a query is the one text of the model's
that leaves the machine (to the search engines)."""
UNTRUSTED_TAG = "untrusted-data"
# Any spelling of the tag inside web text, so a page can neither close our block nor open one
# that looks like ours.
TAG_IN_TEXT = re.compile(re.escape(UNTRUSTED_TAG), re.IGNORECASE)


PASSAGE_MARK = "\n¶ "
"""Starts each passage of a page a search engine has read (Brave's LLM Context) in what a
model reads: a cut for the window's sake keeps passages whole (app/chat/fitting.py)."""


def untrusted(text: str, source: str) -> str:
    """Web text in a block the model is told never to obey. The closing marker carries a
    random id made for this call, so text that closes the block must guess it."""
    nonce = secrets.token_hex(8)
    # A case-blind regex scans a search's results a character at a time (a quarter of a
    # millisecond a turn); casefold() finds every spelling it matches ("UNTRUSTED", "ſ"),
    # so it runs only on text that has one.
    body = TAG_IN_TEXT.sub("untrusted_data", text) if UNTRUSTED_TAG in text.casefold() else text
    opening = f'<{UNTRUSTED_TAG} source="{source}" id="{nonce}">'
    return f'{opening}\n{body}\n</{UNTRUSTED_TAG} id="{nonce}">'


def results_text(query: str, entries: list[str]) -> str:
    """A search's results as a model gets them: ours, and the MCP server's web_search."""
    if not entries:
        return f"Results for {query!r}: none."
    text = untrusted("\n\n".join(entries), "web_search")
    return f"Results for {query!r}:\n\n{text}"


def clipped(text: str, length: int) -> str:
    text = text.strip()
    return text if len(text) <= length else text[: length - 1].rstrip() + "…"
