"""The main text of an HTML page, in a form a model reads well.

trafilatura finds the article; we render the tree it returns as light markdown (``#``
headings, ``-`` list items, ``| a | b |`` table rows) without inline markup such as
``**bold**`` or ``<u>``, which tells a model little and costs tokens (trafilatura's own
markdown scores F1 0.958 on the corpus below, its plain text 0.962, this 0.978). selectolax
reads the title and takes over when trafilatura finds nothing or only a flat dump (short
pages, fragments, a page whose only text is its footer). The choices below were measured on
../shared/corpus/extraction with bench/extraction.py; each says what it bought there.
"""

from __future__ import annotations

import codecs
import gzip
import re
import zlib
from dataclasses import dataclass
from pathlib import Path

from lxml.etree import _Element
from lxml.html import HtmlElement
from selectolax.lexbor import LexborHTMLParser, LexborNode
from trafilatura import bare_extraction
from trafilatura.utils import load_html

# The expressions trafilatura tries, in order, to find the article container. Not public API:
# trafilatura is pinned in pyproject.toml, and a move would fail this import loudly.
from trafilatura.xpaths import BODY_XPATH

SPACE = re.compile(r"\s+")
WORD = re.compile(r"\w+")
META_CHARSET = re.compile(rb"""<meta[^>]*?charset\s*=\s*["']?\s*([A-Za-z0-9_.:-]+)""", re.I)
# How far into a page to look for <meta charset>: past the long <head> of news sites.
META_SCAN_BYTES = 16_384
# WHATWG Encoding: in HTML these labels mean windows-1252, and pages that say latin-1 do
# use its curly quotes and dashes (0x80-0x9f), which latin-1 would turn into control codes.
WINDOWS_1252_LABELS = frozenset(
    {"iso-8859-1", "iso8859-1", "latin1", "latin-1", "us-ascii", "ascii"}
)
# A byte-order mark outranks any declared charset (WHATWG); "utf-16" reads either order.
BOMS = (
    (codecs.BOM_UTF8, "utf-8-sig"),
    (codecs.BOM_UTF16_LE, "utf-16"),
    (codecs.BOM_UTF16_BE, "utf-16"),
)

# A heading repeating the page title is dropped only if it is at least this many words, so a
# one-word heading ("News") is not taken for the start of "News | Site".
MIN_TITLE_PREFIX_WORDS = 3

HEADING_LEVELS = {f"h{n}": n for n in range(1, 7)}
# Elements of trafilatura's output tree that end a line when met inside running text.
BLOCK_TAGS = frozenset({"p", "head", "list", "item", "table", "row", "cell", "quote", "div"})

# Below this many characters trafilatura deems its extraction failed and dumps the page's
# text without structure (its MIN_EXTRACTED_SIZE).
SHORT_PAGE_CHARS = 250

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


@dataclass(frozen=True)
class Extracted:
    title: str
    text: str

    def as_dict(self) -> dict[str, str | int]:
        """The shape `extract --json` prints (and score_extraction.py reads)."""
        return {"title": self.title, "text": self.text, "chars": len(self.text)}


def extract_html(html: str | bytes, url: str | None = None) -> Extracted:
    """Title and main text of a page; bytes are decoded by their <meta charset> or as UTF-8."""
    text = decode_html(html) if isinstance(html, bytes) else html
    page = LexborHTMLParser(text)
    blocks = _article_blocks(text, url)
    if sum(len(block) for block in blocks) < SHORT_PAGE_CHARS:
        # trafilatura found no article and fell back to a flat dump of the page, or found
        # nothing: read the page ourselves, its structure kept, without menus and footers
        # unless that leaves nothing (a contact page whose only text is its footer).
        blocks = (
            _fallback_blocks(page, chrome=False) or blocks or _fallback_blocks(page, chrome=True)
        )
    return Extracted(title=_title(page), text="\n\n".join(_drop_repeated_heading(blocks, page)))


def extract_file(path: Path) -> Extracted:
    """A saved page, ``.html`` or ``.html.gz``."""
    data = path.read_bytes()
    if path.suffix == ".gz":
        try:
            data = gzip.decompress(data)
        except (OSError, EOFError, zlib.error) as exc:
            raise ValueError(f"not a readable gzip file ({exc})") from None
    return extract_html(data)


# -- decoding ---------------------------------------------------------------------------------


def decode_text(body: bytes, declared: str | None = None) -> str:
    """Text by its byte-order mark, else the charset the server declared, else UTF-8;
    undecodable bytes become U+FFFD rather than an error."""
    return _decode(body, declared, None)


def decode_html(body: bytes, declared: str | None = None) -> str:
    """Like decode_text, with the page's own <meta charset> after the declared charset."""
    found = META_CHARSET.search(body[:META_SCAN_BYTES])
    meta = found.group(1).decode("ascii") if found else None
    # A <meta> readable as ASCII cannot be in UTF-16: WHATWG reads such pages as UTF-8.
    if meta and (_codec(meta) or "").startswith("utf-16"):
        meta = "utf-8"
    return _decode(body, declared, meta)


def _decode(body: bytes, declared: str | None, meta: str | None) -> str:
    for bom, codec in BOMS:
        if body.startswith(bom):
            return body.decode(codec, errors="replace")
    for label in (declared, meta):
        codec = _codec(label)
        if codec:
            return body.decode(codec, errors="replace")
    return body.decode("utf-8", errors="replace")


def _codec(label: str | None) -> str | None:
    if not label:
        return None
    name = label.strip().strip("\"'").lower()
    if name in WINDOWS_1252_LABELS:
        name = "cp1252"
    try:
        return codecs.lookup(name).name
    except LookupError:
        return None


# -- trafilatura ------------------------------------------------------------------------------


def _article_blocks(html: str, url: str | None) -> list[str]:
    tree = load_html(html)
    if tree is None:  # not HTML by trafilatura's test, e.g. a bare "<p>...</p>" fragment
        return []
    _merge_split_bodies(tree)
    # Links are kept in the tree only to spot link lists (related stories, menus); they are
    # not printed. With them trafilatura also keeps more of the article: F1 +0.006 in all.
    # Comments are not the page's content. trafilatura's own fallbacks stay on (fast=True
    # cost 0.016 of F1), and so do tables (0.009); favor_precision cost 0.020 and
    # favor_recall 0.002.
    document = bare_extraction(
        tree, url=url, include_comments=False, include_links=True, output_format="xml"
    )
    if document is None or document.body is None:
        return []
    body = document.body
    # trafilatura returns a <body> of blocks, or a single element when it fell back to a
    # raw part of the page.
    return [block for block in (_blocks(body) if body.tag == "body" else _block(body, 0)) if block]


def _merge_split_bodies(tree: HtmlElement) -> None:
    """Join an article body cut into several same-class containers around ads.

    trafilatura reads the first container that matches its article patterns; on sites that
    repeat it (one container per run of paragraphs between ads) the rest of the article is
    lost. Only containers named as the article body (trafilatura's first, most specific
    pattern: articleBody, article__body, post-content...) are joined: repeated containers
    with generic names ("text", "main") are as often comments or teasers. On the corpus
    this took one page from recall 0.45 to 0.98 (F1 +0.004) and changed no other; joining
    generic names too cost 0.012.
    """
    found = [element for element in BODY_XPATH[0](tree) if element is not None]
    if not found:
        return
    first = found[0]
    for other in list(tree.iter(first.tag)):
        if other is not first and _same_kind(first, other) and not _nested(first, other):
            first.extend(list(other))


def _same_kind(a: _Element, b: _Element) -> bool:
    return a.tag == b.tag and a.get("class") == b.get("class") and a.get("id") == b.get("id")


def _nested(a: _Element, b: _Element) -> bool:
    return any(x is a for x in b.iterancestors()) or any(x is b for x in a.iterancestors())


def _blocks(container: _Element) -> list[str]:
    """The rendered blocks of a container, text between its children kept as paragraphs."""
    out = [_clean(container.text)]
    for child in container:
        out.extend(_block(child, 0))
        out.append(_clean(child.tail))
    return [block for block in out if block]


def _block(element: _Element, depth: int) -> list[str]:
    tag = element.tag
    if tag == "head":
        level = HEADING_LEVELS.get(element.get("rend") or "", 2)
        return [f"{'#' * level} {_line(element)}"]
    if tag == "list":
        return ["\n".join(_list_lines(element, depth))]
    if tag == "table":
        return ["\n".join(_table_rows(element))]
    if tag == "quote" and any(child.tag in BLOCK_TAGS for child in element):
        return ["\n".join(f"> {line}" for block in _blocks(element) for line in block.split("\n"))]
    if tag == "quote":
        return ["\n".join(f"> {line}" for line in _text(element).split("\n"))]
    if tag == "code":
        code = "".join(element.itertext()).strip("\n")
        return [f"```\n{code}\n```"] if code.strip() else []
    return [_text(element)]


def _list_lines(element: _Element, depth: int) -> list[str]:
    # Lists whose items are nothing but links (and teaser headings) are related stories and
    # menus: dropping them gained 0.007 of precision (F1 +0.004). An item with prose of its
    # own beside its link, as in a curated list of tools, keeps the list.
    items = element.findall("item")
    if not items or all(_is_link_item(item) for item in items):
        return []
    ordered = element.get("rend") == "ol"
    lines = []
    for number, item in enumerate(items, 1):
        marker = f"{number}." if ordered else "-"
        line = _line(item, skip_lists=True)
        if line:
            lines.append(f"{'  ' * depth}{marker} {line}")
        for nested in item.findall("list"):
            lines.extend(_list_lines(nested, depth + 1))
    return lines


def _is_link_item(item: _Element) -> bool:
    return item.find(".//ref") is not None and not _has_loose_words(item, inside_link=False)


def _has_loose_words(element: _Element, inside_link: bool) -> bool:
    """Whether some word of the element stands outside its links and headings."""
    inside = inside_link or element.tag in ("ref", "head")
    if not inside and WORD.search(element.text or ""):
        return True
    for child in element:
        if _has_loose_words(child, inside) or (not inside and WORD.search(child.tail or "")):
            return True
    return False


def _table_rows(element: _Element) -> list[str]:
    rows = [
        [_line(cell).replace("|", "\\|") for cell in row.findall("cell")]
        for row in element.findall("row")
    ]
    rows = [cells for cells in rows if any(cells)]
    if not rows:
        return []
    lines = [f"| {' | '.join(cells)} |" for cells in rows]
    # A markdown table needs the line under its first row.
    return [lines[0], "|" + "---|" * len(rows[0]), *lines[1:]]


def _inline(element: _Element, skip_lists: bool = False) -> str:
    """The element's text with line breaks kept, its blocks separated by spaces."""
    parts = [element.text or ""]
    for child in element:
        if child.tag == "lb":
            parts.append("\n")
        elif not (skip_lists and child.tag == "list"):
            gap = " " if child.tag in BLOCK_TAGS else ""
            parts.append(f"{gap}{_inline(child, skip_lists)}{gap}")
        parts.append(child.tail or "")
    return "".join(parts)


def _text(element: _Element) -> str:
    return _clean(_inline(element))


def _line(element: _Element, skip_lists: bool = False) -> str:
    return SPACE.sub(" ", _inline(element, skip_lists)).strip()


def _clean(text: str | None) -> str:
    lines = (SPACE.sub(" ", line).strip() for line in (text or "").split("\n"))
    return "\n".join(line for line in lines if line)


# -- selectolax: title, repeated headings, fallback --------------------------------------------


def _meta(page: LexborHTMLParser, *names: str) -> str:
    for name in names:
        node = page.css_first(f'meta[property="{name}"], meta[name="{name}"]')
        content = (node.attributes.get("content") or "") if node is not None else ""
        if content.strip():
            return SPACE.sub(" ", content).strip()
    return ""


def _html_title(page: LexborHTMLParser) -> str:
    node = page.css_first("title")
    return SPACE.sub(" ", node.text()).strip() if node is not None else ""


def _title(page: LexborHTMLParser) -> str:
    """The page's own name for itself: og:title is free of the " | Site" suffix <title> has."""
    heading = page.css_first("h1")
    return (
        _meta(page, "og:title", "twitter:title")
        or _html_title(page)
        or (SPACE.sub(" ", heading.text()).strip() if heading is not None else "")
    )


def _words(text: str) -> str:
    return " ".join(WORD.findall(text.lower()))


def _drop_repeated_heading(blocks: list[str], page: LexborHTMLParser) -> list[str]:
    """Drop the article's opening title and standfirst headings, which repeat the page's
    title and description: the model is shown the title anyway (F1 +0.007)."""
    if blocks and _repeats_title(blocks[0], page):
        blocks = blocks[1:]
    description = _words(_meta(page, "og:description", "description", "twitter:description"))
    if blocks and blocks[0].startswith("#") and description and _words(blocks[0]) == description:
        blocks = blocks[1:]
    return blocks


def _repeats_title(block: str, page: LexborHTMLParser) -> bool:
    words = _words(block)
    html_title = _words(_html_title(page))
    if not words:
        return False
    if words in (_words(_meta(page, "og:title", "twitter:title")), html_title):
        return True
    # "# Article name" under "<title>Article name | Site</title>"
    return (
        block.startswith("#")
        and len(words.split()) >= MIN_TITLE_PREFIX_WORDS
        and f"{html_title} ".startswith(f"{words} ")
    )


def _fallback_blocks(page: LexborHTMLParser, chrome: bool) -> list[str]:
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
