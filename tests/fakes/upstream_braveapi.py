# SPDX-License-Identifier: AGPL-3.0-or-later
"""SearXNG's own ``braveapi`` engine (searx/engines/braveapi.py, added February 2026), a
stand-in written from what it does in SearXNG's newest tree (9fea412, August 2026), for the
pinned SearXNG to load beside or instead of ours.

What sets it apart, as there: ``base_url`` is the whole endpoint; it sends
``q``, ``count``, ``offset`` as a result offset (page 2 of 20 asks 20, above Brave's 9),
``text_decorations=false``, ``time_range`` and ``safesearch=strict``; no locale, no extra
snippets; it sets no shortcut (SearXNG's default, ``-``); ``init`` refuses an empty key.
Loaded by its absolute path without ``.py`` (SearXNG's loader accepts that). What it sends
Brave is checked against the real module, run by the newest SearXNG the tests install
(tests/test_embedded_searxng.py).
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlencode

about = {
    "website": "https://api.search.brave.com/",
    "official_api_documentation": "https://api-dashboard.search.brave.com/documentation",
    "use_official_api": True,
    "require_api_key": True,
    "results": "JSON",
}
api_key: str = ""
categories = ["general", "web"]
paging = True
safesearch = True
time_range_support = True
results_per_page: int = 20
base_url = "https://api.search.brave.com/res/v1/web/search"
time_range_map = {
    "day": "past_day",
    "week": "past_week",
    "month": "past_month",
    "year": "past_year",
}


def init(_: Any) -> None:
    from searx.exceptions import SearxEngineAPIException

    if not api_key:
        raise SearxEngineAPIException("No API key provided")


def request(query: str, params: dict[str, Any]) -> None:
    args: dict[str, Any] = {
        "q": query,
        "count": results_per_page,
        "offset": (params["pageno"] - 1) * results_per_page,
        "text_decorations": False,
    }
    if params["time_range"]:
        args["time_range"] = time_range_map.get(params["time_range"])
    if params["safesearch"]:
        args["safesearch"] = "strict"
    params["url"] = f"{base_url}?{urlencode(args)}"
    params["headers"]["X-Subscription-Token"] = api_key


def response(resp: Any) -> Any:
    from searx.result_types import EngineResults
    from searx.utils import html_to_text

    results = EngineResults()
    for result in (resp.json().get("web") or {}).get("results", []):
        results.add(
            results.types.MainResult(
                url=result["url"],
                title=html_to_text(result["title"]),
                content=html_to_text(result.get("description", "")),
            )
        )
    return results
