"""The chat service's HTTP side. For now: health, configuration and a placeholder page."""

from __future__ import annotations

from fastapi import FastAPI
from fastapi.responses import HTMLResponse

from app import config

PLACEHOLDER = """<!doctype html><meta charset="utf-8"><title>private search</title>
<p>The chat page is not built yet. Search works: <code>python -m app search "your query"</code>.</p>
"""


def create_app(settings: config.Settings) -> FastAPI:
    app = FastAPI(title="private search chat", docs_url=None, redoc_url=None)

    @app.get("/healthz")
    def healthz() -> dict[str, str]:
        return {"status": "ok"}

    @app.get("/api/config")
    def api_config() -> dict[str, str]:
        return {"search_locale": settings.search_locale, "searxng_url": settings.searxng_url}

    @app.get("/", response_class=HTMLResponse)
    def page() -> str:
        return PLACEHOLDER

    return app
