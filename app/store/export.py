"""A conversation as Markdown: readable anywhere, sources as links.

The text comes from the model, so from the pages it read: whatever a Markdown viewer would
do on its own is taken out. An image would be loaded as soon as the file is opened (an
address can carry the conversation out), so every image is escaped into text, and so is
raw HTML; a link whose text names another address than its target shows the target."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any
from urllib.parse import urlsplit

from app.store.rows import Conversation

FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")
CODE_SPAN = re.compile(r"(`+).+?\1")
HTML_TAG = re.compile(r"<(?=[A-Za-z/!?])")
LINK = re.compile(r"\[([^\[\]\n]*)\]\(\s*<?([^\s()<>]*(?:\([^\s()<>]*\)[^\s()<>]*)*)>?[^)\n]*\)")
ADDRESS_LIKE = re.compile(
    r"^(?:[a-z][a-z0-9+.-]*://)?(?:www\.)?[^\s/:@]+\.[a-z]{2,}(?::\d+)?(?:[/?#]\S*)?$", re.I
)
MARKDOWN_PUNCTUATION = re.compile(r"([\\`*_\[\]()<>!#|~])")


def markdown(conversation: Conversation) -> str:
    lines = [f"# {plain(conversation.get('title') or 'Conversation')}", ""]
    settings = conversation.get("settings", {})
    lines += [
        f"- exported from conversation `{conversation.get('id', '')}`, "
        f"created {str(conversation.get('created', ''))[:19].replace('T', ' ')} UTC",
        f"- model: {plain(settings.get('model') or 'default')}; "
        f"search locale: {plain(settings.get('search_locale', 'all'))}",
        "",
    ]
    if conversation.get("summary"):
        lines += ["## Summary of earlier messages", "", inert(conversation["summary"]), ""]
    for message in conversation.get("messages", []):
        lines += message_lines(message)
    return "\n".join(lines).rstrip() + "\n"


def message_lines(message: Mapping[str, Any]) -> list[str]:
    """A message with its details as they were streamed (JSON, read leniently)."""
    if message.get("role") == "user":
        text = inert(message["content"])
        quoted = "\n".join(f"> {line}" if line else ">" for line in text.split("\n"))
        return ["## You", "", quoted, ""]
    status = message.get("status", "complete")
    heading = f"## Assistant ({plain(message.get('model', ''))})"
    if status != "complete":
        heading += f" — {status}"
    lines = [heading, ""]
    for step in message.get("activity", []):
        if step.get("type") == "search":
            query, language = plain(step.get("query", "")), plain(step.get("language", ""))
            lines.append(f"- searched: {query} ({language})")
        elif step.get("type") == "fetch":
            lines.append(f"- read: {link(step.get('title') or '', step.get('url', ''))}")
    if message.get("activity"):
        lines.append("")
    lines += [inert(message.get("content", "")), ""]
    error = message.get("error")
    if error:
        lines += [f"*Error ({plain(error.get('kind'))}): {plain(error.get('message'))}*", ""]
    sources = message.get("sources", [])
    if sources:
        lines += ["Sources:", ""]
        for number, source in enumerate(sources, 1):
            lines.append(f"{number}. {link(source.get('title') or '', source.get('url', ''))}")
        lines.append("")
    return lines


def plain(text: object) -> str:
    """Text that Markdown shows as it is."""
    return MARKDOWN_PUNCTUATION.sub(r"\\\1", str(text or "")).replace("\n", " ")


def link(title: str, url: str) -> str:
    """A link to a source, its title from the web: plain text, and the address itself when
    the title names another."""
    shown = url if not title or names_another_host(title, url) else title
    target = url.replace("<", "%3C").replace(">", "%3E").replace(" ", "%20").replace("\n", "")
    if re.search(r"[()]", target):
        target = f"<{target}>"  # its parentheses cannot end the link early
    return f"[{plain(shown)}]({target})"


def inert(text: str) -> str:
    """Markdown written by the model, without what a viewer would act on by itself; code
    (fenced blocks, inline spans) is left as it is, since a viewer shows it as text."""
    out, fence = [], ""
    for line in text.split("\n"):
        marker = FENCE.match(line)
        if fence:
            if marker and marker[1][0] == fence[0] and len(marker[1]) >= len(fence):
                fence = ""
            out.append(line)
        elif marker:
            fence = marker[1]
            out.append(line)
        else:
            out.append(outside_code(line))
    return "\n".join(out)


def outside_code(line: str) -> str:
    pieces, start = [], 0
    for span in CODE_SPAN.finditer(line):
        pieces += [defused(line[start : span.start()]), span[0]]
        start = span.end()
    return "".join([*pieces, defused(line[start:])])


def defused(text: str) -> str:
    """Images become their escaped text, raw HTML text, and a link whose text names another
    host than its target its text followed by the target."""
    text = HTML_TAG.sub("&lt;", text.replace("![", "\\!["))
    return LINK.sub(relinked, text)


def relinked(found: re.Match[str]) -> str:
    label, target = found[1], found[2]
    if names_another_host(label, target):
        return f"{label} (<{target}>)"
    return found[0]


def names_another_host(text: str, url: str) -> bool:
    """Whether a link's text looks like an address on another host than the link's own."""
    shown = text.strip().strip("<>`*_")
    if not ADDRESS_LIKE.match(shown):
        return False
    named = shown if "://" in shown else f"http://{shown}"
    try:
        return host(named) != host(url)
    except ValueError:
        return True


def host(url: str) -> str:
    return (urlsplit(url).hostname or "").removeprefix("www.")
