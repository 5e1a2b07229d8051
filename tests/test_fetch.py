"""web_fetch's fetcher: what it refuses to touch, what it reads, and what the model is shown.

The addresses come from a model, so from whoever wrote the pages it read. Every address
below is refused before a connection is made, or is the loopback page server
(tests/fakes/pages.py), which the fetcher reaches only because its host:port is allow-listed.
No test needs the internet.
"""

from __future__ import annotations

import asyncio
import ipaddress
import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import certifi
import pytest

from app import fetch
from app.fetch import (
    FetchFailed,
    FetchRefused,
    Page,
    fetch_page,
    for_model,
    parse_allow_hosts,
)
from tests.fakes.pages import ARTICLE_TITLE, PLAIN_TEXT, POLISH_SENTENCE, PageServer


def fetch_url(url: str, **kwargs: Any) -> Page:
    return asyncio.run(fetch_page(url, **kwargs))


def fetch_from(pages: PageServer, path: str, **kwargs: Any) -> Page:
    """A page of the loopback server, allow-listed as the test suite's own."""
    return fetch_url(pages.url + path, allow_hosts=frozenset({pages.host}), **kwargs)


@pytest.fixture(scope="module")
def server() -> Iterator[PageServer]:
    with PageServer() as pages:
        yield pages


@pytest.fixture
def pages(server: PageServer) -> PageServer:
    server.clear()
    return server


@pytest.fixture(autouse=True)
def loopback_only(monkeypatch: pytest.MonkeyPatch) -> None:
    """Fail the test if the fetcher connects anywhere but 127.0.0.1: refusals must come
    before connecting, and a bug must never send test traffic to a real private network."""
    real_get = fetch._get

    async def guarded(url: Any, addresses: list[Any], *args: Any) -> Any:
        outside = [str(a) for a in addresses if str(a) != "127.0.0.1"]
        if outside:
            pytest.fail(f"the fetcher went on to connect to {outside} for {url}")
        return await real_get(url, addresses, *args)

    monkeypatch.setattr(fetch, "_get", guarded)


def resolve_names(monkeypatch: pytest.MonkeyPatch, names: dict[str, list[str]]) -> list[str]:
    """Make the fetcher's resolver answer these names (others as usual); returns the list
    of names it was asked for."""
    real_resolve = fetch.resolve
    asked: list[str] = []

    async def fake(host: str, port: int) -> list[Any]:
        asked.append(host)
        if host in names:
            return [ipaddress.ip_address(a) for a in names[host]]
        return await real_resolve(host, port)

    monkeypatch.setattr(fetch, "resolve", fake)
    return asked


# -- addresses that are never fetched ----------------------------------------------------------


@pytest.mark.parametrize(
    ("url", "why"),
    [
        ("http://127.0.0.1/", "loopback"),
        ("http://127.8.9.10/", "loopback"),
        ("http://[::1]/", "loopback"),
        ("http://10.0.0.1/", "private"),
        ("http://172.16.0.1/", "private"),
        ("http://172.31.255.254/", "private"),
        ("http://192.168.1.1/", "private"),
        ("http://169.254.10.20/", "link-local"),
        ("http://[fe80::1]/", "link-local"),
        ("http://[fe80::1%25eth0]/", "link-local"),
        ("http://169.254.169.254/latest/meta-data/", "metadata"),
        ("http://[fd00:ec2::254]/", "metadata"),
        ("http://[fc00::1]/", "unique-local"),
        ("http://[fd12:3456::1]/", "unique-local"),
        ("http://[fec0::1]/", "site-local"),
        ("http://100.64.0.1/", "shared"),
        ("http://224.0.0.1/", "multicast"),
        ("http://[ff02::1]/", "multicast"),
        ("http://0.0.0.0/", "unspecified"),
        ("http://[::]/", "unspecified"),
        ("http://240.0.0.1/", "reserved"),
        ("http://255.255.255.255/", "reserved"),
    ],
)
def test_refuses_addresses_inside_the_house(url: str, why: str) -> None:
    with pytest.raises(FetchRefused, match=why):
        fetch_url(url)


@pytest.mark.parametrize(
    ("url", "inside"),
    [
        ("http://[::ffff:127.0.0.1]/", "127.0.0.1"),
        ("http://[::ffff:7f00:1]/", "127.0.0.1"),
        ("http://[::ffff:10.0.0.1]/", "10.0.0.1"),
        ("http://[::ffff:169.254.169.254]/", "169.254.169.254"),
        ("http://[64:ff9b::a00:1]/", "10.0.0.1"),  # NAT64
        ("http://[64:ff9b::7f00:1]/", "127.0.0.1"),
        ("http://[2002:7f00:1::1]/", "127.0.0.1"),  # 6to4
    ],
)
def test_refuses_ipv6_spellings_of_inside_ipv4_addresses(url: str, inside: str) -> None:
    with pytest.raises(FetchRefused, match=f"{inside} in IPv6 form"):
        fetch_url(url)


@pytest.mark.parametrize(
    "url",
    [
        "http://2130706433/",  # decimal
        "http://0x7f000001/",  # one hexadecimal number
        "http://017700000001/",  # one octal number
        "http://0177.0.0.1/",  # octal parts
        "http://0x7f.0.0.1/",  # hexadecimal parts
        "http://127.1/",  # short form
        "http://0/",  # 0.0.0.0
    ],
)
def test_refuses_numeric_tricks(url: str) -> None:
    with pytest.raises(FetchRefused):
        fetch_url(url)


@pytest.mark.parametrize(
    "url",
    [
        "http://example.com@127.0.0.1/",  # the host is after the @
        "http://127.0.0.1#@example.com/",  # and before the fragment
        "http://127.0.0.1:80/",  # the standard port, spelt out
    ],
)
def test_refuses_inside_addresses_dressed_up_as_others(url: str) -> None:
    with pytest.raises(FetchRefused, match="127.0.0.1 is a loopback address"):
        fetch_url(url)


@pytest.mark.parametrize(
    "url", ["http://localhost/", "http://LOCALHOST/", "http://localhost./", "http://app.localhost/"]
)
def test_refuses_localhost_names(url: str) -> None:
    with pytest.raises(FetchRefused, match="this machine"):
        fetch_url(url)


def test_refuses_a_name_that_resolves_to_a_private_address(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    resolve_names(monkeypatch, {"intranet.example": ["10.1.2.3"]})
    with pytest.raises(FetchRefused, match="intranet.example resolves to 10.1.2.3, a private"):
        fetch_url("http://intranet.example/admin")


def test_refuses_a_name_if_any_of_its_addresses_is_inside(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # A DNS answer mixing a public and a private address could be a rebinding setup.
    resolve_names(monkeypatch, {"mixed.example": ["93.184.215.14", "192.168.0.10"]})
    with pytest.raises(FetchRefused, match="192.168.0.10"):
        fetch_url("https://mixed.example/")


@pytest.mark.parametrize(
    "url",
    [
        "file:///etc/passwd",
        "ftp://example.com/file.txt",
        "gopher://example.com/",
        "data:text/html,<p>hello</p>",
        "javascript:alert(1)",
    ],
)
def test_refuses_schemes_other_than_http_and_https(url: str) -> None:
    with pytest.raises(FetchRefused, match="only http:// and https://"):
        fetch_url(url)


def test_asks_for_a_full_address_when_the_scheme_is_missing() -> None:
    with pytest.raises(FetchRefused, match="full http:// or https:// address"):
        fetch_url("example.com/page")


@pytest.mark.parametrize("url", ["http://example.com:8080/", "https://93.184.215.14:22/"])
def test_refuses_non_standard_ports(url: str) -> None:
    with pytest.raises(FetchRefused, match="port"):
        fetch_url(url)


# -- the allow-list ----------------------------------------------------------------------------


def test_reaches_the_page_server_when_its_host_and_port_are_allow_listed(
    pages: PageServer,
) -> None:
    page = fetch_from(pages, "/article")
    assert page.status == 200
    assert page.url == f"{pages.url}/article"
    assert page.title == ARTICLE_TITLE


def test_refuses_the_page_server_when_it_is_not_listed(pages: PageServer) -> None:
    with pytest.raises(FetchRefused):
        fetch_url(f"{pages.url}/article")
    assert pages.requests == []


def test_a_listed_host_on_another_port_does_not_open_this_one(pages: PageServer) -> None:
    host, port = pages.host.rsplit(":", 1)
    other = frozenset({f"{host}:{int(port) + 1}"})
    with pytest.raises(FetchRefused, match=f"port {port}"):
        fetch_url(f"{pages.url}/article", allow_hosts=other)
    assert pages.requests == []


@pytest.mark.parametrize("host", ["127.0.0.2", "localhost"])
def test_a_listed_host_does_not_open_other_names_for_the_same_machine(
    pages: PageServer, host: str
) -> None:
    port = pages.host.rsplit(":", 1)[1]
    with pytest.raises(FetchRefused):
        fetch_url(f"http://{host}:{port}/article", allow_hosts=frozenset({pages.host}))
    assert pages.requests == []


def test_allow_list_setting_is_host_port_pairs() -> None:
    assert parse_allow_hosts("127.0.0.1:8080, [::1]:9000 Pages.Test:81") == {
        "127.0.0.1:8080",
        "[::1]:9000",
        "pages.test:81",
    }
    assert parse_allow_hosts("") == frozenset()
    for wrong in ("127.0.0.1", "::1", "::1:8080", "pages.test:http"):
        with pytest.raises(ValueError, match="host:port"):
            parse_allow_hosts(wrong)


# -- redirects ---------------------------------------------------------------------------------


def test_follows_a_chain_of_redirects_to_the_final_page(pages: PageServer) -> None:
    page = fetch_from(pages, "/chain/3")
    assert page.url == f"{pages.url}/article"
    assert "Pierogi are filled dumplings" in page.text
    assert pages.paths() == ["/chain/3", "/chain/2", "/chain/1", "/article"]


def test_gives_up_after_max_redirects(pages: PageServer) -> None:
    with pytest.raises(FetchFailed, match="more than 2 redirects"):
        fetch_from(pages, "/chain/9", max_redirects=2)
    assert pages.paths() == ["/chain/9", "/chain/8", "/chain/7"]


@pytest.mark.parametrize(
    "target",
    [
        "http://169.254.169.254/latest/meta-data/",
        "http://10.0.0.1/",
        "http://[::1]/",
        "http://localhost/",
        "file:///etc/passwd",
        "http://127.0.0.1:1/",  # the page server's machine, another port
    ],
)
def test_checks_every_redirect_hop(pages: PageServer, target: str) -> None:
    with pytest.raises(FetchRefused):
        fetch_from(pages, f"/redirect?to={target}")
    assert pages.paths() == ["/redirect"]


def test_checks_the_name_a_redirect_points_to(
    pages: PageServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    resolve_names(monkeypatch, {"internal.example": ["172.20.0.5"]})
    with pytest.raises(FetchRefused, match="internal.example resolves to 172.20.0.5"):
        fetch_from(pages, "/redirect?to=http://internal.example/", max_redirects=3)


# -- connecting to the address that was checked ------------------------------------------------


def test_connects_to_the_checked_address_and_sends_the_name_as_host(
    pages: PageServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    # "pages.test" exists only in our resolver: had the HTTP client looked the name up
    # again (where a rebinding DNS could answer differently), the fetch would fail.
    asked = resolve_names(monkeypatch, {"pages.test": ["127.0.0.1"]})
    port = pages.host.rsplit(":", 1)[1]
    page = fetch_url(
        f"http://pages.test:{port}/echo-host", allow_hosts=frozenset({f"pages.test:{port}"})
    )
    assert page.text == f"pages.test:{port}"
    assert asked == ["pages.test"]


@pytest.fixture(scope="module")
def certificate(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """A self-signed certificate for pages.test."""
    if shutil.which("openssl") is None:
        pytest.skip("openssl is not installed: no certificate for the https tests")
    folder = tmp_path_factory.mktemp("tls")
    cert, key = folder / "cert.pem", folder / "key.pem"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1"]
        + ["-subj", "/CN=pages.test", "-addext", "subjectAltName=DNS:pages.test"]
        + ["-keyout", str(key), "-out", str(cert)],
        check=True,
        capture_output=True,
    )
    return cert, key


@pytest.fixture
def tls_pages(certificate: tuple[Path, Path]) -> Iterator[PageServer]:
    with PageServer(tls=certificate) as server:
        yield server


def test_https_checks_the_certificate_against_the_name_not_the_address(
    tls_pages: PageServer, certificate: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    resolve_names(monkeypatch, {"pages.test": ["127.0.0.1"]})
    monkeypatch.setattr(certifi, "where", lambda: str(certificate[0]))  # trust it like a CA
    port = tls_pages.host.rsplit(":", 1)[1]
    page = fetch_url(
        f"https://pages.test:{port}/echo-host", allow_hosts=frozenset({f"pages.test:{port}"})
    )
    assert page.text == f"pages.test:{port}"
    assert tls_pages.sni_names == ["pages.test"]


def test_https_with_an_untrusted_certificate_fails(
    tls_pages: PageServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    resolve_names(monkeypatch, {"pages.test": ["127.0.0.1"]})
    port = tls_pages.host.rsplit(":", 1)[1]
    with pytest.raises(FetchFailed, match="certificate verify failed"):
        fetch_url(f"https://pages.test:{port}/", allow_hosts=frozenset({f"pages.test:{port}"}))
    assert tls_pages.requests == []


# -- what is read, and how much ----------------------------------------------------------------


def test_stops_at_a_declared_size_over_the_limit(pages: PageServer) -> None:
    with pytest.raises(FetchFailed, match="more than the 5000000 allowed"):
        fetch_from(pages, "/huge?bytes=20000000")


def test_stops_reading_an_undeclared_body_past_the_limit(pages: PageServer) -> None:
    with pytest.raises(FetchFailed, match="larger than 1000000 bytes"):
        fetch_from(pages, "/huge?bytes=20000000&length=0", max_bytes=1_000_000)


def test_stops_a_gzip_bomb_while_inflating_it(pages: PageServer) -> None:
    started = time.monotonic()
    with pytest.raises(FetchFailed, match="larger than 5000000 bytes once decompressed"):
        fetch_from(pages, "/gzip-bomb?bytes=50000000")
    assert time.monotonic() - started < 5


def test_reads_gzip_compressed_pages(pages: PageServer) -> None:
    assert fetch_from(pages, "/gzipped").title == ARTICLE_TITLE


@pytest.mark.parametrize(
    ("path", "kind"),
    [
        ("/image.png", "image/png"),
        ("/download", "application/octet-stream"),
        ("/report.pdf", "application/pdf"),
        ("/no-type", "no content type"),
    ],
)
def test_refuses_to_read_what_is_not_text(pages: PageServer, path: str, kind: str) -> None:
    with pytest.raises(FetchFailed, match=f"is {kind}, not a web page or text"):
        fetch_from(pages, path)


def test_a_slow_page_times_out(pages: PageServer) -> None:
    started = time.monotonic()
    with pytest.raises(FetchFailed, match="timed out after 0.5 s"):
        fetch_from(pages, "/slow?seconds=5", timeout=0.5)
    assert time.monotonic() - started < 2


def test_the_timeout_is_a_deadline_for_the_whole_fetch(pages: PageServer) -> None:
    # A byte every 50 ms never trips a per-read timeout; only the deadline ends this.
    started = time.monotonic()
    with pytest.raises(FetchFailed, match="timed out after 1 s"):
        fetch_from(pages, "/drip?seconds=10", timeout=1)
    assert time.monotonic() - started < 3


@pytest.mark.parametrize("status", [404, 500])
def test_an_error_status_fails_naming_it(pages: PageServer, status: int) -> None:
    with pytest.raises(FetchFailed, match=f"HTTP {status}"):
        fetch_from(pages, f"/status?code={status}")


def test_sends_a_browser_like_request(pages: PageServer) -> None:
    fetch_from(pages, "/article")
    headers = pages.requests[0].headers
    assert headers["user-agent"].startswith("Mozilla/5.0")
    assert "text/html" in headers["accept"]


# -- decoding and extraction -------------------------------------------------------------------


def test_decodes_the_charset_of_the_meta_tag(pages: PageServer) -> None:
    page = fetch_from(pages, "/polish-meta")  # windows-1250, no charset in the header
    assert POLISH_SENTENCE in page.text


def test_the_charset_of_the_header_wins_over_the_meta_tag(pages: PageServer) -> None:
    page = fetch_from(pages, "/polish-header")  # iso-8859-2; the <meta> claims utf-8
    assert POLISH_SENTENCE in page.text


def test_an_html_page_becomes_its_main_text(pages: PageServer) -> None:
    page = fetch_from(pages, "/article")
    assert page.content_type == "text/html"
    assert "## Ingredients" in page.text
    assert "- one large egg" in page.text
    assert "| Potato and cheese | 4 |" in page.text
    assert "Recipes" not in page.text  # the menu
    assert "All rights reserved" not in page.text  # the footer
    assert page.chars == len(page.text)


def test_plain_text_is_kept_as_it_is(pages: PageServer) -> None:
    page = fetch_from(pages, "/plain")
    assert page.content_type == "text/plain"
    assert page.text == PLAIN_TEXT
    assert page.title == ""


# -- what the model receives -------------------------------------------------------------------


def page_with(text: str) -> Page:
    return Page(
        url="https://example.com/a",
        status=200,
        content_type="text/html",
        title="A title",
        text=text,
        chars=len(text),
    )


def test_the_model_gets_title_address_and_the_whole_text_of_a_short_page() -> None:
    shown = for_model(page_with("First paragraph.\n\nSecond paragraph."))
    assert shown == (
        "Title: A title\nURL: https://example.com/a\n\nFirst paragraph.\n\nSecond paragraph."
    )


def test_a_long_page_is_cut_to_the_token_cap_with_a_visible_marker() -> None:
    paragraph = "A sentence of a long article that goes on. " * 10
    text = "\n\n".join([paragraph.strip()] * 300)  # about 130,000 characters
    shown = for_model(page_with(text), max_tokens=1_000)
    assert len(shown) / 3 <= 1_000  # the pessimistic estimate stays within the cap
    body = shown.split("\n\n", 1)[1]
    kept, marker = body.rsplit("\n\n", 1)
    assert marker == f"[... truncated: {len(kept)} of {len(text)} characters shown]"
    assert text.startswith(kept)
    assert kept.endswith("goes on.")  # cut between paragraphs, not mid-word


def test_an_empty_page_says_so_rather_than_sending_nothing() -> None:
    assert for_model(page_with("")).endswith("(the page has no readable text)")
