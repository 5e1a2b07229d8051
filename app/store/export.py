"""A conversation as Markdown: readable anywhere, sources as links.

The text comes from the model, so from the pages it read: whatever a Markdown viewer would
do on its own is taken out. An image would be loaded as soon as the file is opened (an
address can carry the conversation out), so every image becomes a plain link, and raw HTML
text; a link whose text names another host than its target shows the target. The model's
Markdown is parsed as a CommonMark viewer parses it (markdown-it-py, with GFM's tables),
changed as a tree, and written back by mdformat, which escapes whatever a viewer would
otherwise read as syntax: no string replacement to fall out of step with a parser."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any
from urllib.parse import urlsplit

import mdformat.plugins
from markdown_it import MarkdownIt
from markdown_it.token import Token
from mdformat.renderer import MDRenderer

from app.hostnames import normalised_host, visible
from app.store.rows import Conversation

ADDRESS_LIKE = re.compile(
    r"^(?:[a-z][a-z0-9+.-]*://)?(?:www\.)?[^\s/:@]+\.(?:[^\W\d_]{2,}|xn--[a-z0-9-]+)\.?"
    r"(?::\d+)?(?:[/?#]\S*)?$",
    re.I,
)
MARKDOWN_PUNCTUATION = re.compile(r"([\\`*_\[\]()<>!#|~])")
# From the first of a run of backslashes only: tried from each, a long run costs its square.
UNESCAPED_LESS_THAN = re.compile(r"(?<!\\)(\\*)<(?! )")
MAX_RENDERED_CHARS = 65_536
"""A longer message is exported as a code block, shown as it was written: parsing and
writing back cost about 0.1 ms an inline element, and a message may have 4 MiB."""
MAX_INLINE_ELEMENTS = 1_000
"""A paragraph, heading or table cell of more inline elements is exported as its text:
mdformat finds an element's next sibling by searching them all, a cost that grows with
their square."""


def every_less_than_escaped(text: str, node: object, context: object) -> str:
    """mdformat's text as it writes it, with the "<" its escape misses written as "\\<"
    too: its pattern consumes the character after each "<", so in "<<img ...>" (a "<"
    then an escaped one, in the source) the second "<" starts raw HTML. A "<" is escaped
    when an odd number of backslashes stands before it; one followed by a space starts
    nothing."""
    return UNESCAPED_LESS_THAN.sub(
        lambda found: found[0] if len(found[1]) % 2 else f"{found[1]}\\<", text
    )


class LessThanEscapes:
    """An mdformat extension of ours: its postprocessor of text."""

    RENDERERS: Mapping[str, object] = {}
    POSTPROCESSORS = {"text": every_less_than_escaped}


# The tables plugin is mdformat-gfm's, found by its entry point's name.
PARSER = MarkdownIt(
    "commonmark",
    {
        "parser_extension": [mdformat.plugins.PARSER_EXTENSIONS["tables"], LessThanEscapes],
        "mdformat": {"number": True},  # 1. 2. 3., as the model wrote them
    },
).enable("table")
WRITER = MDRenderer()


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


def markdown_all(conversations: list[Conversation]) -> str:
    """Several conversations as one Markdown file, each after a rule: what `python -m app
    export --all` prints and what "Export my conversations" downloads."""
    return "\n---\n\n".join(markdown(c) for c in conversations)


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
            how = ", without tool calling" if step.get("without_tools") else ""
            lines.append(f"- searched: {query} ({language}{how})")
        elif step.get("type") == "fetch":
            page = link(step.get("title") or "", step.get("url", ""))
            error = step.get("error")
            lines.append(f"- not read: {page} ({plain(error)})" if error else f"- read: {page}")
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
    """Markdown written by the model, without what a viewer would act on by itself: parsed,
    its images made links, its raw HTML text, its misleading links their target; code
    (fenced blocks, inline spans) is left as it is, since a viewer shows it as text."""
    env: dict[str, Any] = {}
    if len(text) > MAX_RENDERED_CHARS:
        code = Token("fence", "code", 0, content=text + "\n", markup="```", block=True)
        return WRITER.render([code], PARSER.options, env).rstrip("\n")
    tokens = defused(PARSER.parse(text, env))
    return WRITER.render(tokens, PARSER.options, env).rstrip("\n")


def defused(tokens: list[Token]) -> list[Token]:
    """Blocks of raw HTML become code blocks (shown as they are), and each paragraph's,
    heading's or table cell's inline content is defused (or, past MAX_INLINE_ELEMENTS, its
    source shown as text)."""
    out = []
    for token in tokens:
        if token.type == "html_block":
            token = Token("fence", "code", 0, content=token.content, markup="```", block=True)
        elif token.children is not None:
            many = len(token.children) > MAX_INLINE_ELEMENTS
            token.children = relinked(
                inline_defused([text_token(token.content)] if many else token.children)
            )
        out.append(token)
    return out


def inline_defused(children: list[Token]) -> list[Token]:
    """Images become links to their address (inside a link, which cannot hold another,
    their text), raw HTML text."""
    out: list[Token] = []
    depth = 0
    for token in children:
        depth += token.nesting if token.type in ("link_open", "link_close") else 0
        if token.type == "image":
            shown = inline_defused(token.children or [])
            src = str(token.attrs.get("src", ""))
            out += shown if depth else linked(src, shown or [text_token(src)])
        elif token.type == "html_inline":
            out.append(text_token(token.content))
        else:
            out.append(token)
    return out


def relinked(children: list[Token]) -> list[Token]:
    """A link whose text names another host than its target shows its target instead."""
    out: list[Token] = []
    opened = -1
    for token in children:
        out.append(token)
        if token.type == "link_open":
            opened = len(out) - 1
        elif token.type == "link_close" and opened >= 0:
            label = "".join(t.content for t in out[opened + 1 : -1] if t.type != "softbreak")
            target = str(out[opened].attrs.get("href", ""))
            if names_another_host(label, target):
                out[opened + 1 : -1] = [text_token(target)]
            opened = -1
    return out


def linked(target: str, shown: list[Token]) -> list[Token]:
    opening = Token("link_open", "a", 1, attrs={"href": target})
    return [opening, *shown, Token("link_close", "a", -1)]


def text_token(content: str) -> Token:
    return Token("text", "", 0, content=content)


def names_another_host(text: str, url: str) -> bool:
    """Whether a link's text looks like an address on another host than the link's own;
    both hosts compared as DNS takes them (app.hostnames), as the page's renderer does."""
    shown = visible(text).strip().strip("<>`*_")
    if not ADDRESS_LIKE.match(shown):
        return False
    named = shown if "://" in shown else f"http://{shown}"
    try:
        return host(named) != host(url)
    except ValueError:
        return True


def host(url: str) -> str:
    return normalised_host(urlsplit(url).hostname or "").removeprefix("www.")
