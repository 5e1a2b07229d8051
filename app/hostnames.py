"""Host names as a reader takes them, for text written by a model or a page: the host a
link's text names (compared with where the link goes), and whether a memory fact names
one at all.

A reader does not see format characters (Unicode category Cf: zero-width spaces and
joiners, soft hyphens, direction marks) nor a host's trailing dot, and reads "PayPal.com",
"paypal.com." and "pаypal.com" (a Cyrillic a) as the same name; DNS reads the last as
another (xn--pypal-4ve.com). So a host is compared as DNS takes it: without those, in
lower case, in IDNA's ASCII form. The page's renderer (app/api/static/js/markdown-inline.js)
applies the same rule to the links it shows.
"""

from __future__ import annotations

import ipaddress
import re
import unicodedata

import idna
from publicsuffixlist import PublicSuffixList

# Every suffix under which a name can be registered (com, co.uk, github.io, рф), from the
# list the browsers use. Unknown suffixes (txt, js, 11) are not domains: every delegated
# top-level domain is on the list. Read once, at import (70 ms), not on the event loop.
PUBLIC_SUFFIXES = PublicSuffixList(accept_unknown=False)
# The dots IDNA reads as the separator of labels besides "." (ideographic, fullwidth,
# halfwidth ideographic): "evil。com" is evil.com to a browser.
LABEL_DOTS = str.maketrans(dict.fromkeys("\u3002\uff0e\uff61", "."))
HOST_LIKE = re.compile(r"[\w.-]+")
NUMERIC_HOST = re.compile(r"(?:(?:0x[0-9a-f]*|\d+)\.){3}(?:0x[0-9a-f]*|\d+)", re.I)
"""Four numbers with dots, any of them octal (leading 0) or hex: an IPv4 address as a
browser reads it."""


def visible(text: str) -> str:
    """The text as a reader sees it: without format characters (Cf), IDNA's other dots
    as "."."""
    return "".join(c for c in text if unicodedata.category(c) != "Cf").translate(LABEL_DOTS)


def normalised_host(host: str) -> str:
    """A host as DNS takes it: without format characters and a trailing dot, lower case,
    IDNA's ASCII form (a name that is no valid IDN, say with an underscore, is kept in
    lower case)."""
    name = visible(host).rstrip(".")
    try:
        return idna.encode(name, uts46=True).decode("ascii").rstrip(".")
    except UnicodeError:  # idna.IDNAError is one
        return name.casefold()


def names_a_host(text: str) -> bool:
    """Whether the text names a host, bare or in an address: a domain under a public
    suffix (evil-site.com, sub.example.org, пример.рф, xn--e1afmkfd.xn--p1ai, example.com.)
    or an IP address (IPv4 in any of its dotted spellings, IPv6). Text with dots that name
    no registrable domain stays ("Python 3.11", "e.g.", "v2.0", notes.txt, Node.js); a
    file name whose extension is also a country's domain (main.py, README.md) counts, as a
    browser would read it."""
    plain = unicodedata.normalize("NFKC", visible(text))
    if any(is_ip_address(word.strip("[](){}<>.,;!?\"'")) for word in plain.split()):
        return True
    return any(is_domain(word.strip(".-_")) for word in HOST_LIKE.findall(plain))


def is_ip_address(word: str) -> bool:
    try:
        ipaddress.ip_address(word.split("%")[0])  # an IPv6 scope (fe80::1%eth0) aside
    except ValueError:
        return False
    return True


def is_domain(word: str) -> bool:
    if "." not in word:
        return False
    if NUMERIC_HOST.fullmatch(word):
        return True
    return PUBLIC_SUFFIXES.privatesuffix(normalised_host(word)) is not None
