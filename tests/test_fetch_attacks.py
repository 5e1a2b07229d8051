"""web_fetch against hostile addresses and pages: 151 hostile forms, every one refused.

Each form is one named case of ATTACKS: an address that reaches inside the house (every
private, loopback, link-local, shared, multicast, reserved, documentation and metadata range,
IPv4 and IPv6, in every spelling browsers accept), a name that leads there, a redirect to any
of those, a scheme or port other than http(s) on 80/443, and pages that try to exhaust the
fetcher (huge, endless, compressed bombs, slow drips, binary types).

No case sends a packet beyond loopback. Names are answered by a fake resolver (a name it
does not know fails the test, so no DNS query leaves), and the connector fails the test
before connecting anywhere but the loopback page servers (tests/fakes/pages.py), which the
fetcher reaches only because their host:port is allow-listed. A case without a page server
must be refused with no connection at all.
"""

from __future__ import annotations

import asyncio
import ipaddress
import re
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import certifi
import pytest

from app.config import host_port
from app.pages import addresses, fetch
from app.pages.errors import FetchFailed, FetchRefused
from app.pages.fetch import fetch_page
from tests.fakes.pages import PageServer

TLS_NAME = "pages.test"  # the https page server's name, known only to the fake resolver


@dataclass(frozen=True)
class Attack:
    """A hostile address. ``url`` may hold {pages} (the http page server's base URL) and
    {tls} (the https one's); ``dns`` is what the fake resolver answers for names."""

    name: str
    url: str
    match: str
    error: type[Exception] = FetchRefused
    dns: dict[str, list[str]] = field(default_factory=dict)
    options: dict[str, Any] = field(default_factory=dict)


def refused(name: str, url: str, match: str, dns: dict[str, list[str]] | None = None) -> Attack:
    return Attack(name, url, match, dns=dns or {})


def redirect(name: str, target: str, match: str, dns: dict[str, list[str]] | None = None) -> Attack:
    """The page server redirects to target, which must be refused before it is requested."""
    return refused(name, "{pages}/redirect?to=" + target, match, dns)


def stopped(name: str, path: str, match: str, **options: Any) -> Attack:
    """A page of the page server that must fail rather than be handed to the model."""
    return Attack(name, "{pages}" + path, match, FetchFailed, options=options)


LOOPBACK, PRIVATE, METADATA = "loopback", "a private address", "cloud metadata"
IN_IPV6 = r"\(127\.0\.0\.1 in IPv6 form\)"

ADDRESSES = [
    refused("loopback", "http://127.0.0.1/", LOOPBACK),
    refused("loopback-top", "http://127.255.255.254/", LOOPBACK),
    refused("private-10", "http://10.0.0.1/", PRIVATE),
    refused("private-10-top", "http://10.255.255.254/", PRIVATE),
    refused("private-172-16", "http://172.16.0.1/", PRIVATE),
    refused("private-172-31", "http://172.31.255.254/", PRIVATE),
    refused("private-192-168", "http://192.168.1.1/", PRIVATE),
    refused("link-local", "http://169.254.10.20/", "link-local"),
    refused("cgnat", "http://100.64.0.1/", "shared address"),
    refused("cgnat-top", "http://100.127.255.254/", "shared address"),
    refused("multicast", "http://224.0.0.1/", "multicast"),
    refused("multicast-ssdp", "http://239.255.255.250/", "multicast"),
    refused("reserved-240", "http://240.0.0.1/", "reserved"),
    refused("broadcast", "http://255.255.255.255/", "broadcast"),
    refused("this-network-zero", "http://0.0.0.0/", "unspecified"),
    refused("this-network", "http://0.1.2.3/", "this network"),
    refused("benchmarking", "http://198.18.0.1/", "benchmarking"),
    refused("benchmarking-top", "http://198.19.255.254/", "benchmarking"),
    refused("documentation-1", "http://192.0.2.1/", "documentation"),
    refused("documentation-2", "http://198.51.100.1/", "documentation"),
    refused("documentation-3", "http://203.0.113.1/", "documentation"),
    refused("ietf-protocol", "http://192.0.0.8/", "IETF protocol"),
    refused("metadata-aws-gcp-azure", "http://169.254.169.254/latest/meta-data/", METADATA),
    refused("metadata-aws-ipv6", "http://[fd00:ec2::254]/latest/meta-data/", METADATA),
    refused("metadata-alibaba", "http://100.100.100.200/latest/meta-data/", METADATA),
    refused("metadata-oracle", "http://192.0.0.192/latest/", METADATA),
    refused("metadata-azure-wireserver", "http://168.63.129.16/machine", METADATA),
    # IPv6
    refused("ipv6-loopback", "http://[::1]/", LOOPBACK),
    refused("ipv6-unspecified", "http://[::]/", "unspecified"),
    refused("ipv6-link-local", "http://[fe80::1]/", "link-local"),
    refused("ipv6-link-local-zone", "http://[fe80::1%25eth0]/", "link-local"),
    refused("ipv6-unique-local-fc", "http://[fc00::1]/", "unique-local"),
    refused("ipv6-unique-local-fd", "http://[fd12:3456::1]/", "unique-local"),
    refused("ipv6-site-local", "http://[fec0::1]/", "site-local"),
    refused("ipv6-multicast-link", "http://[ff02::1]/", "multicast"),
    refused("ipv6-multicast-global", "http://[ff0e::1]/", "multicast"),
    refused("ipv6-documentation", "http://[2001:db8::1]/", "documentation"),
    refused("ipv6-documentation-3fff", "http://[3fff::1]/", "documentation"),
    refused("ipv6-discard", "http://[100::1]/", "reserved"),
    refused("ipv4-mapped-dotted", "http://[::ffff:127.0.0.1]/", IN_IPV6),
    refused("ipv4-mapped-hex", "http://[::ffff:7f00:1]/", IN_IPV6),
    refused("ipv4-mapped-long", "http://[0:0:0:0:0:ffff:127.0.0.1]/", IN_IPV6),
    refused("ipv4-mapped-private", "http://[::ffff:10.0.0.1]/", r"10\.0\.0\.1 in IPv6"),
    refused("ipv4-mapped-metadata", "http://[::ffff:a9fe:a9fe]/", METADATA),
    refused("ipv4-compatible", "http://[::127.0.0.1]/", IN_IPV6),
    refused("ipv4-translated-siit", "http://[::ffff:0:7f00:1]/", IN_IPV6),
    refused("nat64", "http://[64:ff9b::7f00:1]/", IN_IPV6),
    refused("nat64-private", "http://[64:ff9b::a00:1]/", r"10\.0\.0\.1 in IPv6"),
    refused("nat64-local-use", "http://[64:ff9b:1::a00:1]/", "local-use NAT64"),
    refused("6to4", "http://[2002:7f00:1::]/", IN_IPV6),
    refused("6to4-metadata", "http://[2002:a9fe:a9fe::1]/", METADATA),
    # Teredo: the client address is stored inverted; this one is 10.0.0.1.
    refused("teredo-private-client", "http://[2001:0:4136:e378:8000:63bf:f5ff:fffe]/", PRIVATE),
    refused("teredo-loopback-client", "http://[2001:0:4136:e378:8000:63bf:80ff:fffe]/", IN_IPV6),
    # Numeric spellings of 127.0.0.1 (and friends), read as browsers read them
    refused("decimal", "http://2130706433/", r"2130706433 is 127\.0\.0\.1, a loopback"),
    refused("octal-parts", "http://0177.0.0.1/", "not a valid address"),
    refused("octal-whole", "http://017700000001/", r"is 127\.0\.0\.1, a loopback"),
    refused("hex-parts", "http://0x7f.0.0.1/", r"is 127\.0\.0\.1, a loopback"),
    refused("hex-whole", "http://0x7f000001/", r"is 127\.0\.0\.1, a loopback"),
    refused("hex-metadata", "http://0xa9.0xfe.0xa9fe/", METADATA),
    refused("short", "http://127.1/", r"127\.1 is 127\.0\.0\.1, a loopback"),
    refused("short-private", "http://10.1/", r"10\.1 is 10\.0\.0\.1, a private"),
    refused("zero", "http://0/", r"0 is 0\.0\.0\.0, the unspecified"),
    refused("mixed-hex-short", "http://0x7f.1/", r"is 127\.0\.0\.1, a loopback"),
    refused("trailing-dot-address", "http://127.0.0.1./", LOOPBACK),
    refused("ideographic-dots", "http://127\u30020\u30020\u30021/", LOOPBACK),
    refused("five-parts", "http://1.2.3.4.5/", "not an IPv4 address"),
    refused("percent-encoded-address", "http://%31%32%37.0.0.1/", r"percent-encoded \(127"),
    refused("percent-encoded-dots", "http://127%2e0%2e0%2e1/", "percent-encoded"),
    refused("percent-encoded-name", "http://loc%61lhost/", r"percent-encoded \(localhost"),
    # Names
    refused("localhost", "http://localhost/", "only inside a network"),
    refused("localhost-uppercase", "http://LOCALHOST/", "only inside a network"),
    refused("localhost-trailing-dot", "http://localhost./", "only inside a network"),
    refused("localhost-subdomain", "http://app.localhost/", "only inside a network"),
    refused("localhost-circled-letter", "http://\u24dbocalhost/", "not a valid address"),
    refused("localhost-fullwidth", "http://\uff2cocalhost/", "not a valid address"),
    refused("mdns-local", "http://printer.local/", "only inside a network"),
    refused("home-arpa", "http://router.home.arpa/", "only inside a network"),
    refused("dotless-intranet", "http://intranet/", "without a dot"),
    refused("backslash-in-host", "http://example.com\\127.0.0.1/", "not a valid host name"),
    refused("metadata-gcp", "http://metadata.google.internal/computeMetadata/v1/", METADATA),
    refused("metadata-gcp-shouted-dot", "http://METADATA.Google.Internal./", METADATA),
    refused("metadata-gcp-alias", "http://metadata.goog/", METADATA),
    refused("metadata-gcp-short", "http://metadata/", METADATA),
    refused("metadata-aws-name", "http://instance-data/latest/", METADATA),
    refused("metadata-aws-fqdn", "http://instance-data.ec2.internal/", METADATA),
    refused(
        "dns-to-private",
        "http://intranet.example/",
        "resolves to 10.1.2.3",
        dns={"intranet.example": ["10.1.2.3"]},
    ),
    refused(
        "dns-wildcard-to-loopback",
        "http://127.0.0.1.nip.io/",
        LOOPBACK,
        dns={"127.0.0.1.nip.io": ["127.0.0.1"]},
    ),
    refused(
        "dns-one-of-several",
        "https://mixed.example/",
        "192.168.0.10",
        dns={"mixed.example": ["93.184.215.14", "192.168.0.10"]},
    ),
    refused(
        "dns-aaaa-mapped",
        "http://v6.example/",
        r"10\.0\.0\.1 in IPv6",
        dns={"v6.example": ["2606:4700::1", "::ffff:10.0.0.1"]},
    ),
    # Userinfo and backslashes: which part is the host depends on the parser
    refused("userinfo-before-address", "http://example.com@127.0.0.1/", LOOPBACK),
    refused("backslash-userinfo", "http://127.0.0.1\\@example.com/", "user name"),
    refused("backslash-before-at", "http://example.com\\@127.0.0.1", LOOPBACK),
    refused("double-backslash-before-at", "http://example.com\\\\@127.0.0.1", LOOPBACK),
    refused("bracketed-userinfo", "http://[::1]:80@example.com/", "user name"),
    refused("credentials", "http://user:secret@example.com/", "user name"),
    refused("fragment-at", "http://127.0.0.1#@example.com/", LOOPBACK),
    refused("query-at", "http://127.0.0.1?@example.com/", LOOPBACK),
    # Schemes and ports
    refused("scheme-file", "file:///etc/passwd", "only http:// and https://"),
    refused("scheme-ftp", "ftp://example.com/file.txt", "only http:// and https://"),
    refused("scheme-gopher", "gopher://127.0.0.1:6379/_INFO", "only http:// and https://"),
    refused("scheme-data", "data:text/html,<p>hello</p>", "only http:// and https://"),
    refused("scheme-javascript", "javascript:alert(1)", "only http:// and https://"),
    refused("scheme-dict", "dict://127.0.0.1:11211/stats", "only http:// and https://"),
    refused("scheme-missing", "example.com/page", "full http:// or https://"),
    refused("port-8080", "http://example.com:8080/", "port 8080"),
    refused("port-ssh", "https://93.184.215.14:22/", "port 22"),
    refused("port-redis-loopback", "http://127.0.0.1:6379/", "port 6379"),
    refused("port-zero", "http://example.com:0/", "port 0"),
    refused("port-out-of-range", "http://example.com:65536/", "port 65536"),
]

REDIRECTS = [
    redirect("to-metadata", "http://169.254.169.254/latest/meta-data/", METADATA),
    redirect("to-private", "http://10.0.0.1/", PRIVATE),
    redirect("to-ipv6-loopback", "http://[::1]/", LOOPBACK),
    redirect("to-localhost", "http://localhost/", "only inside a network"),
    redirect("to-file", "file:///etc/passwd", "only http:// and https://"),
    redirect("to-gopher", "gopher://127.0.0.1:6379/_FLUSHALL", "only http:// and https://"),
    redirect("to-same-machine-other-port", "http://127.0.0.1:1/", "port 1"),
    redirect("to-metadata-name", "http://metadata.google.internal/", METADATA),
    redirect("to-decimal", "http://2130706433/", LOOPBACK),
    redirect("to-mapped-metadata", "http://[::ffff:169.254.169.254]/", METADATA),
    redirect("to-nat64", "http://[64:ff9b::a9fe:a9fe]/", METADATA),
    redirect("to-link-local-zone", "http://[fe80::1%25eth0]/", "link-local"),
    redirect("to-userinfo", "http://example.com@10.0.0.1/", PRIVATE),
    redirect("scheme-relative", "//169.254.169.254/latest/", METADATA),
    redirect(
        "to-name-resolving-inside",
        "http://internal.example/",
        "resolves to 172.20.0.5",
        dns={"internal.example": ["172.20.0.5"]},
    ),
    redirect(
        "to-one-of-several",
        "http://mixed.example/",
        "192.168.0.10",
        dns={"mixed.example": ["93.184.215.14", "192.168.0.10"]},
    ),
    Attack(
        "invalid-location",
        "{pages}/redirect?to=http://[::1/",
        "(?i)invalid url in location|invalid address",
        FetchFailed,
    ),
    refused("301-to-private", "{pages}/redirect?status=301&to=http://192.168.0.1/", PRIVATE),
    refused("307-to-loopback", "{pages}/redirect?status=307&to=http://127.0.0.1/", LOOPBACK),
    refused("308-to-metadata", "{pages}/redirect?status=308&to=http://169.254.169.254/", METADATA),
    refused(
        "after-three-relative-hops",
        "{pages}/redirect?to=/redirect?to=/redirect?to=http://10.0.0.1/",
        PRIVATE,
    ),
    refused(
        "https-to-http-to-file",
        "{tls}/redirect?to={pages}/redirect?to=file:///etc/passwd",
        "only http:// and https://",
    ),
    refused(
        "https-to-http-to-metadata",
        "{tls}/redirect?to={pages}/redirect?to=http://169.254.169.254/",
        METADATA,
    ),
    Attack("redirect-loop", "{pages}/loop", "more than 5 redirects", FetchFailed),
    Attack("redirect-forever", "{pages}/chain/100000", "more than 5 redirects", FetchFailed),
]

BODIES = [
    stopped("huge-declared", "/huge?bytes=20000000", "more than the 5000000 allowed"),
    stopped(
        "huge-undeclared",
        "/huge?bytes=20000000&length=0",
        "larger than 1000000 bytes",
        max_bytes=1_000_000,
    ),
    stopped("endless", "/endless", "larger than 1000000 bytes", max_bytes=1_000_000),
    stopped(
        "gzip-bomb",
        "/bomb?encoding=gzip&bytes=50000000",
        "larger than 5000000 bytes once decompressed",
    ),
    stopped(
        "deflate-bomb",
        "/bomb?encoding=deflate&bytes=50000000",
        "larger than 5000000 bytes once decompressed",
    ),
    stopped("brotli", "/encoded?as=br", "unsupported content encoding 'br'"),
    stopped("zstd", "/encoded?as=zstd", "unsupported content encoding 'zstd'"),
    stopped(
        "stacked-gzip", "/encoded?as=gzip,%20gzip", "unsupported content encoding 'gzip, gzip'"
    ),
    stopped("slow-headers", "/slow?seconds=5", "timed out after 0.5 s", timeout=0.5),
    # A byte every 50 ms never trips a per-read timeout; only the deadline on the whole ends it.
    stopped("slow-drip", "/drip?seconds=10", "timed out after 1 s", timeout=1),
    stopped("image", "/image.png", "is image/png, not a web page"),
    stopped("octet-stream", "/download", "is application/octet-stream, not a web page"),
    stopped("pdf", "/report.pdf", "is application/pdf, not a web page"),
    stopped("svg", "/typed?type=image/svg%2Bxml", r"is image/svg\+xml, not a web page"),
    stopped("javascript", "/typed?type=application/javascript", "is application/javascript, not"),
    stopped("no-type-html", "/no-type", "is no content type, not a web page"),
    stopped("no-type-binary", "/typed", "is no content type, not a web page"),
]

ATTACKS = ADDRESSES + REDIRECTS + BODIES
DOCUMENTED_COUNT = int(re.search(r"(\d+) hostile forms", __doc__ or "").group(1))


def test_the_documented_count_is_the_suite() -> None:
    # docs/security.md quotes this docstring's number as "N of N refused".
    assert len(ATTACKS) == DOCUMENTED_COUNT >= 60
    assert len({attack.name for attack in ATTACKS}) == len(ATTACKS)


# -- the fences: no DNS query and no connection beyond the loopback page servers ---------------


@dataclass
class Network:
    """What the fetcher asked of the network during a case."""

    servers: set[str] = field(default_factory=set)
    """address:port of the page servers: the only places a connection may go."""
    allowed: set[str] = field(default_factory=set)
    """The page servers as the case's addresses name them, for the fetcher's allow-list."""
    answers: dict[str, list[str]] = field(default_factory=dict)
    asked: list[str] = field(default_factory=list)
    connections: list[str] = field(default_factory=list)


@pytest.fixture
def network(monkeypatch: pytest.MonkeyPatch) -> Network:
    seen = Network()

    async def resolve(host: str, port: int) -> list[Any]:
        seen.asked.append(host)
        if host not in seen.answers:
            pytest.fail(f"the fetcher tried to look up {host} in the real DNS")
        return [ipaddress.ip_address(a) for a in seen.answers[host]]

    real_request = fetch._request

    async def connect(url: Any, address: Any, *args: Any) -> Any:
        target = host_port(str(address), url.port)
        seen.connections.append(target)
        if not address.is_loopback or target not in seen.servers:
            pytest.fail(f"the fetcher went on to connect to {target} for {url}")
        return await real_request(url, address, *args)

    monkeypatch.setattr(addresses, "resolve", resolve)
    monkeypatch.setattr(fetch, "_request", connect)
    return seen


@pytest.fixture(scope="module")
def certificate(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """A self-signed certificate for pages.test."""
    folder = tmp_path_factory.mktemp("tls")
    cert, key = folder / "cert.pem", folder / "key.pem"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1"]
        + ["-subj", f"/CN={TLS_NAME}", "-addext", f"subjectAltName=DNS:{TLS_NAME}"]
        + ["-keyout", str(key), "-out", str(cert)],
        check=True,
        capture_output=True,
    )
    return cert, key


@pytest.fixture(scope="module")
def tls_server(certificate: tuple[Path, Path]) -> Iterator[PageServer]:
    with PageServer(tls=certificate) as server:
        yield server


def start_url(
    attack: Attack,
    request: pytest.FixtureRequest,
    network: Network,
    monkeypatch: pytest.MonkeyPatch,
) -> str:
    """The case's address with its page servers filled in, and those servers allowed."""
    bases: dict[str, str] = {}
    if "{pages}" in attack.url:
        pages: PageServer = request.getfixturevalue("pages")
        pages.clear()
        bases["pages"] = pages.url
        network.servers.add(pages.host)
        network.allowed.add(pages.host)
    if "{tls}" in attack.url:
        tls: PageServer = request.getfixturevalue("tls_server")
        certificate = request.getfixturevalue("certificate")
        monkeypatch.setattr(certifi, "where", lambda: str(certificate[0]))  # trusted like a CA
        port = tls.host.rsplit(":", 1)[1]
        bases["tls"] = f"https://{TLS_NAME}:{port}"
        network.servers.add(tls.host)
        network.allowed.add(f"{TLS_NAME}:{port}")
        network.answers[TLS_NAME] = ["127.0.0.1"]
    return attack.url.format(**bases)


@pytest.mark.parametrize("attack", ATTACKS, ids=[attack.name for attack in ATTACKS])
def test_refuses(
    attack: Attack,
    network: Network,
    request: pytest.FixtureRequest,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    url = start_url(attack, request, network, monkeypatch)
    network.answers.update(attack.dns)
    options = {"allow_hosts": frozenset(network.allowed), **attack.options}
    with pytest.raises(attack.error, match=attack.match):
        asyncio.run(fetch_page(url, **options))
    assert set(network.asked) <= set(network.answers)
    if not network.servers:
        assert network.connections == [], "refused only after connecting"


def test_a_rebinding_name_is_connected_at_the_address_that_was_checked(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The first answer is public, every later one private: a fetcher that looked the name up
    # again to connect would land inside. The connector is a stub: nothing leaves the machine.
    answers = iter([["93.184.215.14"], ["10.0.0.1"], ["10.0.0.1"]])
    asked: list[str] = []
    connected: list[str] = []

    async def resolve(host: str, port: int) -> list[Any]:
        asked.append(host)
        return [ipaddress.ip_address(a) for a in next(answers)]

    async def connect(url: Any, address: Any, *args: Any) -> Any:
        connected.append(str(address))
        return fetch._Reply(status=200, content_type="text/plain", charset=None, body=b"public")

    monkeypatch.setattr(addresses, "resolve", resolve)
    monkeypatch.setattr(fetch, "_request", connect)
    page = asyncio.run(fetch_page("http://rebind.example/"))
    assert page.text == "public"
    assert asked == ["rebind.example"]
    assert connected == ["93.184.215.14"]


def test_a_rebinding_name_on_the_page_server_reaches_only_the_checked_address(
    network: Network, request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The same through a real connection: the name first resolves to the (allow-listed)
    # page server, then to a private address; the guard fails the test on any other target.
    pages: PageServer = request.getfixturevalue("pages")
    pages.clear()
    port = pages.host.rsplit(":", 1)[1]
    network.servers.add(pages.host)
    answers = iter([["127.0.0.1"], ["10.0.0.1"]])

    async def resolve(host: str, port: int) -> list[Any]:
        network.asked.append(host)
        return [ipaddress.ip_address(a) for a in next(answers)]

    monkeypatch.setattr(addresses, "resolve", resolve)
    allowed = frozenset({f"rebind.test:{port}"})
    page = asyncio.run(fetch_page(f"http://rebind.test:{port}/echo-host", allow_hosts=allowed))
    assert page.text == f"rebind.test:{port}"
    assert network.asked == ["rebind.test"]
    assert network.connections == [pages.host]
