"""The main text of an HTML page, in a form a model reads well.

trafilatura finds the article; we render the tree it returns as light markdown (``#``
headings, ``-`` list items, ``| a | b |`` table rows) without inline markup such as
``**bold**`` or ``<u>``, which tells a model little and costs tokens (trafilatura's own
markdown scores F1 0.958 on the English corpus below, its plain text 0.962, this 0.978
before the link-block rules). Link-dominated blocks (related stories, teasers, sidebars)
are dropped. app.pages.fallback (selectolax) takes over when trafilatura finds nothing or
only a flat dump (short pages, fragments, a page whose only text is its footer). Bytes are
decoded by app.pages.charset. The choices below were measured with bench/extraction.py on
../shared/corpus/extraction (English) and, for the link-block rules, also on the human and
reviewed splits of ../shared/corpus/extraction-multilingual; each says what it bought.
"""

from __future__ import annotations

import gzip
import re
import zlib
from collections import Counter
from collections.abc import Iterable
from copy import copy
from pathlib import Path

from lxml.etree import Element, ParserError, SubElement, _Element
from lxml.html import HtmlElement, document_fromstring
from selectolax.lexbor import LexborHTMLParser
from trafilatura import bare_extraction

# The full pass's comparison extractor, asked alone (see _may_miss_the_article).
from trafilatura.external import try_readability
from trafilatura.settings import Document
from trafilatura.utils import load_html

# The expressions trafilatura tries, in order, to find the article container. Not public API:
# trafilatura is pinned in pyproject.toml, and a move would fail this import loudly.
from trafilatura.xpaths import BODY_XPATH

from app.pages.charset import decode_html
from app.pages.extracted import Extracted
from app.pages.fallback import HEADING_LEVELS, SPACE, fallback_blocks

META_XPATH = "//meta[@property=$name or @name=$name]/@content"
WORD = re.compile(r"\w+")

# Link-dominated blocks (see _is_link_block): a paragraph or heading with at least this share
# of its characters in links, up to this many characters; a list with at least this share of
# its items over that share of links.
LINK_BLOCK_SHARE = 0.8
LINK_BLOCK_MAX_CHARS = 200
LINK_ITEM_SHARE = 0.5
LINK_LIST_ITEMS = 0.8
ELLIPSIS = ("...", "\u2026")

# A heading repeating the page title is dropped only if it is at least this many words, so a
# one-word heading ("News") is not taken for the start of "News | Site".
MIN_TITLE_PREFIX_WORDS = 3

# The containers trafilatura's article patterns look for.
CONTAINER_TAGS = ("article", "div", "main", "section")

# Elements of trafilatura's output tree that end a line when met inside running text.
BLOCK_TAGS = frozenset({"p", "head", "list", "item", "table", "row", "cell", "quote", "div"})

# Below this many characters trafilatura deems its extraction failed and dumps the page's
# text without structure (its MIN_EXTRACTED_SIZE).
SHORT_PAGE_CHARS = 250


def extract_html(
    html: str | bytes, url: str | None = None, declared: str | None = None
) -> Extracted:
    """Title and main text of a page. Bytes are decoded by app.pages.charset's rules, ``declared``
    being the HTTP header's charset."""
    decoded = decode_html(html, declared) if isinstance(html, bytes) else None
    text = decoded.text if decoded else str(html)
    tree = load_html(text)  # None if not a whole page, e.g. a bare "<p>...</p>" fragment
    blocks = _article_blocks(tree, url) if tree is not None else []
    if sum(len(block) for block in blocks) < SHORT_PAGE_CHARS:
        # trafilatura found no article and fell back to a flat dump of the page, or found
        # nothing: read the page ourselves, its structure kept, without menus and footers
        # unless that leaves nothing (a contact page whose only text is its footer).
        page = LexborHTMLParser(text)
        blocks = fallback_blocks(page, chrome=False) or blocks or fallback_blocks(page, chrome=True)
    head = tree if tree is not None else _fragment_tree(text)
    return Extracted(
        title=_title(head),
        text="\n\n".join(_drop_repeated_heading(blocks, head)),
        charset=decoded.charset if decoded else None,
        charset_source=decoded.source if decoded else None,
    )


def _fragment_tree(text: str) -> HtmlElement | None:
    try:
        return document_fromstring(text)
    except (ParserError, ValueError):  # nothing to parse, or an XML declaration in a str
        return None


def extract_file(path: Path) -> Extracted:
    """A saved page, ``.html`` or ``.html.gz``."""
    data = path.read_bytes()
    if path.suffix == ".gz":
        try:
            data = gzip.decompress(data)
        except (OSError, EOFError, zlib.error) as exc:
            raise ValueError(f"not a readable gzip file ({exc})") from None
    return extract_html(data)


# -- trafilatura ------------------------------------------------------------------------------


def _article_blocks(tree: HtmlElement, url: str | None) -> list[str]:
    _merge_split_bodies(tree)
    body = _trafilatura_body(tree, url, fast=True)
    if body is None or _may_miss_the_article(body, tree):
        body = _trafilatura_body(tree, url, fast=False)
    if body is None:
        return []
    # trafilatura returns a <body> of blocks, or a single element when it fell back to a
    # raw part of the page.
    return [block for block in (_blocks(body) if body.tag == "body" else _block(body, 0)) if block]


def _trafilatura_body(tree: HtmlElement, url: str | None, fast: bool) -> _Element | None:
    # Links are kept in the tree only to spot link lists (related stories, menus); they are
    # not printed. With them trafilatura also keeps more of the article: F1 +0.006 in all.
    # Comments are not the page's content. Tables stay on (0.009); favor_precision cost
    # 0.020 and favor_recall 0.002. bare_extraction works on a copy of the tree.
    document = bare_extraction(
        tree, url=url, include_comments=False, include_links=True, output_format="xml", fast=fast
    )
    # A dict only for as_dict=True.
    return document.body if isinstance(document, Document) else None


def _may_miss_the_article(body: _Element, tree: HtmlElement) -> bool:
    """Whether trafilatura's fast pass (without its readability and justext comparison)
    may have missed the article, so that the full pass is worth its cost.

    The full pass prefers readability's text when it is over twice as long as its own or
    its own has no paragraph, and justext's on short text. Readability reads paragraphs,
    so a fast result holding half the page's <p> text cannot lose to it; below that,
    readability itself is asked (a fifth of the full pass's cost), on the page before
    trafilatura's pruning. On the three corpora (135 pages) the two passes differ on 6:
    3 are rerun; on the other 3 this count finds readability under twice the fast text,
    and the fast text scored better on 2 of them (F1 on human ground truth +0.007, same
    elsewhere). 1 more short page is rerun; the rest skip readability and justext.
    """
    text = _chars(body.itertext())
    if text < SHORT_PAGE_CHARS or body.find(".//p") is None:
        return True
    if 2 * text >= _chars(run for p in tree.iter("p") for run in p.itertext()):
        return False
    return _chars(try_readability(copy(tree)).itertext()) > 2 * text


def _chars(texts: Iterable[str]) -> int:
    """Characters other than white space."""
    return sum(len("".join(text.split())) for text in texts)


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
    if not _twins_may_match(tree):
        return
    found = [element for element in BODY_XPATH[0](tree) if element is not None]
    if not found:
        return
    first = found[0]
    for other in list(tree.iter(first.tag)):
        if other is not first and _same_kind(first, other) and not _nested(first, other):
            first.extend(list(other))


def _twins_may_match(tree: HtmlElement) -> bool:
    """Whether some container with a same-kind twin matches the article pattern: only then
    can there be anything to join. The pattern reads only the tag, class, id and itemprop,
    so one element per kind is tried, alone; the pattern's regular expressions run in
    Python: on the whole tree they cost twice this, 4 % of all extraction time."""
    kinds = Counter(_kind(element) for element in tree.iter(*CONTAINER_TAGS))
    variants = {
        (*_kind(element), element.get("itemprop"))
        for element in tree.iter(*CONTAINER_TAGS)
        if kinds[_kind(element)] > 1
    }
    for tag, class_, id_, itemprop in variants:
        probe = Element("div")
        attributes = {"class": class_, "id": id_, "itemprop": itemprop}
        SubElement(probe, tag, {name: v for name, v in attributes.items() if v is not None})
        if BODY_XPATH[0](probe):
            return True
    return False


def _kind(element: _Element) -> tuple[str, str | None, str | None]:
    return element.tag, element.get("class"), element.get("id")


def _same_kind(a: _Element, b: _Element) -> bool:
    return _kind(a) == _kind(b)


def _nested(a: _Element, b: _Element) -> bool:
    return any(x is a for x in b.iterancestors()) or any(x is b for x in a.iterancestors())


def _blocks(container: _Element) -> list[str]:
    """The rendered blocks of a container, text between its children kept as paragraphs,
    without link-dominated blocks and the cut teasers that follow them."""
    out = [_clean(container.text)]
    after_links = False
    for child in container:
        dropped = _is_link_block(child) or (after_links and _is_cut(child))
        if not dropped:
            out.extend(_block(child, 0))
        after_links = dropped
        out.append(_clean(child.tail))
    return [block for block in out if block]


def _is_link_block(element: _Element) -> bool:
    """Related stories, teasers and sidebars rather than the article: a short paragraph or
    heading that is mostly link text, a list of mostly link items, or a teaser (a headline
    link, then a summary cut short). Links inside prose leave their paragraph well below
    the share, so their words stay. F1 against keeping them, on English / human / reviewed:
    link paragraphs and headings +0.002 / +0.018 / +0.002; without the length cap they cost
    0.004 on English (a deals page links whole paragraphs); sparing a lone link line between
    two prose paragraphs ("Lire aussi : ...") cost 0.001 / 0.004 / 0.002. Teasers 0 /
    +0.005 / 0. Lists: see _is_link_list.
    """
    tag = element.tag
    if tag == "list":
        return _is_link_list(element)
    if tag not in ("p", "head", "quote") or element.find(".//ref") is None:
        return False
    if _link_share(element) >= LINK_BLOCK_SHARE:
        return _chars(element.itertext()) <= LINK_BLOCK_MAX_CHARS
    opens_with_link = not (element.text or "").strip() and element[0].tag == "ref"
    return tag == "p" and opens_with_link and _is_cut(element)


def _is_cut(element: _Element) -> bool:
    """A paragraph ending in an ellipsis: after a link block, a teaser's cut summary
    (dropping those: English 0, human +0.002, reviewed +0.001)."""
    return element.tag == "p" and "".join(element.itertext()).rstrip().endswith(ELLIPSIS)


def _is_link_list(element: _Element) -> bool:
    """Lists of mostly link items: related stories, menus, most-read boxes with a view count
    or a date beside each link. Dropping lists whose every item is nothing but links and
    headings gained 0.004 of F1 on English; counting mostly-link items too, and lists with
    80 % of them, gained a further 0.027 on human ground truth (0 on the others). A curated
    list of tools, each with prose of its own beside its link, stays."""
    items = element.findall("item")
    return not items or sum(map(_is_link_item, items)) >= LINK_LIST_ITEMS * len(items)


def _is_link_item(item: _Element) -> bool:
    """Mostly link text, or nothing but links and (teaser) headings."""
    if item.find(".//ref") is None:
        return False
    return _link_share(item) >= LINK_ITEM_SHARE or not _has_loose_words(item, inside_link=False)


def _has_loose_words(element: _Element, inside_link: bool) -> bool:
    """Whether some word of the element stands outside its links and headings."""
    inside = inside_link or element.tag in ("ref", "head")
    if not inside and WORD.search(element.text or ""):
        return True
    for child in element:
        if _has_loose_words(child, inside) or (not inside and WORD.search(child.tail or "")):
            return True
    return False


def _link_share(element: _Element) -> float:
    """The share of the element's characters (white space aside) inside links."""
    total = _chars(element.itertext())
    linked = _chars(text for ref in element.iter("ref") for text in ref.itertext())
    return linked / total if total else 0.0


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
    if _is_link_list(element):
        return []
    items = element.findall("item")
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


# -- title and repeated headings -----------------------------------------------------------------


def _meta(tree: HtmlElement | None, *names: str) -> str:
    for name in names:
        found = tree.xpath(META_XPATH, name=name) if tree is not None else []
        content = found[0] if found else ""
        if content.strip():
            return SPACE.sub(" ", content).strip()
    return ""


def _first_text(tree: HtmlElement | None, tag: str) -> str:
    node = tree.find(f".//{tag}") if tree is not None else None
    return SPACE.sub(" ", node.text_content()).strip() if node is not None else ""


def _title(tree: HtmlElement | None) -> str:
    """The page's own name for itself: og:title is free of the " | Site" suffix <title> has."""
    return (
        _meta(tree, "og:title", "twitter:title")
        or _first_text(tree, "title")
        or _first_text(tree, "h1")
    )


def _words(text: str) -> str:
    return " ".join(WORD.findall(text.lower()))


def _drop_repeated_heading(blocks: list[str], tree: HtmlElement | None) -> list[str]:
    """Drop the article's opening title and standfirst headings, which repeat the page's
    title and description: the model is shown the title anyway, just above the text.

    Measured: F1 +0.007 on English and +0.002 on reviewed ground truth, whose references
    leave the headline out; -0.001 on human ground truth, whose references include it.
    """
    if blocks and _repeats_title(blocks[0], tree):
        blocks = blocks[1:]
    description = _words(_meta(tree, "og:description", "description", "twitter:description"))
    if blocks and blocks[0].startswith("#") and description and _words(blocks[0]) == description:
        blocks = blocks[1:]
    return blocks


def _repeats_title(block: str, tree: HtmlElement | None) -> bool:
    words = _words(block)
    html_title = _words(_first_text(tree, "title"))
    if not words:
        return False
    if words in (_words(_meta(tree, "og:title", "twitter:title")), html_title):
        return True
    # "# Article name" under "<title>Article name | Site</title>"
    return (
        block.startswith("#")
        and len(words.split()) >= MIN_TITLE_PREFIX_WORDS
        and f"{html_title} ".startswith(f"{words} ")
    )
