"""The page read without trafilatura, by selectolax: for the pages where trafilatura finds
no article or only a flat dump (short pages, fragments, a page whose only text is its
footer). Its structure is kept as app.pages.extract renders it: "#" headings, "-" items,
"| a | b |" table rows.
"""

from __future__ import annotations

import re

from selectolax.lexbor import LexborHTMLParser, LexborNode

SPACE = re.compile(r"\s+")
HEADING_LEVELS = {f"h{n}": n for n in range(1, 7)}

# selectolax fallback: what a reader never sees, the page's chrome, and what starts a line.
INVISIBLE_TAGS = frozenset(
    {"head", "script", "style", "noscript", "template", "svg", "iframe", "object", "canvas"}
    | {"button", "select", "input", "textarea"}
)
CHROME_TAGS = frozenset({"nav", "header", "footer", "aside", "form"})
FALLBACK_BLOCKS = frozenset(
    {"html", "body", "main", "article", "section", "header", "footer", "aside", "nav", "div"}
    | {"p", "ul", "ol", "dl", "dt", "dd", "table", "tr", "blockquote", "pre", "figure"}
    | {"figcaption", "form", "address", "details", "summary", "li"}
    | {"h1", "h2", "h3", "h4", "h5", "h6"}
)


def fallback_blocks(page: LexborHTMLParser, chrome: bool) -> list[str]:
    """The visible text of the page, one block per paragraph, heading, item or table row;
    with ``chrome``, menus, headers, footers, asides and forms too.

    Walks the tree with an explicit stack: pages nest thousands of levels deep at times.
    """
    root = page.body or page.root
    if root is None:
        return []
    blocks: list[str] = []
    run: list[str] = []
    open_blocks: list[tuple[str, str]] = [("", "")]  # (prefix, suffix) of each open block

    def end_run() -> None:
        text = SPACE.sub(" ", "".join(run)).strip()
        run.clear()
        if text:
            prefix, suffix = open_blocks[-1]
            blocks.append(f"{prefix}{text}{suffix}")

    stack: list[tuple[LexborNode, bool]] = [(root, False)]
    while stack:
        node, closing = stack.pop()
        tag = node.tag
        if closing:
            end_run()
            open_blocks.pop()
            continue
        if tag == "-text":
            run.append(node.text_content or "")
            continue
        if tag in INVISIBLE_TAGS or (not chrome and tag in CHROME_TAGS):
            continue
        if tag == "br":
            end_run()
            continue
        if tag in ("td", "th"):
            run.append(" | ")
        if tag in FALLBACK_BLOCKS:
            end_run()
            open_blocks.append(_fallback_marks(tag))
            stack.append((node, True))
        stack.extend((child, False) for child in reversed(list(node.iter(include_text=True))))
    end_run()
    return _join_runs(blocks)


def _join_runs(blocks: list[str]) -> list[str]:
    """Keep consecutive list items, and table rows, together as one block."""
    joined: list[str] = []
    for block in blocks:
        if joined and block[:2] in ("- ", "| ") and joined[-1].split("\n")[-1][:2] == block[:2]:
            joined[-1] += "\n" + block
        else:
            joined.append(block)
    return joined


def _fallback_marks(tag: str) -> tuple[str, str]:
    """The (prefix, suffix) of a block's line: "# " for headings, "- " for items, and so on."""
    if tag in HEADING_LEVELS:
        return "#" * HEADING_LEVELS[tag] + " ", ""
    if tag == "li":
        return "- ", ""
    if tag == "tr":
        return "", " |"
    return "", ""
