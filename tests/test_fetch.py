"""web_fetch's fetcher: the allow-list, redirects, connecting to the checked address, what
it reads and what the model is shown. What it refuses to touch is tests/test_fetch_attacks.py.

Every address below is the loopback page server (tests/fakes/pages.py), which the fetcher
reaches only because its host:port is allow-listed, or is refused before a connection is made.
No test needs the internet.
"""

from __future__ import annotations

import asyncio
import ipaddress
import os
import shutil
import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import certifi
import httpx
import pytest

from app.config import parse_allow_hosts
from app.pages import addresses, fetch, worker
from app.pages.errors import FetchFailed, FetchRefused
from app.pages.fetch import Page, fetch_page, for_model
from app.search.embedded import EmbeddedSearxng
from tests.chat_client import numbered
from tests.conftest import chat_env
from tests.fakes.llm_server import FakeLLM, Reply, ToolCall
from tests.fakes.pages import ARTICLE, ARTICLE_TITLE, PLAIN_TEXT, POLISH_SENTENCE, PageServer
from tests.processes import descendants, has_mapped
from tests.serving import serve

LXML = "/lxml/etree."
"""lxml's C extension, mapped by a process that imported the extractor."""


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
    real_resolve = addresses.resolve
    asked: list[str] = []

    async def fake(host: str, port: int) -> list[Any]:
        asked.append(host)
        if host in names:
            return [ipaddress.ip_address(a) for a in names[host]]
        return await real_resolve(host, port)

    monkeypatch.setattr(addresses, "resolve", fake)
    return asked


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


# -- what is read ----------------------------------------------------------------------------


def test_reads_gzip_compressed_pages(pages: PageServer) -> None:
    assert fetch_from(pages, "/gzipped").title == ARTICLE_TITLE


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


def test_a_new_worker_has_the_extraction_loaded_before_its_first_page() -> None:
    """The first page's deadline is its own: the extraction's imports (a third of a second
    idle, 17 s at low priority on a busy machine) come with the worker's start."""
    started = worker.started_worker()
    try:
        loaded = started.pool.submit(eval, "'trafilatura' in __import__('sys').modules")
        assert loaded.result(timeout=60)
    finally:
        started.stop()


def test_each_new_worker_is_forked_from_one_process_that_loaded_the_extraction() -> None:
    """A worker replaced (past a page's deadline, or dead) comes ready from the fork
    server: it does not import trafilatura and lxml again, a third of a second of CPU."""
    started = [worker.started_worker(), worker.started_worker()]
    try:
        parents = {each.pool.submit(os.getppid).result(timeout=60) for each in started}
    finally:
        for each in started:
            each.stop()
    (parent,) = parents
    assert parent != os.getpid()  # not this process, which runs threads
    assert has_mapped(parent, LXML)


def test_a_service_loads_the_extractor_in_its_worker_process_only(
    llm: FakeLLM, pages: PageServer, searxng: EmbeddedSearxng, tmp_path: Path
) -> None:
    """The extractor (trafilatura, lxml, numpy: a sixth of a second of CPU) is imported by
    the service's worker process, not by the service at each start: not before a page is
    read, nor after, when the page read in the worker comes back to it."""
    article = f"{pages.url}/article"
    llm.script(Reply(tool_calls=[ToolCall("web_fetch", {"url": article})]), Reply(text="Read."))
    with serve(chat_env(llm, tmp_path, pages, SEARXNG_URL=searxng.url)) as served:
        service = served.process.pid
        assert not has_mapped(service, LXML)
        with httpx.Client(base_url=served.url, timeout=60) as client:
            conversation_id = client.post("/api/conversations", json={}).json()["id"]
            path = f"/api/conversations/{conversation_id}/chat"
            with client.stream("POST", path, json={"message": f"Read {article}"}) as answer:
                assert numbered(answer)[-1][1]["type"] == "done"
        read = llm.requests[-1].body["messages"][-1]["content"]
        assert "every grandmother has a rule" in read  # the article's text
        assert "All rights reserved" not in read  # without the page's footer: extracted
        assert not has_mapped(service, LXML)
        assert any(has_mapped(each.pid, LXML) for each in descendants(service))


@pytest.mark.long  # extraction processes started and killed
def test_the_service_extracts_in_a_worker_process_and_replaces_one_that_dies(
    pages: PageServer,
) -> None:
    """A worker killed mid-page fails that page with a clear error; the next page gets a
    new worker. (In a thread, a large page would hold the GIL against every stream.) The
    worker runs at lower priority: on busy cores it would take the streams' CPU."""
    huge = ARTICLE.replace("</article>", "<p>Pierogi z kapustą. </p>" * 150_000 + "</article>")

    async def scenario() -> tuple[Page, str, Page]:
        extraction = worker.ExtractionProcess()
        try:
            first = await fetch_page(
                pages.url + "/article", allow_hosts=frozenset({pages.host}), extract=extraction
            )
            assert extraction.worker is not None
            pid = extraction.worker.pid
            assert pid != os.getpid()
            # it yields the CPU to the streams
            assert os.getpriority(os.PRIO_PROCESS, pid) >= worker.EXTRACTION_NICENESS
            doomed = asyncio.ensure_future(extraction(huge.encode(), "http://x/", "utf-8"))
            await asyncio.sleep(0.3)
            os.kill(pid, signal.SIGKILL)
            with pytest.raises(FetchFailed) as failed:
                await doomed
            again = await fetch_page(
                pages.url + "/article", allow_hosts=frozenset({pages.host}), extract=extraction
            )
            return first, str(failed.value), again
        finally:
            extraction.close()

    first, failure, again = asyncio.run(scenario())
    assert first.title == ARTICLE_TITLE
    assert "worker process died" in failure
    assert again.text == first.text
