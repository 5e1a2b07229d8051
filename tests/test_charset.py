"""Decoding pages as a browser reads them, trusting the bytes over stale declarations.

Each page is built here from real text in the language, encoded as a server would send it:
the right text must come out, whatever the header or <meta> claims.
"""

from __future__ import annotations

import codecs

import pytest

from app.pages.charset import codec_for, decode_html, decode_text

RUSSIAN = "Правительство утвердило новые меры поддержки для семей с детьми и пенсионеров."
CHINESE = "国务院总理今天在北京主持召开常务会议，部署进一步扩大内需的政策措施。"
POLISH = "Wczoraj w Łodzi odbyło się spotkanie; rozmawiano o źródłach finansowania inwestycji."
FRENCH = "Le gouvernement a présenté mercredi un projet de loi « pour l’égalité » – enfin."
GERMAN = "Die Bundesregierung hat die Förderung für Wärmepumpen deutlich erhöht: 15 € pro Jahr."
JAPANESE = "東京都は今日、新しい交通政策を発表しました。市民の生活を改善する取り組みです。"
GREEK = "Η κυβέρνηση ανακοίνωσε σήμερα νέα μέτρα στήριξης για τις οικογένειες."


def page(text: str, meta: str | None = None) -> str:
    head = f'<meta charset="{meta}">' if meta else ""
    return (
        f"<!doctype html><html><head>{head}<title>News</title></head>"
        f"<body><article><h1>Test</h1><p>{text}</p></article></body></html>"
    )


# -- UTF-8 bytes win over a stale declaration --------------------------------------------------


@pytest.mark.parametrize(
    ("text", "stale"),
    [
        (RUSSIAN, "windows-1251"),
        (CHINESE, "gb2312"),
        (FRENCH, "iso-8859-1"),
        (POLISH, "iso-8859-2"),
        (GERMAN, "iso-8859-15"),
    ],
)
@pytest.mark.parametrize("where", ["header", "meta"])
def test_utf8_bytes_under_a_stale_declaration_read_as_utf8(
    text: str, stale: str, where: str
) -> None:
    body = page(text, meta=stale if where == "meta" else None).encode("utf-8")
    decoded = decode_html(body, stale if where == "header" else None)
    assert text in decoded.text
    assert (decoded.charset, decoded.source) == ("utf-8", "utf-8 bytes")


def test_a_body_cut_inside_a_utf8_character_is_still_utf8() -> None:
    body = page(RUSSIAN).encode("utf-8") + "Ж".encode()[:1]
    decoded = decode_html(body, "windows-1251")
    assert RUSSIAN in decoded.text
    assert decoded.charset == "utf-8"


# -- correct declarations of legacy charsets ---------------------------------------------------


@pytest.mark.parametrize(
    ("text", "charset", "codec"),
    [
        (RUSSIAN, "windows-1251", "cp1251"),
        (CHINESE, "gb2312", "gb18030"),
        (POLISH, "iso-8859-2", "iso8859-2"),
        (JAPANESE, "Shift_JIS", "cp932"),
        (GREEK, "windows-1253", "cp1253"),
    ],
)
@pytest.mark.parametrize("where", ["header", "meta"])
def test_a_correctly_declared_legacy_page_reads_right(
    text: str, charset: str, codec: str, where: str
) -> None:
    body = page(text, meta=charset if where == "meta" else None).encode(codec)
    decoded = decode_html(body, charset if where == "header" else None)
    assert text in decoded.text
    assert (decoded.charset, decoded.source) == (codec, "declared" if where == "header" else "meta")


def test_a_gb2312_label_reads_gbk_characters_beyond_gb2312() -> None:
    # 镕 (in the name of a former premier, 朱镕基) is in GBK but not in GB2312.
    text = "朱镕基总理在北京会见了外国代表团。"
    with pytest.raises(UnicodeEncodeError):
        text.encode("gb2312")
    assert text in decode_html(page(text, meta="gb2312").encode("gbk")).text


def test_a_latin_1_label_reads_windows_1252_quotes_and_the_euro() -> None:
    text = "\u201cQuoted\u201d \u2013 15 \u20ac"
    decoded = decode_html(page(text).encode("cp1252"), "ISO-8859-1")
    assert text in decoded.text
    assert decoded.charset == "cp1252"


def test_the_header_outranks_a_meta_that_contradicts_it() -> None:
    body = page(RUSSIAN, meta="koi8-r").encode("cp1251")
    decoded = decode_html(body, "windows-1251")
    assert RUSSIAN in decoded.text
    assert decoded.source == "declared"


# -- no usable declaration ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "codec"),
    [(RUSSIAN, "cp1251"), (CHINESE, "gbk"), (JAPANESE, "shift_jis"), (GREEK, "cp1253")],
)
def test_an_undeclared_legacy_page_is_detected(text: str, codec: str) -> None:
    # Some text, as a real page has, for the detector to go on.
    decoded = decode_html(page(f"{text} {text[::-1]} {text}").encode(codec))
    assert text in decoded.text
    assert decoded.source == "detected"


@pytest.mark.parametrize("label", ["utf-7", "rot13", "zlib", "no-such-charset", ""])
def test_a_label_no_browser_uses_is_ignored(label: str) -> None:
    body = page(RUSSIAN, meta=label).encode("cp1251")
    decoded = decode_html(body, label)
    assert RUSSIAN in decoded.text
    assert decoded.source == "detected"


def test_a_utf16_label_over_bytes_without_nuls_is_ignored() -> None:
    decoded = decode_text(b"plain ASCII text", "utf-16")
    assert (decoded.text, decoded.charset) == ("plain ASCII text", "ascii")


def test_an_ascii_page_without_declarations_reads_as_is() -> None:
    decoded = decode_html(page("Plain English.").encode("ascii"))
    assert "Plain English." in decoded.text
    assert decoded.source == "ascii"


# -- byte-order marks ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("bom", "codec"),
    [
        (codecs.BOM_UTF8, "utf-8"),
        (codecs.BOM_UTF16_LE, "utf-16-le"),
        (codecs.BOM_UTF16_BE, "utf-16-be"),
    ],
)
def test_a_byte_order_mark_outranks_every_declaration(bom: bytes, codec: str) -> None:
    body = bom + page(POLISH, meta="iso-8859-2").encode(codec)
    decoded = decode_html(body, "windows-1250")
    assert POLISH in decoded.text
    assert not decoded.text.startswith("\ufeff")
    assert decoded.source == "bom"


def test_undecodable_bytes_become_replacement_characters() -> None:
    assert decode_text(b"caf\xe9 ok", "utf-8").text == "caf\ufffd ok"


# -- labels ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("label", "codec"),
    [
        ("ISO-8859-1", "cp1252"),
        ("us-ascii", "cp1252"),
        ("latin1", "cp1252"),
        ("gb2312", "gb18030"),
        ("GBK", "gb18030"),
        ("x-gbk", "gb18030"),
        ("Shift_JIS", "cp932"),
        ("windows-31j", "cp932"),
        ("euc-kr", "cp949"),
        ("big5", "big5hkscs"),
        ("iso-8859-9", "cp1254"),
        ("tis-620", "cp874"),
        (' "Windows-1251" ', "cp1251"),
        ("utf8", "utf-8"),
        ("utf-7", None),
    ],
)
def test_labels_are_read_as_whatwg_encoding_reads_them(label: str, codec: str | None) -> None:
    assert codec_for(label) == codec
