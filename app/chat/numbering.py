"""An answer's sources numbered as it cites them: 1 is the first source it cites, 2 the
next new one, and so on; the sources it does not cite follow, in their order.

The model is given the turn's sources numbered as they came (search results, pages read),
so a page read late may be [21]. The user reads the answer's numbers and asks about them
("what did [2] say?"), so the stored answer, its digest and the export use the numbers the
answer shows. A `[n]` in code (an inline span, a fenced block) is code, not a citation."""

from __future__ import annotations

import re
from collections.abc import Iterator

# Code as most answers write it: a fence's opening line, an inline span. (A number misread
# here only renumbers a citation, unlike the export's images: app/store/export.py parses.)
FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")
CODE_SPAN = re.compile(r"(`+).+?\1")
CITATION = re.compile(r"\[(\d{1,3}(?:[ \t]*,[ \t]*\d{1,3})*)\]")
"""A citation as the page reads it: one number or a list, `[3]`, `[3, 21]`."""


def cited_order(text: str, count: int) -> list[int]:
    """The numbers 1..count in their new order: those the text cites, first citation
    first, then the others in their order."""
    cited: list[int] = []
    for piece, code in pieces(text):
        if code:
            continue
        for found in CITATION.finditer(piece):
            for number in numbers(found[1]):
                if 1 <= number <= count and number not in cited:
                    cited.append(number)
    return cited + [n for n in range(1, count + 1) if n not in cited]


def renumbered(text: str, mapping: dict[int, int]) -> str:
    """The text with each citation's numbers replaced by their new ones (a number without
    a source stays as it is); code is left untouched."""

    def citation(found: re.Match[str]) -> str:
        return "[" + ", ".join(str(mapping.get(n, n)) for n in numbers(found[1])) + "]"

    return "".join(piece if code else CITATION.sub(citation, piece) for piece, code in pieces(text))


def numbers(listed: str) -> Iterator[int]:
    return (int(part) for part in listed.split(","))


def pieces(text: str) -> Iterator[tuple[str, bool]]:
    """The text in order as (piece, whether it is code): fenced blocks and inline code
    spans are code, as Markdown shows them."""
    fence = ""
    for line in text.splitlines(keepends=True):
        marker = FENCE.match(line)
        if fence:
            if marker and marker[1][0] == fence[0] and len(marker[1]) >= len(fence):
                fence = ""
            yield line, True
        elif marker:
            fence = marker[1]
            yield line, True
        else:
            yield from spans(line)


def spans(line: str) -> Iterator[tuple[str, bool]]:
    start = 0
    for span in CODE_SPAN.finditer(line):
        yield line[start : span.start()], False
        yield span[0], True
        start = span.end()
    yield line[start:], False
