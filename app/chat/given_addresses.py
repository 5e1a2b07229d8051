"""The addresses given to the model: the only ones web_fetch reads.

A page the model reads can ask it to read another address with the user's data in it,
``https://a.tld/v?d=<memory and last messages>``, or ``https://<data>.a.tld/``, which the
name's DNS lookup alone sends out. Nothing in an address tells such data from a real path;
where the address came from does. So web_fetch reads an address only if it appeared in
what the model was given:

- the user's messages, this turn's and the earlier ones (a bare ``example.org/page`` counts
  too, read over https): the user wrote them;
- the search results: each result's address, and any written in its title or snippet;
- the pages read, as the model got them: their final address (after redirects) and text;
- the digests of earlier answers' sources that the history carries: the same web text,
  kept for follow-up questions.

Never counted: whatever a model wrote (its answers, the rolling summary, the facts it put
in memory, its search queries, even when a search engine echoes them back), and the
persona. What is counted was written by the user, or by the web, which has not seen the
conversation: an address that appeared there carries nothing of it. The model only picks
one, and the fetch uses the address as it appeared, not as the model spelled it, so not
even the spelling (case, scheme, a trailing slash) carries anything.

Compared: the host (any case, a trailing dot dropped), the port (the default one dropped),
the path (one trailing slash dropped) and the query, exactly. Not compared: the scheme
(http and https) and the fragment (never sent).

A search engine echoes the query in its results' titles and snippets, and not always as it
was written: percent-encoded otherwise (``%3F``, ``%2f``), cut short, or followed by its own
``…`` or ``”``. So an address the model wrote in a query is recognised in an echo by its
parts (``Planted``): any address there with the same host, or the same path and query once
decoded, is the model's, never given; the digest kept for later turns masks it.

Redirects of an address given are followed, each hop checked by the fetcher's address rules
but not against this list: the server that redirects was reached by an address that carried
nothing of the conversation, so the hop it names carries nothing of it either.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Literal
from urllib.parse import unquote

import httpx

MAX_ADDRESS_CHARS = 2_000
"""The longest address web_fetch reads (real pages' addresses stay well below)."""

Origin = Literal["user", "result", "web"]
"""Who gave an address: the user, a search result's own address, or web text (a snippet,
a page read, an earlier answer's sources)."""
TRUST: dict[Origin, int] = {"user": 0, "result": 1, "web": 2}

URL_IN_TEXT = re.compile(r"https?://[^\s<>\"'`]+", re.IGNORECASE)
# A host name with a dot and a top-level name of letters, then maybe a port and a path: what
# people type without the scheme. Not after a letter, @, / or a dot: no e-mail domain, no
# piece of a longer word.
BARE_ADDRESS = re.compile(
    r"(?<![\w@/.:-])(?:[a-z0-9](?:[a-z0-9-]*[a-z0-9])?\.)+[a-z]{2,63}\.?(?::[0-9]{1,5})?"
    r"(?:/[^\s<>\"'`]*)?",
    re.IGNORECASE,
)
# What text puts right after an address: the end of a sentence, a closing bracket or quote,
# Markdown emphasis, an ellipsis. The address is counted with them and without each of the
# last few.
TRAILING = ".,;:!?)]}>*_'\"…”’»›"
MAX_TRAILING = 3
DEFAULT_PORTS = {"http": 80, "https": 443}
MASK = "(an address from the search query)"


@dataclass(frozen=True)
class AddressKey:
    """An address as compared."""

    host: str
    port: int | None
    path: str
    query: str


@dataclass(frozen=True)
class GivenAddress:
    url: str
    """As it appeared: what is fetched."""
    origin: Origin


def address_key(url: str) -> AddressKey | None:
    """The address as compared, or None when it is no http(s) address with a host, or is
    longer than MAX_ADDRESS_CHARS."""
    url = url.strip()
    if len(url) > MAX_ADDRESS_CHARS:
        return None
    try:
        parsed = httpx.URL(url)
    except (httpx.InvalidURL, UnicodeError):  # UnicodeError: a lone surrogate, from JSON
        return None
    scheme = parsed.scheme.lower()
    host = parsed.raw_host.decode("ascii").lower().removesuffix(".")
    if scheme not in DEFAULT_PORTS or not host:
        return None
    port = None if parsed.port == DEFAULT_PORTS[scheme] else parsed.port
    path = parsed.raw_path.decode("ascii").partition("?")[0] or "/"
    path = path[:-1] if path.endswith("/") else path
    return AddressKey(host, port, path, parsed.query.decode("ascii"))


@dataclass
class GivenAddresses:
    found: dict[AddressKey, GivenAddress] = field(default_factory=dict)

    def add(self, url: str, origin: Origin) -> None:
        """Count an address. The first spelling is kept; the most trusted origin wins."""
        key = address_key(url)
        if key is None:
            return
        known = self.found.get(key)
        if known is None:
            self.found[key] = GivenAddress(url.strip(), origin)
        elif TRUST[origin] < TRUST[known.origin]:
            self.found[key] = GivenAddress(known.url, origin)

    def add_text(
        self, text: str, origin: Origin, *, bare: bool = False, planted: Planted | None = None
    ) -> None:
        """Count every address written in a text, except echoes of one ``planted``; with
        ``bare``, also those written without http(s):// (read over https)."""
        for url in addresses_in(text, bare=bare):
            if planted is None or not planted.echoed(url):
                self.add(url, origin)

    def get(self, url: str) -> GivenAddress | None:
        key = address_key(url)
        return None if key is None else self.found.get(key)


def addresses_in(text: str, *, bare: bool = False) -> list[str]:
    """The addresses written in a text, each also without what may have followed it (a
    full stop, a closing bracket); with ``bare``, also host names and paths written without
    a scheme, given https://."""
    found = [v for match in URL_IN_TEXT.findall(text) for v in _endings(match)]
    if bare:
        rest = URL_IN_TEXT.sub(" ", text)
        found += ["https://" + v for match in BARE_ADDRESS.findall(rest) for v in _endings(match)]
    return found


def _endings(match: str) -> list[str]:
    """An address without the last few characters that text may have put after it, one,
    two... then as matched: ``(see https://a.org/P_(x)).`` gives ``https://a.org/P_(x)``
    among others. The shortest first: it is the spelling kept when they compare equal."""
    variants = [match]
    while variants[-1][-1] in TRAILING and len(variants) <= MAX_TRAILING:
        variants.append(variants[-1][:-1])
    return variants[::-1]


@dataclass(frozen=True)
class Parts:
    """An address as an echo of it is recognised: its host, and its path and query
    percent-decoded, in lower case, without a trailing slash."""

    host: str
    target: str


def address_parts(url: str) -> Parts | None:
    key = address_key(url)
    if key is None:
        return None
    target = key.path + (f"?{key.query}" if key.query else "")
    for _ in range(3):  # %253F is %3F is ?
        target = unquote(target)
    return Parts(unquote(key.host), target.lower().rstrip("/"))


@dataclass
class Planted:
    """The addresses the model wrote in this answer's search queries, by their parts."""

    parts: set[Parts] = field(default_factory=set)

    def add(self, query: str) -> None:
        """Every address written in a query, with or without a scheme."""
        found = (address_parts(url) for url in addresses_in(query, bare=True))
        self.parts |= {parts for parts in found if parts is not None}

    def written(self, url: str) -> bool:
        """The address is one of them, however spelt, or carries one in its path or query
        (a result's own address: a page named after the query repeats it)."""
        parts = address_parts(url) if self.parts else None
        return parts is not None and (parts in self.parts or self.carried(parts))

    def echoed(self, url: str) -> bool:
        """An address in a result's title or snippet that may be an echo of one of them:
        the same host, or the same path and query (more than a bare slash), or one of them
        carried in its own path or query."""
        parts = address_parts(url) if self.parts else None
        return parts is not None and (
            any(
                parts.host == own.host or (own.target and parts.target.startswith(own.target))
                for own in self.parts
            )
            or self.carried(parts)
        )

    def carried(self, parts: Parts) -> bool:
        """One of them, host and all, inside this address's decoded path or query."""
        return any(f"{own.host}{own.target}" in parts.target for own in self.parts)


def masked(text: str, planted: Planted) -> str:
    """The text with every echo of an address the model planted in a query replaced by a
    note: a digest of this answer's results must not carry it to later turns, where it
    would count as the web's."""
    if not planted.parts:
        return text

    def mask(match: re.Match[str]) -> str:
        hit = any(planted.echoed(v) for v in _endings(match.group(0)))
        return MASK if hit else match.group(0)

    return URL_IN_TEXT.sub(mask, text)
