# SPDX-License-Identifier: AGPL-3.0-or-later
"""Brave's LLM Context API: a search whose results carry their pages' text.

``GET {base_url}/res/v1/llm/context`` answers, for the top results of one search, the
passages of each page relevant to the query (text, tables, code) as Brave extracted them:
the pages are read by Brave, never from this network. Each SearXNG result is one address
(``grounding.generic``): its title, and as its content the publication date (from
``sources[url].age``) then its passages joined by ``CHUNK_SEPARATOR``.

Everything but the endpoint is our web engine's (``brave_api.py``, beside this file,
loaded by path): the key and the API root, the locale as Brave's ``country`` /
``search_lang`` (``ui_lang`` is no parameter of this endpoint), the 429 suspension for the
window that ran out, Brave's error code and detail, and the plan written to
``SEARCH_PLAN_FILE`` from every answer's headers.

Configuration (``settings.yml``):

.. code:: yaml

  - name: bravellm
    engine: brave_llm
    shortcut: bllm
    api_key: ""           # empty: BRAVE_API_KEY, or the file BRAVE_API_KEY_FILE names
    base_url: ""          # empty: BRAVE_API_URL (root or endpoint), else the official API
    max_urls: 8           # Brave's maximum_number_of_urls, 1..50

The token caps are the environment's, like the key: ``BRAVE_CONTEXT_TOKENS`` (Brave's
``maximum_number_of_tokens``, 1,024..32,768, default 8,192) and
``BRAVE_CONTEXT_TOKENS_PER_URL`` (``maximum_number_of_tokens_per_url``, 512..8,192,
default 4,096).
"""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any
from urllib.parse import urlencode

if TYPE_CHECKING:
    from searx.result_types import EngineResults

about = {
    "website": "https://search.brave.com/",
    "wikidata_id": "Q22906900",
    "official_api_documentation": (
        "https://api-dashboard.search.brave.com/documentation/services/llm-context"
    ),
    "use_official_api": True,
    "require_api_key": True,
    "results": "JSON",
}

categories = ["general", "web"]
shortcut = "bllm"
"""SearXNG's shortcut, set here as our web engine sets its own."""
paging = False  # the endpoint has no offset: one search, its best pages
time_range_support = True
safesearch = False

api_key: str = ""
"""X-Subscription-Token; empty: BRAVE_API_KEY from the environment."""
base_url: str = ""
"""API root or endpoint; empty: BRAVE_API_URL from the environment, else the official API."""
max_urls: int = 8
"""Brave's ``maximum_number_of_urls``, 1..50."""

CONTEXT_PATH = "/res/v1/llm/context"
CHUNK_SEPARATOR = " ¶ "
"""Between two passages of a page in a result's content (SearXNG folds line breaks)."""
TOKENS = ("BRAVE_CONTEXT_TOKENS", 8192, 1024, 32768)
TOKENS_PER_URL = ("BRAVE_CONTEXT_TOKENS_PER_URL", 4096, 512, 8192)


def web_engine() -> ModuleType:
    """Our web engine's module, a copy of this engine's own (SearXNG loads each engine
    from its file, not as an importable module), from beside this file's real place (the
    embedded SearXNG links it from the checkout)."""
    path = Path(__file__).resolve().with_name("brave_api.py")
    spec = importlib.util.spec_from_file_location("brave_api_for_llm", path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot load {path}")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


web = web_engine()


def cap(setting: tuple[str, int, int, int]) -> int:
    """A token cap from the environment, within what Brave accepts."""
    name, default, low, high = setting
    try:
        value = int(os.environ.get(name, "").strip() or default)
    except ValueError:
        value = default
    return max(low, min(value, high))


def request_params(
    query: str, *, locale: str | None, time_range: str | None = None
) -> dict[str, str]:
    """The query string sent to Brave's LLM Context endpoint."""
    params = {
        "q": query,
        "count": "20",
        "maximum_number_of_urls": str(max(1, min(int(max_urls), 50))),
        "maximum_number_of_tokens": str(cap(TOKENS)),
        "maximum_number_of_tokens_per_url": str(cap(TOKENS_PER_URL)),
        "context_threshold_mode": "balanced",
    }
    if time_range in web.FRESHNESS:
        params["freshness"] = web.FRESHNESS[time_range]
    locale_params = web.locale_params(locale)
    locale_params.pop("ui_lang", None)
    params.update(locale_params)
    return params


def page_date(source: dict[str, Any]) -> Any:
    """The first absolute date among a source's ``age`` entries (Brave gives the day in
    words, as ISO and as "392 days ago")."""
    for age in source.get("age") or []:
        date = web.published_date({"age": age}) if isinstance(age, str) else None
        if date:
            return date
    return None


def format_result(page: dict[str, Any], sources: dict[str, Any]) -> dict[str, Any] | None:
    """One SearXNG result from one page of ``grounding.generic`` (None without URL or text)."""
    url = page.get("url")
    chunks = [
        str(c).replace(CHUNK_SEPARATOR.strip(), " ").strip() for c in page.get("snippets") or []
    ]
    chunks = [chunk for chunk in chunks if chunk]
    if not url or not chunks:
        return None
    source = sources.get(url) if isinstance(sources.get(url), dict) else {}
    content = CHUNK_SEPARATOR.join(chunks)
    date = page_date(source)
    if date:
        content = date.strftime("%Y-%m-%d") + web.DATE_SEPARATOR + content
    title = web.clean_text(page.get("title") or source.get("title") or url)
    formatted = {"url": url, "title": title, "content": content}
    if date:
        formatted["publishedDate"] = date
    return formatted


def init(engine_settings: dict[str, Any] | None = None) -> bool:
    """A missing key is named in SearXNG's log at start, as by our web engine."""
    if web.token(api_key):
        return True
    log = globals().get("logger")
    if log is not None:
        log.error(web.NO_KEY)
    return False


def request(query: str, params: dict[str, Any]) -> None:
    """Fill in SearXNG's request: the endpoint with Brave's parameters, the token header."""
    wanted = request_params(
        query, locale=params.get("searxng_locale"), time_range=params.get("time_range")
    )
    params["url"] = web.api_root(base_url) + CONTEXT_PATH + "?" + urlencode(wanted)
    key = web.token(api_key)
    if not key:
        raise web.searx_exceptions().SearxEngineAPIException(web.NO_KEY)
    params["headers"]["Accept"] = "application/json"
    params["headers"]["X-Subscription-Token"] = key
    params["raise_for_httperror"] = False  # Brave's JSON body names the error


def response(resp: Any) -> EngineResults:
    """SearXNG results from Brave's grounding, or the SearXNG exception for its error; the
    plan its headers state is written for the chat service either way."""
    if resp.status_code != 200:
        web.raise_for_brave_error(resp)
    web.record_plan(resp, None)
    data = resp.json()
    from searx.result_types import EngineResults

    results = EngineResults()
    sources = data.get("sources") if isinstance(data.get("sources"), dict) else {}
    for page in (data.get("grounding") or {}).get("generic") or []:
        formatted = format_result(page, sources) if isinstance(page, dict) else None
        if formatted:
            results.append(formatted)
    return results
