"""Bytes of a page to text, trusting the bytes over what the page and server say.

Order: a byte-order mark; then bytes that are valid UTF-8 and not plain ASCII are UTF-8,
whatever the declarations say (servers default to ``charset=ISO-8859-1`` over UTF-8 content,
pages are re-saved as UTF-8 under their old ``<meta>``, proxies transcode: a stale label over
UTF-8 bytes is common, while legacy text that happens to be valid UTF-8 is vanishingly rare);
then the HTTP header's charset, then ``<meta charset>``, each read by WHATWG Encoding's label
table; then a detector (charset-normalizer, what trafilatura uses) on the first bytes.
"""

from __future__ import annotations

import codecs
import re
from dataclasses import dataclass
from typing import Literal

from charset_normalizer import from_bytes

CharsetSource = Literal["bom", "utf-8 bytes", "declared", "meta", "detected", "ascii"]

META_CHARSET = re.compile(rb"""<meta[^>]*?charset\s*=\s*["']?\s*([A-Za-z0-9_.:-]+)""", re.I)
# How far into a page to look for <meta charset>: past the long <head> of news sites.
META_SCAN_BYTES = 16_384
# How much of an undeclared legacy page the detector reads: enough text past the markup of
# a <head>, and bounded, since detection costs time on every byte.
DETECT_BYTES = 65_536

# A byte-order mark outranks any declared charset (WHATWG).
BOMS = (
    (codecs.BOM_UTF8, "utf-8-sig"),
    (codecs.BOM_UTF16_LE, "utf-16"),
    (codecs.BOM_UTF16_BE, "utf-16"),
)

# WHATWG's encodings, as Python codecs. A label Python resolves to anything else (utf-7,
# rot13, zlib...) is no charset a browser would use: it is ignored, as browsers ignore it.
WHATWG_CODECS = frozenset(
    {"utf-8", "utf-16-le", "utf-16-be", "cp866", "koi8-r", "koi8-u", "mac-roman", "cp874"}
    | {f"iso8859-{n}" for n in (2, 3, 4, 5, 6, 7, 8, 10, 13, 14, 15, 16)}
    | {f"cp125{n}" for n in range(9)}
    | {"mac-cyrillic", "gb18030", "big5hkscs", "euc_jp", "iso2022_jp", "cp932", "cp949"}
)
# Where WHATWG reads a label differently from Python: latin-1 and ASCII pages do use
# windows-1252's curly quotes and dashes (0x80-0x9f), GB2312 and GBK pages use GB18030's
# wider repertoire, Shift_JIS and EUC-KR pages the Microsoft extensions, and so on.
WHATWG_READING = {
    "iso8859-1": "cp1252",
    "ascii": "cp1252",
    "iso8859-9": "cp1254",
    "iso8859-11": "cp874",
    "tis-620": "cp874",
    "gb2312": "gb18030",
    "gbk": "gb18030",
    "big5": "big5hkscs",
    "shift_jis": "cp932",
    "euc_kr": "cp949",
    "utf-16": "utf-16-le",
}
# WHATWG labels Python does not know.
EXTRA_LABELS = {
    **{f"x-cp125{n}": f"cp125{n}" for n in range(9)},
    **dict.fromkeys(("windows-31j", "x-sjis", "csshiftjis"), "cp932"),
    **dict.fromkeys(("x-gbk", "gb_2312-80", "csgb2312", "iso-ir-58", "csiso58gb231280"), "gbk"),
    **dict.fromkeys(("x-x-big5", "cn-big5", "csbig5"), "big5"),
    **dict.fromkeys(("iso-8859-8-i", "csiso88598i", "logical"), "iso8859-8"),
    **dict.fromkeys(("unicode-1-1-utf-8", "unicode11utf8", "unicode20utf8"), "utf-8"),
    "x-unicode20utf8": "utf-8",
    "windows-874": "cp874",
    "windows-949": "cp949",
    "x-euc-jp": "euc_jp",
    "x-mac-cyrillic": "mac-cyrillic",
    "x-mac-ukrainian": "mac-cyrillic",
}


@dataclass(frozen=True)
class Decoded:
    text: str
    charset: str
    """The Python codec the text was decoded with, e.g. "utf-8", "cp1251", "gb18030"."""
    source: CharsetSource
    """Why: a byte-order mark, valid UTF-8 bytes, the HTTP header ("declared"), the page's
    <meta>, the detector, or bytes that are all ASCII and declared nothing."""


def decode_text(body: bytes, declared: str | None = None) -> Decoded:
    """A text body (no <meta> to read); undecodable bytes become U+FFFD, never an error."""
    return _decode(body, declared, None)


def decode_html(body: bytes, declared: str | None = None) -> Decoded:
    """Like decode_text, with the page's own <meta charset> after the declared charset."""
    found = META_CHARSET.search(body[:META_SCAN_BYTES])
    meta = found.group(1).decode("ascii") if found else None
    # A <meta> readable as ASCII cannot be in UTF-16: WHATWG reads such pages as UTF-8.
    if meta and (codec_for(meta) or "").startswith("utf-16"):
        meta = "utf-8"
    return _decode(body, declared, meta)


def codec_for(label: str | None) -> str | None:
    """The Python codec WHATWG Encoding reads a charset label as; None if it is no charset."""
    name = (label or "").strip().strip("\"'").strip().lower()
    try:
        codec = codecs.lookup(EXTRA_LABELS.get(name, name)).name
    except LookupError:
        return None
    codec = WHATWG_READING.get(codec, codec)
    return codec if codec in WHATWG_CODECS else None


def _decode(body: bytes, declared: str | None, meta: str | None) -> Decoded:
    for bom, codec in BOMS:
        if body.startswith(bom):
            return Decoded(body.decode(codec, errors="replace"), codec.removesuffix("-sig"), "bom")
    text = _utf8(body)
    if text is not None:
        return Decoded(text, "utf-8", "utf-8 bytes")
    labels: tuple[tuple[str | None, CharsetSource], ...] = ((declared, "declared"), (meta, "meta"))
    for label, source in labels:
        labelled = codec_for(label)
        # Text in UTF-16 has NUL bytes in its ASCII markup; without any, the label is wrong.
        if labelled and not (labelled.startswith("utf-16") and b"\0" not in body[:META_SCAN_BYTES]):
            return Decoded(body.decode(labelled, errors="replace"), labelled, source)
    if body.isascii():
        return Decoded(body.decode("ascii"), "ascii", "ascii")
    codec = _detected(body[:DETECT_BYTES])
    return Decoded(body.decode(codec, errors="replace"), codec, "detected")


def _utf8(body: bytes) -> str | None:
    """The text of bytes that are valid UTF-8 with some non-ASCII byte, else None. A character
    cut at the very end is allowed (and replaced): the fetcher caps bodies at a byte count."""
    if body.isascii():
        return None
    decoder = codecs.getincrementaldecoder("utf-8")()
    try:
        text = decoder.decode(body, final=False)
    except UnicodeDecodeError:
        return None
    return text + "\ufffd" if decoder.getstate()[0] else text


def _detected(head: bytes) -> str:
    # Valid UTF-8 was taken earlier, so a cut-off guess of UTF-8 means nothing better was
    # found: windows-1252 is WHATWG's default for such pages.
    best = from_bytes(head).best()
    codec = codec_for(best.encoding) if best is not None else None
    return codec if codec and codec != "utf-8" else "cp1252"
