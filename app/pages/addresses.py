"""The address policy of web_fetch: which hosts and addresses are never reached
(docs/security.md).

The address comes from the model, so from whoever wrote the pages and results it has read:
it may point at this machine, the LAN or a cloud metadata service. So every hop is checked
before any connection: http(s) only, ports 80/443, and a host whose every address is public.
A host written as an IP address, in any spelling a browser reads, is judged as that address
and never looked up; a name is refused before its lookup when it can only be internal.
`serve` asks here too whether an allowed host is the service itself (`names_this_service`).
"""

from __future__ import annotations

import asyncio
import ipaddress
import re
import socket
from urllib.parse import unquote

import httpx

from app.config import allow_key, host_port
from app.pages.errors import FetchFailed, FetchRefused

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address

DEFAULT_PORTS = {"http": 80, "https": 443}
STANDARD_PORTS = frozenset(DEFAULT_PORTS.values())

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


def parse(url: str) -> httpx.URL:
    try:
        return httpx.URL(url.strip())
    except (httpx.InvalidURL, UnicodeError) as exc:  # UnicodeError: a lone surrogate, from JSON
        raise FetchRefused(f"not a valid address: {url!r} ({exc})") from exc


async def check(url: httpx.URL, allowed: frozenset[str]) -> list[IPAddress]:
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
        return await asyncio.to_thread(lookup, host, port)
    except socket.gaierror as exc:
        raise FetchFailed(f"cannot resolve {host}: {exc.strerror}") from exc


def lookup(host: str, port: int) -> list[IPAddress]:
    """The system resolver's addresses for a host name, in its order, each once."""
    infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
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
    if not HOST_NAME.fullmatch(host) or any(len(label) > 63 for label in host.split(".")):
        # A label over 63 characters: the resolver's IDNA codec would raise, not refuse.
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


def names_this_service(entry: str, port: int) -> bool:
    """Whether a FETCH_ALLOW_HOSTS entry (host:port) may reach the service itself, which
    listens on `port`: through web_fetch, the model would read /api/conversations. The
    host is read as the fetcher reads it (127.1, 0x7f.1, 127.0.0.1., [::ffff:127.0.0.1] are
    127.0.0.1; localhost. is localhost), and any address of this machine counts, whichever
    one the service listens on: 0.0.0.0 reaches a service on 127.0.0.1."""
    host, _, entry_port = allow_key(entry).rpartition(":")
    if int(entry_port) != port:
        return False
    host = host.removeprefix("[").removesuffix("]")
    try:
        literal = _literal(host)
    except FetchRefused:
        return False  # the fetcher reads no such host, allowed or not
    if literal is not None:
        return on_this_machine(literal)
    name = host.removesuffix(".")
    if name == "localhost" or name.endswith(".localhost"):
        return True  # this machine by definition (RFC 6761), whatever the resolver says
    try:
        return any(on_this_machine(address) for address in lookup(name, port))
    except (OSError, UnicodeError):
        return False  # the fetcher cannot resolve it either


def on_this_machine(address: IPAddress) -> bool:
    """Whether a connection to the address stays on this machine: a loopback or
    unspecified address (in any IPv6 form), or one of its own (a bind succeeds only on
    those)."""
    if isinstance(address, ipaddress.IPv6Address):
        address = _embedded_ipv4(address) or address
    if address.is_loopback or address.is_unspecified:
        return True
    family = socket.AF_INET6 if address.version == 6 else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as probe:
        try:
            probe.bind((str(address), 0))
        except OSError:
            return False
    return True
