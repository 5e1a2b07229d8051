"""web_fetch: a page's main text for the model, fetched safely (docs/security.md).

The address comes from the model, so from whoever wrote the pages and results it has read:
it may point at this machine, the LAN or a cloud metadata service. So every hop is checked
before any connection: http(s) only, ports 80/443, and a host whose every address is public.
The connection then goes to an address that was checked, never to a fresh DNS answer (which
a rebinding attacker could point inside), and the reply is capped in time, in bytes on the
wire, in bytes once decompressed, and in content type.
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import multiprocessing
import os
import re
import signal
import socket
import threading
import zlib
from collections.abc import Awaitable, Callable
from concurrent.futures import ProcessPoolExecutor, ThreadPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from dataclasses import asdict, dataclass
from urllib.parse import unquote

import certifi
import httpx

from app.config import allow_key, host_port
from app.pages.charset import decode_text
from app.pages.extract import Extracted, extract_html
from app.transport import tls_context

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address

DEFAULT_PORTS = {"http": 80, "https": 443}
STANDARD_PORTS = frozenset(DEFAULT_PORTS.values())
REDIRECT_STATUSES = frozenset({301, 302, 303, 307, 308})

# A plain browser's request: some sites answer unknown clients with an error page.
USER_AGENT = "Mozilla/5.0 (X11; Linux x86_64; rv:128.0) Gecko/20100101 Firefox/128.0"
ACCEPT = "text/html,application/xhtml+xml,application/xml;q=0.9,text/plain;q=0.8,*/*;q=0.5"
# Only encodings we inflate ourselves, so that every byte is counted (see _read_body).
ACCEPT_ENCODING = "gzip, deflate"
EXTRACTION_NICENESS = 10
EXTRACTION_DEADLINE = 20.0
"""Seconds one page's extraction may take (a page of a few MB takes a few seconds)."""

HTML_TYPES = frozenset({"text/html", "application/xhtml+xml"})
TEXT_TYPES = frozenset(
    {"text/plain", "text/markdown", "text/x-markdown", "text/xml", "application/xml"}
    | {"application/json", "application/rss+xml", "application/atom+xml"}
)

# Estimating tokens as characters / 3 over-counts English (about 4 per token): the cap errs
# towards leaving room in the model's context.
CHARS_PER_TOKEN = 3

# Metadata services hand out a machine's credentials. Most sit in ranges refused anyway; these
# are named so the refusal says what they are, and two would otherwise pass as public.
METADATA_ADDRESSES = frozenset(
    ipaddress.ip_address(address)
    for address in (
        "169.254.169.254",  # AWS, GCP, Azure, Oracle, OpenStack, DigitalOcean...
        "fd00:ec2::254",  # AWS over IPv6
        "100.100.100.200",  # Alibaba Cloud
        "192.0.0.192",  # Oracle Cloud (older instances)
        "168.63.129.16",  # Azure's WireServer: a public-looking address that is the host
    )
)
# Metadata names resolve only inside their cloud (to the addresses above). Refused by name,
# before any DNS query, so that no lookup for them ever leaves the machine.
METADATA_NAMES = frozenset(
    {"metadata.google.internal", "metadata.goog", "metadata", "instance-data"}
    | {"instance-data.ec2.internal"}
)
# Names that exist only inside a network (RFC 6761, RFC 8375, ICANN's .internal); resolving
# .local even sends a multicast query onto the LAN.
INTERNAL_SUFFIXES = ("localhost", "localdomain", "local", "internal", "home.arpa")
HOST_NAME = re.compile(r"[a-z0-9_-]+(\.[a-z0-9_-]+)*\.?")

# IPv6 prefixes that carry an IPv4 address in their last 32 bits: the packet goes there.
IPV4_COMPATIBLE = ipaddress.ip_network("::/96")  # deprecated, but still understood by some
IPV4_TRANSLATED = ipaddress.ip_network("::ffff:0:0:0/96")  # SIIT
NAT64 = ipaddress.ip_network("64:ff9b::/96")
# Ranges listed explicitly because ipaddress's properties miss them or vary across Python
# versions (3.11 counts 192.0.0.192 and 3fff::/20 as global). Checked after the properties.
REFUSED_NETWORKS = tuple(
    (ipaddress.ip_network(network), reason)
    for network, reason in (
        ("0.0.0.0/8", "a 'this network' address (0.0.0.0/8)"),
        ("100.64.0.0/10", "a shared address (carrier-grade NAT, 100.64/10)"),
        ("192.0.0.0/24", "an IETF protocol address (192.0.0/24)"),
        ("192.0.2.0/24", "a documentation address"),
        ("198.51.100.0/24", "a documentation address"),
        ("203.0.113.0/24", "a documentation address"),
        ("198.18.0.0/15", "a benchmarking address (198.18/15)"),
        ("255.255.255.255/32", "the broadcast address (reserved)"),
        ("2001:db8::/32", "a documentation address"),
        ("3fff::/20", "a documentation address"),
        ("64:ff9b:1::/48", "a local-use NAT64 address (64:ff9b:1::/48, a private network)"),
        ("fec0::/10", "an IPv6 site-local address"),
        ("fc00::/7", "an IPv6 unique-local (private) address"),
    )
)


class FetchRefused(Exception):
    """The address is not allowed (reason in the message). CLI exits 2."""


class FetchFailed(Exception):
    """The page could not be fetched (network, HTTP status, timeout, too big, wrong type)."""


@dataclass(frozen=True)
class Page:
    url: str
    """The final address, after redirects."""
    status: int
    content_type: str
    title: str
    text: str
    """The main text: extracted from HTML, as served for plain text types."""
    chars: int

    def as_dict(self) -> dict[str, str | int]:
        return asdict(self)


@dataclass(frozen=True)
class _Reply:
    status: int
    content_type: str
    charset: str | None
    body: bytes


Extract = Callable[[bytes, str, str | None], Awaitable[Extracted]]
"""Title and main text from an HTML body, its final address and its declared charset."""


async def extract_in_thread(body: bytes, url: str, charset: str | None) -> Extracted:
    """For a command that fetches one page: nothing else waits on its event loop."""
    return await asyncio.to_thread(extract_html, body, url, charset)


@dataclass
class Worker:
    """The extraction process: its pool of one, and its pid (to stop it)."""

    pool: ProcessPoolExecutor
    pid: int

    def stop(self) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.kill(self.pid, signal.SIGKILL)
        self.pool.shutdown(wait=False, cancel_futures=True)


class ExtractionProcess:
    """Extraction in a worker process, for the service. A page of a few MB takes seconds of
    CPU in lxml and trafilatura; in a thread that would hold the GIL, and every stream
    would stall behind it. The worker starts with the first page (its imports take about
    a third of a second) and is replaced if it dies.

    Pages take turns, each with its own deadline from its start (not from a queue's): past
    it, the worker is killed and replaced, so that one page built to be slow holds the
    other conversations' pages back by `deadline` at most. A page whose turn ends before
    its extraction (the user stopped the answer) has the worker killed too: nothing runs
    for nobody, ahead of the next page."""

    def __init__(self, deadline: float = EXTRACTION_DEADLINE) -> None:
        self.worker: Worker | None = None
        self.deadline = deadline
        self.turn = asyncio.Lock()

    async def __call__(self, body: bytes, url: str, charset: str | None) -> Extracted:
        async with self.turn:
            if self.worker is None:
                self.worker = await asyncio.to_thread(started_worker)
            worker = self.worker
            loop = asyncio.get_running_loop()
            try:
                async with asyncio.timeout(self.deadline):
                    return await loop.run_in_executor(worker.pool, extract_html, body, url, charset)
            except TimeoutError:
                self.replace(worker)
                raise FetchFailed(
                    f"extracting {url} took over {self.deadline:g} s: stopped"
                ) from None
            except BrokenProcessPool as exc:
                self.replace(worker)
                raise FetchFailed(f"extracting {url} failed: the worker process died") from exc
            except asyncio.CancelledError:
                self.replace(worker)
                raise

    def replace(self, worker: Worker) -> None:
        """Stop the worker; the next page starts a new one."""
        worker.stop()
        self.worker = None

    def close(self) -> None:
        if self.worker is not None:
            self.worker.pool.shutdown(wait=False, cancel_futures=True)


def started_worker() -> Worker:
    """A pool whose worker is already running: starting one takes milliseconds of CPU (and
    the first submit starts it), which must not be the event loop's.

    The worker runs at lower priority, from its first instruction: a page's extraction can
    wait a few milliseconds, the streams cannot. Its start alone (imports, a third of a
    second) took the CPU from the event loop in slices of 10-20 ms on two busy cores. A
    process inherits the priority of the thread that starts it, so a thread of its own,
    lowered, starts it (a thread's priority cannot be raised back)."""
    with ThreadPoolExecutor(max_workers=1, initializer=yield_cpu) as starter:
        return starter.submit(spawned_worker).result()


def yield_cpu() -> None:
    thread = threading.get_native_id()
    niceness = max(os.getpriority(os.PRIO_PROCESS, thread), EXTRACTION_NICENESS)
    os.setpriority(os.PRIO_PROCESS, thread, niceness)


def spawned_worker() -> Worker:
    # spawn: a fork of a process running threads (storage, SQLite) is not safe.
    pool = ProcessPoolExecutor(max_workers=1, mp_context=multiprocessing.get_context("spawn"))
    return Worker(pool, pool.submit(os.getpid).result())


async def fetch_page(
    url: str,
    *,
    allow_hosts: frozenset[str] = frozenset(),
    max_bytes: int = 5_000_000,
    timeout: float = 15.0,
    max_redirects: int = 5,
    extract: Extract = extract_in_thread,
) -> Page:
    """Fetch a page and extract its main text. ``allow_hosts`` holds ``host:port`` entries
    exempt from the port and address rules: the test suite's loopback page server."""
    allowed = frozenset(allow_key(entry) for entry in allow_hosts)
    try:
        async with asyncio.timeout(timeout):
            final, reply = await _follow(_parse(url), allowed, max_bytes, timeout, max_redirects)
    except (TimeoutError, httpx.TimeoutException) as exc:
        raise FetchFailed(f"timed out after {timeout:g} s fetching {url}") from exc
    except httpx.HTTPError as exc:
        raise FetchFailed(f"network error fetching {url}: {exc}") from exc
    if reply.content_type in HTML_TYPES:
        extracted = await extract(reply.body, str(final), reply.charset)
        title, text = extracted.title, extracted.text
    else:
        # Decoding takes milliseconds of CPU a megabyte: off the loop.
        title, text = "", (await asyncio.to_thread(decode_text, reply.body, reply.charset)).text
    return Page(
        url=str(final),
        status=reply.status,
        content_type=reply.content_type,
        title=title,
        text=text,
        chars=len(text),
    )


def for_model(page: Page, max_tokens: int = 12_000) -> str:
    """What the model receives: title, address, then the text, within about max_tokens.

    A cut is marked in the text itself, so the model knows it did not see the whole page.
    """
    header = (f"Title: {page.title}\n" if page.title else "") + f"URL: {page.url}\n\n"
    text = page.text or "(the page has no readable text)"
    budget = max_tokens * CHARS_PER_TOKEN - len(header)
    if len(text) <= budget:
        return header + text
    marker = "\n\n[... truncated: {} of " + f"{len(text)} characters shown]"
    # The marker's own length with the longest count it could show, so the whole fits.
    room = max(budget - len(marker.format(len(text))), 0)
    shown = text[: _cut_point(text, room)].rstrip()
    return header + shown + marker.format(len(shown))


def _cut_point(text: str, room: int) -> int:
    """Cut at a paragraph, else a line, else a word boundary near room, else at room."""
    for separator in ("\n\n", "\n", " "):
        at = text.rfind(separator, 0, room + 1)
        if at >= room * 0.8:
            return at
    return room


# -- checking an address ----------------------------------------------------------------------


def _parse(url: str) -> httpx.URL:
    try:
        return httpx.URL(url.strip())
    except httpx.InvalidURL as exc:
        raise FetchRefused(f"not a valid address: {url!r} ({exc})") from exc


async def _check(url: httpx.URL, allowed: frozenset[str]) -> list[IPAddress]:
    """The addresses to connect to for url, every one of them checked; or FetchRefused.

    Everything that needs no network is judged before the one lookup, so a refused host is
    never even looked up.
    """
    if not url.scheme:
        raise FetchRefused(f"give a full http:// or https:// address, not {str(url)!r}")
    if url.scheme not in DEFAULT_PORTS:
        raise FetchRefused(f"only http:// and https:// addresses are fetched, not {url.scheme}:")
    host = url.raw_host.decode("ascii").lower()  # IDNA-encoded, IPv6 without brackets
    if not host:
        raise FetchRefused(f"the address {url} names no host")
    port = DEFAULT_PORTS[url.scheme] if url.port is None else url.port  # :0 is not 80
    exempt = host_port(host, port) in allowed
    if not exempt and port not in STANDARD_PORTS:
        raise FetchRefused(f"port {port} is not allowed, only 80 and 443: {url}")
    literal = _literal(host)
    if not exempt:
        _refuse_host(host, literal)
    if url.userinfo:
        # Parsers disagree on where user@ ends (http://a\@b/ is host a to a browser, b to
        # httpx): an address that depends on which one reads it is not fetched.
        raise FetchRefused(f"addresses with a user name (user@host) are not fetched: {url}")
    if literal is not None:
        return [literal]
    addresses = await resolve(host, port)
    for address in addresses:
        reason = None if exempt else refusal(address)
        if reason:
            raise FetchRefused(f"{host} resolves to {address}, {reason}")
    return addresses


def _refuse_host(host: str, literal: IPAddress | None) -> None:
    """FetchRefused if the host, an address or a name, is one the fetcher never reaches."""
    if literal is None:
        reason = _name_refusal(host)
        if reason:
            raise FetchRefused(f"{host} is {reason}")
        return
    reason = refusal(literal)
    if reason and literal.version == 4 and str(literal) != host:  # say what 0x7f.1 is
        raise FetchRefused(f"{host} is {literal}, {reason}")
    if reason:
        raise FetchRefused(f"{host} is {reason}")


async def resolve(host: str, port: int) -> list[IPAddress]:
    """Every address the system resolver gives for a host name (never for an IP address:
    those are read by _literal, so no spelling of one ever turns into a DNS query)."""
    try:
        infos = await asyncio.to_thread(socket.getaddrinfo, host, port, type=socket.SOCK_STREAM)
    except socket.gaierror as exc:
        raise FetchFailed(f"cannot resolve {host}: {exc.strerror}") from exc
    return list(dict.fromkeys(ipaddress.ip_address(info[4][0]) for info in infos))


def _literal(host: str) -> IPAddress | None:
    """The address a host written as an IP address stands for, in any spelling a browser
    reads; None for a name. FetchRefused for a host that is neither."""
    if ":" in host:  # only an IPv6 address has colons in a host
        try:
            return ipaddress.IPv6Address(unquote(host))  # unquote: a zone, fe80::1%25eth0
        except ValueError as exc:
            raise FetchRefused(f"{host} is not a valid IPv6 address") from exc
    if "%" in host:
        # Browsers decode it (%31%32%37.0.0.1 is 127.0.0.1); no real host needs it.
        raise FetchRefused(f"{host} is percent-encoded ({unquote(host)}): not fetched")
    if not HOST_NAME.fullmatch(host):
        raise FetchRefused(f"{host} is not a valid host name")
    try:
        return _numeric_ipv4(host)
    except ValueError as exc:
        raise FetchRefused(f"{host} ends in a number but is not an IPv4 address") from exc


def _numeric_ipv4(host: str) -> ipaddress.IPv4Address | None:
    """A host as the WHATWG URL standard reads IPv4: one to four dot-separated parts, each
    decimal, octal (leading 0) or hexadecimal (0x), the last filling the bytes left, so
    2130706433, 0177.0.0.1, 0x7f.1 and 127.1 are all 127.0.0.1. None when the last label is
    not a number (a name); ValueError when it is, but the whole is no address."""
    labels = host.split(".")
    if len(labels) > 1 and labels[-1] == "":
        labels.pop()  # one trailing dot: 127.0.0.1. is 127.0.0.1
    if not re.fullmatch(r"[0-9]+|0x[0-9a-f]*", labels[-1]):
        return None
    if len(labels) > 4:
        raise ValueError(host)
    *parts, last = [_ipv4_part(label) for label in labels]
    if any(part > 255 for part in parts) or last >= 256 ** (4 - len(parts)):
        raise ValueError(host)
    return ipaddress.IPv4Address(sum(p << 8 * (3 - i) for i, p in enumerate(parts)) + last)


def _ipv4_part(label: str) -> int:
    if label.startswith("0x"):
        return int(label[2:] or "0", 16)
    if len(label) > 1 and label.startswith("0"):
        return int(label[1:], 8)
    return int(label, 10)  # ValueError for an empty or non-numeric part


def _name_refusal(host: str) -> str | None:
    """Why a host name must not even be looked up, or None."""
    name = host.removesuffix(".")
    if name in METADATA_NAMES:
        return "a cloud metadata name"
    if any(name == suffix or name.endswith("." + suffix) for suffix in INTERNAL_SUFFIXES):
        return "a name that exists only inside a network (this machine or the LAN)"
    if "." not in name:
        # The resolver completes a single label with the local search domain: internal.
        return "a name without a dot, which only the local network resolves"
    return None


def refusal(address: IPAddress) -> str | None:
    """Why the fetcher must not connect to an address, or None for a public one."""
    if address in METADATA_ADDRESSES:
        return "a cloud metadata address"
    embedded = _embedded_ipv4(address) if isinstance(address, ipaddress.IPv6Address) else None
    if embedded is not None:
        # IPv6 spellings of an IPv4 address reach that IPv4 address: judge it instead.
        reason = refusal(embedded)
        if reason:
            return f"{reason} ({embedded} in IPv6 form)"
    checks = (
        (address.is_loopback, "a loopback address (this machine)"),
        (address.is_unspecified, "the unspecified address"),
        (address.is_link_local, "a link-local address"),
        (address.is_multicast, "a multicast address"),
    )
    named = ((address in network, reason) for network, reason in REFUSED_NETWORKS)
    rest = (
        (address.is_reserved, "a reserved address"),
        (address.is_private, "a private address"),
        (not address.is_global, "not a public address"),
    )
    return next((reason for refused, reason in (*checks, *named, *rest) if refused), None)


def _embedded_ipv4(address: ipaddress.IPv6Address) -> ipaddress.IPv4Address | None:
    """The IPv4 address an IPv6 address leads to: mapped (::ffff:a.b.c.d), compatible
    (::a.b.c.d), translated (::ffff:0:a.b.c.d), NAT64 (64:ff9b::a.b.c.d), 6to4
    (2002:aabb:ccdd::) or the client of a Teredo tunnel (2001:0::/32); else None."""
    if address.ipv4_mapped or address.sixtofour:
        return address.ipv4_mapped or address.sixtofour
    if address.teredo:
        return address.teredo[1]
    low = ipaddress.IPv4Address(int(address) & 0xFFFF_FFFF)
    if int(address) > 1 and any(address in n for n in (IPV4_COMPATIBLE, IPV4_TRANSLATED, NAT64)):
        return low  # > 1: :: and ::1 are themselves, not 0.0.0.0 and 0.0.0.1
    return None


# -- requests ---------------------------------------------------------------------------------


async def _follow(
    url: httpx.URL, allowed: frozenset[str], max_bytes: int, timeout: float, max_redirects: int
) -> tuple[httpx.URL, _Reply]:
    """The final address and its reply, every hop checked before it is requested."""
    for _hop in range(max_redirects + 1):
        addresses = await _check(url, allowed)
        reply = await _get(url, addresses, max_bytes, timeout)
        if isinstance(reply, _Reply):
            return url, reply
        url = reply
    raise FetchFailed(f"more than {max_redirects} redirects, the last to {url}")


async def _get(
    url: httpx.URL, addresses: list[IPAddress], max_bytes: int, timeout: float
) -> _Reply | httpx.URL:
    """The reply from the first checked address that accepts a connection, or where it
    redirects to."""
    failure: httpx.ConnectError | None = None
    for address in addresses:
        try:
            return await _request(url, address, max_bytes, timeout)
        except httpx.ConnectError as exc:
            failure = exc
    raise FetchFailed(f"cannot connect to {url.host}: {failure}")


async def _request(
    url: httpx.URL, address: IPAddress, max_bytes: int, timeout: float
) -> _Reply | httpx.URL:
    host = url.raw_host.decode("ascii")
    # The request goes to the checked address; the server still sees the name in Host,
    # and TLS checks the certificate against the name (sni_hostname), not the address.
    target = httpx.URL(scheme=url.scheme, host=str(address), port=url.port, raw_path=url.raw_path)
    headers = {
        "Host": url.netloc.decode("ascii"),
        "User-Agent": USER_AGENT,
        "Accept": ACCEPT,
        "Accept-Encoding": ACCEPT_ENCODING,
    }
    extensions = {"sni_hostname": host} if url.scheme == "https" else {}
    # A client per hop: a pooled TLS connection verified for one name must not carry a
    # request for another. trust_env=False: a proxy from the environment would resolve the
    # name again, past our checks.
    # Loaded once: the service's model client loads it at start (app.transport).
    verify = tls_context(certifi.where())
    async with httpx.AsyncClient(timeout=timeout, trust_env=False, verify=verify) as client:
        request = client.build_request("GET", target, headers=headers, extensions=extensions)
        response = await client.send(request, stream=True)
        try:
            return await _reply(url, response, max_bytes)
        finally:
            await response.aclose()


async def _reply(url: httpx.URL, response: httpx.Response, max_bytes: int) -> _Reply | httpx.URL:
    status = response.status_code
    if status in REDIRECT_STATUSES:
        location = response.headers.get("location")
        if not location:
            raise FetchFailed(f"HTTP {status} redirect without a Location from {url}")
        try:
            return url.join(location)
        except httpx.InvalidURL as exc:
            # httpx itself fails first on most (a network error); the same kind either way.
            raise FetchFailed(f"{url} redirects to an invalid address {location!r}") from exc
    if not 200 <= status < 300:
        raise FetchFailed(f"HTTP {status} {response.reason_phrase} from {url}")
    content_type, charset = _content_type(response.headers.get("content-type", ""))
    if content_type not in HTML_TYPES | TEXT_TYPES:
        shown = content_type or "no content type"
        raise FetchFailed(f"{url} is {shown}, not a web page or text: not read")
    declared = response.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > max_bytes:
        raise FetchFailed(f"{url} is {declared} bytes, more than the {max_bytes} allowed")
    body = await _read_body(response, max_bytes)
    return _Reply(status=status, content_type=content_type, charset=charset, body=body)


def _content_type(header: str) -> tuple[str, str | None]:
    """The media type, lower case, and the charset parameter if there is one."""
    media_type, *params = header.split(";")
    charset = None
    for param in params:
        name, _, value = param.partition("=")
        if name.strip().lower() == "charset":
            charset = value.strip().strip("\"'") or None
    return media_type.strip().lower(), charset


async def _read_body(response: httpx.Response, max_bytes: int) -> bytes:
    """The body, inflated, aborted as soon as it passes max_bytes on the wire or inflated.

    We read raw bytes and inflate them ourselves with an output limit, so a gzip bomb (a few
    kilobytes expanding to gigabytes) never gets past max_bytes + 1 in memory.
    """
    encoding = response.headers.get("content-encoding", "").strip().lower()
    if encoding in ("", "identity"):
        inflater = None
    elif encoding in ("gzip", "x-gzip", "deflate"):
        inflater = zlib.decompressobj(zlib.MAX_WBITS | 32)  # | 32: gzip or zlib header
    else:
        raise FetchFailed(f"unsupported content encoding {encoding!r}")
    on_wire = size = 0
    chunks: list[bytes] = []
    async for raw in response.aiter_raw():
        on_wire += len(raw)
        if on_wire > max_bytes:
            raise FetchFailed(f"the page is larger than {max_bytes} bytes")
        try:
            # One byte over the limit is enough to know it is too big. Without a limit hit,
            # decompress returns all the output of its input: nothing is left to flush.
            data = inflater.decompress(raw, max_bytes - size + 1) if inflater else raw
        except zlib.error as exc:
            raise FetchFailed(f"the page's {encoding} body is corrupt: {exc}") from exc
        size += len(data)
        if size > max_bytes:
            raise FetchFailed(f"the page is larger than {max_bytes} bytes once decompressed")
        chunks.append(data)
    return b"".join(chunks)
