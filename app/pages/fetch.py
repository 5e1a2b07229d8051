"""web_fetch: a page's main text for the model, fetched safely (docs/security.md).

Every hop, redirects included, is checked by app.pages.addresses before any connection.
The connection then goes to an address that was checked, never to a fresh DNS answer (which
a rebinding attacker could point inside), and the reply is capped in time, in bytes on the
wire, in bytes once decompressed, and in content type. The HTML is read by
app.pages.extract, in the service through app.pages.worker's process.
"""

from __future__ import annotations

import asyncio
import zlib
from collections.abc import Awaitable, Callable
from dataclasses import asdict, dataclass

import certifi
import httpx

from app.config import allow_key
from app.pages import addresses
from app.pages.addresses import IPAddress
from app.pages.charset import decode_text
from app.pages.errors import FetchFailed
from app.pages.extracted import Extracted, extract_here
from app.tls import tls_context
from app.webtext import untrusted

REDIRECT_STATUSES = frozenset({301, 302, 303, 307, 308})

# A plain browser's request: some sites answer unknown clients with an error page.
USER_AGENT = "Mozilla/5.0 (X11; Linux x86_64; rv:128.0) Gecko/20100101 Firefox/128.0"
ACCEPT = "text/html,application/xhtml+xml,application/xml;q=0.9,text/plain;q=0.8,*/*;q=0.5"
# Only encodings we inflate ourselves, so that every byte is counted (see _read_body).
ACCEPT_ENCODING = "gzip, deflate"

HTML_TYPES = frozenset({"text/html", "application/xhtml+xml"})
TEXT_TYPES = frozenset(
    {"text/plain", "text/markdown", "text/x-markdown", "text/xml", "application/xml"}
    | {"application/json", "application/rss+xml", "application/atom+xml"}
)

# Estimating tokens as characters / 3 over-counts English (about 4 per token): the cap errs
# towards leaving room in the model's context.
CHARS_PER_TOKEN = 3


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
    return await asyncio.to_thread(extract_here, body, url, charset)


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
    # httpx's errors become FetchFailed here, once for every hop (_get only moves on to
    # the next checked address when one refuses the connection).
    try:
        async with asyncio.timeout(timeout):
            final, reply = await _follow(
                addresses.parse(url), allowed, max_bytes, timeout, max_redirects
            )
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


@dataclass(frozen=True)
class Part:
    """One part of a long page's text (the MCP server's web_fetch reads a page in parts)."""

    text: str
    start: int
    """Where the part starts in the page's text, in characters."""
    end: int
    total: int
    """The page's text in characters."""
    parts_left: int
    """About how many parts of this size follow."""


def page_part(page: Page, start: int = 0, max_tokens: int = 12_000) -> Part:
    """The part of the page's text from `start`, within about max_tokens, cut at a
    paragraph, line or word boundary where one is near."""
    text = page.text
    start = min(max(start, 0), len(text))
    room = max(max_tokens * CHARS_PER_TOKEN, 1)
    if len(text) - start <= room:
        end = len(text)
    else:
        end = start + (_cut_point(text[start : start + room + 1], room) or room)
    left = len(text) - end
    return Part(text[start:end], start, end, len(text), -(-left // room) if left else 0)


def part_for_model(page: Page, start: int, max_tokens: int) -> str:
    """A part of the page as a model reads it: where it lies and how to read the rest
    (ours), then its title, address and text as untrusted web data."""
    part = page_part(page, start, max_tokens)
    header = (f"Title: {page.title}\n" if page.title else "") + f"URL: {page.url}\n\n"
    body = part.text or (
        "(the page has no readable text)" if not page.text else "(nothing after this point)"
    )
    return f"{part_line(part)}\n\n{untrusted(header + body, 'web_fetch')}"


def part_line(part: Part) -> str:
    """Where this part lies in the page, and how to read the rest."""
    where = f"characters {part.start:,}-{part.end:,} of {part.total:,}"
    if not part.parts_left:
        return f"The page's text, {where}: the end of the page."
    return (
        f"The page's text, {where}; about {part.parts_left} more part(s): call web_fetch "
        f"again with start={part.end} for the next."
    )


def _cut_point(text: str, room: int) -> int:
    """Cut at a paragraph, else a line, else a word boundary near room, else at room."""
    for separator in ("\n\n", "\n", " "):
        at = text.rfind(separator, 0, room + 1)
        if at >= room * 0.8:
            return at
    return room


# -- requests ---------------------------------------------------------------------------------


async def _follow(
    url: httpx.URL, allowed: frozenset[str], max_bytes: int, timeout: float, max_redirects: int
) -> tuple[httpx.URL, _Reply]:
    """The final address and its reply, every hop checked before it is requested."""
    for _hop in range(max_redirects + 1):
        checked = await addresses.check(url, allowed)
        reply = await _get(url, checked, max_bytes, timeout)
        if isinstance(reply, _Reply):
            return url, reply
        url = reply
    raise FetchFailed(f"more than {max_redirects} redirects, the last to {url}")


async def _get(
    url: httpx.URL, checked: list[IPAddress], max_bytes: int, timeout: float
) -> _Reply | httpx.URL:
    """The reply from the first checked address that accepts a connection, or where it
    redirects to."""
    failure: httpx.ConnectError | None = None
    for address in checked:
        try:
            return await _request(url, address, max_bytes, timeout)
        except httpx.ConnectError as exc:
            failure = exc
    # raw_host: url.host decodes IDNA, and raises on a name such as xn--a.org.
    raise FetchFailed(f"cannot connect to {url.raw_host.decode('ascii')}: {failure}")


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
        try:
            response = await client.send(request, stream=True)
        except (httpx.InvalidURL, UnicodeError) as exc:
            # httpx builds the next request of a redirect even when it does not follow it,
            # and raises these, not an httpx.HTTPError, for a Location it cannot build
            # (http:foo, http://xn--/): a failure of this page like any other.
            raise FetchFailed(f"{url} redirects to an invalid address ({exc})") from exc
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
