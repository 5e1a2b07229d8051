# SPDX-License-Identifier: AGPL-3.0-or-later
"""Brave Search API (web), through the official API with a subscription token.

Brave documents the endpoint at
https://api-dashboard.search.brave.com/documentation/services/web-search.

Unlike an engine that scrapes Brave's result pages (blocked after a dozen or so
queries), this one calls ``GET {base_url}/res/v1/web/search`` and, compared with a
stock engine:

- asks for ``extra_snippets`` and joins up to five of them to the description,
  so each result carries about four times more text;
- prefixes each result's content with its publication date (``YYYY-MM-DD``) and
  sets ``publishedDate``, so an old tutorial can be told from this year's;
- sends the SearXNG locale as Brave's ``country`` / ``search_lang`` / ``ui_lang``;
- sends the API's real parameters: ``offset`` is a page index (0..9), ``count`` is
  at most 20, time ranges are ``freshness``, safe search is ``off|moderate|strict``;
- maps Brave's errors: 429 suspends the engine for the delay in
  ``X-RateLimit-Reset`` of the window that ran out (``RATE_LIMITED``: the second's,
  ``QUOTA_LIMITED``: the month's); other errors name Brave's error code and detail;
- writes the plan Brave states in its ``X-RateLimit-*`` headers, on every answer, to
  the JSON file ``SEARCH_PLAN_FILE`` (written atomically; the chat service reads it, so
  it learns the plan without spending a query: docs/search.md);
- hands SearXNG typed results (``MainResult``) where the running version merges them
  without losing fields (the newest), dicts on 2025.8 (``typed_results``).

Configuration (``settings.yml``):

.. code:: yaml

  - name: braveweb
    engine: brave_api
    api_key: ""           # empty: BRAVE_API_KEY, or the file BRAVE_API_KEY_FILE names
    base_url: ""          # empty: BRAVE_API_URL, else https://api.search.brave.com
    results_per_page: 20  # Brave's ``count``, 1..20

``api_key``
  The ``X-Subscription-Token``. SearXNG's YAML has no variable expansion, so an
  empty value means "take it from the environment".

``base_url``
  Root of the API (``https://api.search.brave.com``) or one of its endpoints
  (``https://api.search.brave.com/res/v1/web/search``): the part from ``/res/v1`` on is
  dropped. The tests point it at a fake on loopback (plain http then needs
  ``enable_http: true``).

``results_per_page``
  Results per page; Brave refuses more than 20.

``name``, ``shortcut``
  ``braveweb``, and the shortcut ``bweb`` this module sets (an entry may repeat it):
  the chat service's ``doctor`` reads it in SearXNG's ``/config`` to tell this engine from
  SearXNG's own ``braveapi`` (from 2026), which sends Brave neither the locale nor the
  extra snippets. ``braveapi`` was this engine's name before; an entry that still says
  it is renamed by ``python -m app searxng-settings``, with a warning, for one release.

Without a key the engine raises on each request; ``python -m app searxng-settings``
then disables it and lists key-free engines instead.
"""

from __future__ import annotations

import html
import json
import os
import re
import threading
import time
from datetime import datetime
from functools import cache
from typing import TYPE_CHECKING, Any
from urllib.parse import urlencode

if TYPE_CHECKING:
    from searx.result_types import EngineResults

about = {
    "website": "https://search.brave.com/",
    "wikidata_id": "Q22906900",
    "official_api_documentation": (
        "https://api-dashboard.search.brave.com/documentation/services/web-search"
    ),
    "use_official_api": True,
    "require_api_key": True,
    "results": "JSON",
}

categories = ["general", "web"]
shortcut = "bweb"
"""SearXNG's shortcut, set here so that its /config shows which module an engine is."""
paging = True
max_page = 10
time_range_support = True
safesearch = True

api_key: str = ""
"""X-Subscription-Token; empty: BRAVE_API_KEY from the environment."""
base_url: str = ""
"""API root; empty: BRAVE_API_URL from the environment, else the official API."""
results_per_page: int = 20
"""Brave's ``count``, 1..20."""

OFFICIAL_BASE_URL = "https://api.search.brave.com"
API_PATH = "/res/v1"
SEARCH_PATH = API_PATH + "/web/search"
MAX_EXTRA_SNIPPETS = 5
NO_KEY = "no Brave API key: set BRAVE_API_KEY (or api_key in settings.yml)"
SNIPPET_SEPARATOR = " … "
DATE_SEPARATOR = " — "
PROBE_URL = "https://example.org/"
"""The address of the two results typed_results() merges (never sent anywhere)."""

FRESHNESS = {"day": "pd", "week": "pw", "month": "pm", "year": "py"}
SAFESEARCH = {0: "off", 1: "moderate", 2: "strict"}

# Brave's own codes where they differ from plain ISO 639-1; languages absent here and
# from SEARCH_LANGS are not sent at all (Brave answers 422 to an unknown search_lang).
SEARCH_LANG_EXCEPTIONS = {
    "ja": "jp",
    "zh": "zh-hans",
    "zh-cn": "zh-hans",
    "zh-tw": "zh-hant",
    "zh-hk": "zh-hant",
    "pt": "pt-pt",
    "pt-pt": "pt-pt",
    "pt-br": "pt-br",
    "en-gb": "en-gb",
    "nb": "nb",
    "nn": "nb",
    "no": "nb",
}
SEARCH_LANGS = frozenset(
    "ar eu bn bg ca zh-hans zh-hant hr cs da nl en en-gb et fi fr gl de gu he hi hu is it jp"
    " kn ko lv lt ms ml mr nb pl pt-br pt-pt pa ro ru sr sk sl es sv ta te th tr uk vi".split()
)
COUNTRIES = frozenset(
    "AR AU AT BE BR CA CL DK FI FR DE HK IN ID IT JP KR MY MX NL NZ NO CN PL PT PH RU SA ZA"
    " ES SE CH TW TR GB US".split()
)
UI_LANGS = frozenset(
    "es-AR en-AU de-AT nl-BE fr-BE pt-BR en-CA fr-CA es-CL da-DK fi-FI fr-FR de-DE zh-HK"
    " en-IN en-ID it-IT ja-JP ko-KR en-MY es-MX nl-NL en-NZ no-NO zh-CN pl-PL en-PH ru-RU"
    " en-ZA es-ES sv-SE fr-CH de-CH zh-TW tr-TR en-GB en-US es-US".split()
)

TAG = re.compile(r"<[^>]+>")
SPACE = re.compile(r"\s+")
ISO_DATE = re.compile(r"^(\d{4}-\d{2}-\d{2})")


def locale_params(locale: str | None) -> dict[str, str]:
    """Brave's ``country`` / ``search_lang`` / ``ui_lang`` for a SearXNG locale.

    ``pl-PL`` gives all three, ``pl`` only ``search_lang``, ``all`` / ``auto`` / empty
    none (Brave then answers as for the US in English).
    """
    if not locale or locale.lower() in ("all", "auto"):
        return {}
    language, _, territory = locale.partition("-")
    language, territory = language.lower(), territory.upper()
    params = {}
    if territory in COUNTRIES:
        params["country"] = territory
    search_lang = SEARCH_LANG_EXCEPTIONS.get(f"{language}-{territory}".lower().rstrip("-"))
    search_lang = search_lang or SEARCH_LANG_EXCEPTIONS.get(language, language)
    if search_lang in SEARCH_LANGS:
        params["search_lang"] = search_lang
    if f"{language}-{territory}" in UI_LANGS:
        params["ui_lang"] = f"{language}-{territory}"
    return params


def request_params(
    query: str,
    *,
    locale: str | None,
    pageno: int = 1,
    time_range: str | None = None,
    safe_search: int = 0,
    count: int = 20,
) -> dict[str, str]:
    """The query string sent to Brave, booleans written the way the API expects."""
    params = {
        "q": query,
        "count": str(max(1, min(int(count), 20))),
        "offset": str(max(0, min(pageno - 1, max_page - 1))),
        "safesearch": SAFESEARCH.get(safe_search, "moderate"),
        "text_decorations": "false",
        "extra_snippets": "true",
        "spellcheck": "false",
    }
    if time_range in FRESHNESS:
        params["freshness"] = FRESHNESS[time_range]
    params.update(locale_params(locale))
    return params


def clean_text(text: str | None) -> str:
    """Plain text: tags dropped, entities decoded, whitespace collapsed."""
    return SPACE.sub(" ", html.unescape(TAG.sub("", text or ""))).strip()


def published_date(result: dict[str, Any]) -> datetime | None:
    """The publication date from ``page_age``, else from ``age`` when it is absolute.

    ``age`` is often relative ("2 days ago"); only an absolute date is trusted.
    """
    match = ISO_DATE.match(result.get("page_age") or "")
    if match:
        return datetime.fromisoformat(match.group(1))
    age = (result.get("age") or "").strip()
    for pattern in ("%B %d, %Y", "%b %d, %Y", "%Y-%m-%d", "%d %B %Y"):
        try:
            return datetime.strptime(age, pattern)
        except ValueError:
            continue
    return None


def joined_content(result: dict[str, Any]) -> str:
    """Description plus up to five extra snippets, without repeats."""
    parts: list[str] = []
    seen: set[str] = set()
    for text in [result.get("description"), *(result.get("extra_snippets") or [])]:
        text = clean_text(text)
        key = text.casefold()
        if not text or key in seen or any(key in other for other in seen):
            continue
        parts.append(text)
        seen.add(key)
        if len(parts) > MAX_EXTRA_SNIPPETS:
            break
    return SNIPPET_SEPARATOR.join(parts)


def format_result(result: dict[str, Any]) -> dict[str, Any] | None:
    """One SearXNG result from one Brave web result (None when it has no URL)."""
    if not result.get("url"):
        return None
    content = joined_content(result)
    date = published_date(result)
    if date:
        content = date.strftime("%Y-%m-%d") + DATE_SEPARATOR + content
    formatted = {"url": result["url"], "title": clean_text(result.get("title")), "content": content}
    if date:
        formatted["publishedDate"] = date
    return formatted


def header_numbers(headers: Any, name: str) -> list[int]:
    """The integers of a comma-pair header (``X-RateLimit-Limit: 50, 0``), in order."""
    values = []
    for part in (headers.get(name) or "").split(","):
        try:
            values.append(int(part.strip()))
        except ValueError:
            continue
    return values


def rate_limit_reset(headers: Any, code: str | None = None) -> int | None:
    """Seconds until the exhausted window resets, from Brave's comma-pair headers.

    ``X-RateLimit-Reset: 1, 2528987`` pairs with ``-Remaining`` and ``-Limit``: the
    per-second window first, the month's second. Brave's error code says which ran out
    (``RATE_LIMITED``: the second's, ``QUOTA_LIMITED``: the month's); without one, a
    window with remaining 0 and a non-zero limit is the one that ran out (a limit of 0
    means no cap for that window).
    """
    resets = header_numbers(headers, "x-ratelimit-reset")
    remaining = header_numbers(headers, "x-ratelimit-remaining")
    limits = header_numbers(headers, "x-ratelimit-limit")
    window = {"RATE_LIMITED": 0, "QUOTA_LIMITED": 1}.get(code or "")
    if window is not None and window < len(resets):
        return resets[window]
    exhausted = [
        reset
        for i, reset in enumerate(resets)
        if i < len(remaining) and remaining[i] == 0 and (i >= len(limits) or limits[i] > 0)
    ]
    candidates = exhausted or resets
    return max(candidates) if candidates else None


def error_message(status: int, body: Any) -> str:
    """Brave's error code and detail, with the fields a VALIDATION error names."""
    error = body.get("error") if isinstance(body, dict) else None
    if not isinstance(error, dict):
        return f"Brave API HTTP {status}"
    message = f"Brave API {status} {error.get('code', 'ERROR')}: {error.get('detail', '')}".strip()
    problems = [
        f"{'.'.join(str(p) for p in item.get('loc', [])[1:])}: {item.get('msg', '')}"
        for item in (error.get("meta") or {}).get("errors") or []
        if isinstance(item, dict)
    ]
    return message + (f" ({'; '.join(problems)})" if problems else "")


def error_code(body: Any) -> str | None:
    """Brave's error code (``RATE_LIMITED``, ``QUOTA_LIMITED``, ...), if the body has one."""
    error = body.get("error") if isinstance(body, dict) else None
    code = error.get("code") if isinstance(error, dict) else None
    return code if isinstance(code, str) else None


def plan_record(
    headers: Any, status: int, code: str | None, now: float | None = None
) -> dict[str, Any] | None:
    """What the answer's ``X-RateLimit-*`` headers say of the plan, as the chat service
    reads it (app/search/plan.py); None when the answer has none of them.

    ``limit`` / ``remaining`` / ``reset`` are the comma pairs as numbers (per second,
    per month); ``limited`` is Brave's code on a 429 and ``limited_until`` the time its
    window resets.
    """
    limits = header_numbers(headers, "x-ratelimit-limit")
    if not limits:
        return None
    now = time.time() if now is None else now
    resets = header_numbers(headers, "x-ratelimit-reset")
    limited = code if status == 429 else None
    reset = rate_limit_reset(headers, code) if limited else None
    return {
        "limit": limits,
        "remaining": header_numbers(headers, "x-ratelimit-remaining"),
        "reset": resets,
        "policy": headers.get("x-ratelimit-policy") or "",
        "read_at": now,
        "status": status,
        "limited": limited or (f"HTTP {status}" if status == 429 else None),
        "limited_until": now + reset if reset is not None else None,
    }


def plan_path() -> str:
    """Where the plan is written: SEARCH_PLAN_FILE (empty: nowhere)."""
    return os.environ.get("SEARCH_PLAN_FILE", "")


def write_plan(record: dict[str, Any], path: str) -> None:
    """The record written atomically (a reader sees the old file or the new one), readable
    by the chat service (under Compose another user: mode 0644)."""
    temporary = f"{path}.{os.getpid()}.{threading.get_ident()}.tmp"
    try:
        with open(temporary, "w", encoding="utf-8") as out:
            json.dump(record, out)
        os.chmod(temporary, 0o644)
        os.replace(temporary, path)
    except OSError as exc:
        log = globals().get("logger")
        if log is not None:
            log.warning("cannot write the plan to %s: %s", path, exc)


def record_plan(resp: Any, code: str | None) -> None:
    path = plan_path()
    record = plan_record(resp.headers, resp.status_code, code) if path else None
    if record is not None:
        write_plan(record, path)


def token(configured: str | None = None) -> str:
    """api_key (or the ``configured`` key of another module's entry), else BRAVE_API_KEY,
    else what the file BRAVE_API_KEY_FILE names holds (Compose's secret, which the
    environment never shows)."""
    key = (api_key if configured is None else configured) or os.environ.get("BRAVE_API_KEY", "")
    path = os.environ.get("BRAVE_API_KEY_FILE", "").strip()
    if key or not path:
        return key
    try:
        with open(path, encoding="utf-8") as file:
            return file.read().strip()
    except (OSError, UnicodeDecodeError):
        return ""  # no key: every query says so, and init() logs it


def api_root(configured: str | None = None) -> str:
    """The API's root, from ``base_url`` (or the ``configured`` one of another module's
    entry) or BRAVE_API_URL given either as the root or as one of its endpoints
    (``.../res/v1/web/search``, as upstream's engine takes it)."""
    url = base_url if configured is None else configured
    given = (url or os.environ.get("BRAVE_API_URL") or OFFICIAL_BASE_URL).strip()
    return given.partition(API_PATH)[0].rstrip("/")


def init(engine_settings: dict[str, Any] | None = None) -> bool:
    """Checked once, when SearXNG loads the engine: a missing key is named in SearXNG's
    log at start (each query still says so too, since that is what a user sees)."""
    if token():
        return True
    log = globals().get("logger")  # SearXNG gives every engine module its logger
    if log is not None:
        log.error(NO_KEY)
    return False


def request(query: str, params: dict[str, Any]) -> None:
    """Fill in SearXNG's request: URL with Brave's parameters, token header."""
    params["url"] = (
        api_root()
        + SEARCH_PATH
        + "?"
        + urlencode(
            request_params(
                query,
                locale=params.get("searxng_locale"),
                pageno=params.get("pageno", 1),
                time_range=params.get("time_range"),
                safe_search=params.get("safesearch", 0),
                count=results_per_page,
            )
        )
    )
    if not token():
        raise searx_exceptions().SearxEngineAPIException(NO_KEY)
    params["headers"]["Accept"] = "application/json"
    params["headers"]["X-Subscription-Token"] = token()
    # Errors are read from Brave's JSON body below, not from the bare status code.
    params["raise_for_httperror"] = False


def response(resp: Any) -> EngineResults:
    """SearXNG results from Brave's answer, or the SearXNG exception for its error; the
    plan its headers state is written for the chat service either way."""
    if resp.status_code != 200:
        raise_for_brave_error(resp)
    record_plan(resp, None)
    data = resp.json()
    from searx.result_types import EngineResults  # on use: the functions above need no SearXNG

    results = EngineResults()
    typed = typed_results()
    for result in (data.get("web") or {}).get("results") or []:
        formatted = format_result(result)
        if formatted:
            results.add(results.types.MainResult(**formatted) if typed else formatted)
    return results


@cache
def typed_results() -> bool:
    """Whether the running SearXNG takes our results typed (``MainResult``) or as dicts.

    The newest SearXNG builds its own engines' results typed and keeps a dict only as
    "LegacyResult, internal use only". 2025.8 has ``MainResult`` too, but its merge of two
    typed results (one page found by two engines) overwrote each field already set with
    the other result's (``Result.defaults_from``): our extra snippets and date would go
    whenever another typed engine found the page too, so there results stay dicts. Decided
    by that merge itself, once, so a release in between is judged by what it does.
    """
    try:
        from searx.result_types import MainResult
    except ImportError:  # older than typed results
        return False
    kept = MainResult(url=PROBE_URL, content="ours")
    kept.defaults_from(MainResult(url=PROBE_URL, content="theirs"))
    return bool(kept.content == "ours")


def searx_exceptions() -> Any:
    # Imported on use so that the pure functions above import without SearXNG.
    from searx import exceptions

    return exceptions


def raise_for_brave_error(resp: Any) -> None:
    exceptions = searx_exceptions()
    try:
        body = resp.json()
    except ValueError:
        body = None
    message = error_message(resp.status_code, body)
    code = error_code(body)
    record_plan(resp, code)
    if resp.status_code == 429:
        # SearXNG suspends the engine this long (without it: an hour, its default).
        raise exceptions.SearxEngineTooManyRequestsException(
            suspended_time=rate_limit_reset(resp.headers, code), message=message
        )
    if body is None:
        message += ": " + clean_text(resp.text)[:200]
    raise exceptions.SearxEngineAPIException(message)
