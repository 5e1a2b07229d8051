"""Which language a result is in, and how many results a locale brings in a language."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

from app.search.client import Result, SearchError
from app.search.searcher import Searcher


def detect(text: str) -> str:
    """ISO 639-1 code of the text's language (py3langid's bundled model, no download).
    py3langid (with numpy, a fifth of a second of imports) comes at the first detection,
    in the caller's worker thread: a command or a service that detects nothing (a chat turn
    does not; MCP's web_search and the search lab do) starts without it. The first
    detection's loading of the model (about half a second of CPU) outweighs the imports."""
    import py3langid

    language, _score = py3langid.classify(text)
    return str(language)


def detect_results(results: list[Result]) -> list[str]:
    """The language of each result, on its title and content. CPU work: a server calls it
    in a worker thread."""
    return [detect(f"{r.title}\n{r.content}") for r in results]


def language_of(locale: str) -> str:
    """The language part of a locale: ``pl-PL`` -> ``pl``."""
    return locale.partition("-")[0].lower()


def default_locales(locale: str) -> list[str]:
    """What measure-locale compares by default: ``pl-PL`` -> ``all, pl, pl-PL``.

    Empty when the locale names no language (``all``, ``auto``)."""
    if locale in ("all", "auto"):
        return []
    return list(dict.fromkeys(["all", language_of(locale), locale]))


@dataclass(frozen=True)
class Detected:
    """A result's address and the language detected on it."""

    url: str
    language: str


@dataclass
class LocaleRow:
    locale: str
    in_target: int
    total: int
    results: list[Detected] = field(default_factory=list)


async def top_results(
    searxng: Searcher,
    query: str,
    locale: str,
    top: int,
    engines: str | None = None,
    *,
    fresh: bool = False,
    person: int | None = None,
) -> list[Result]:
    """The first ``top`` results for the locale, reading further pages as needed;
    ``person``: who asks in household mode (their own search cache)."""
    results: list[Result] = []
    seen: set[str] = set()
    for page in range(1, 11):
        response = await searxng.search(
            query, locale=locale, engines=engines, page=page, fresh=fresh, person=person
        )
        if response.engine_errors:
            raise SearchError("; ".join(response.engine_errors))
        new = [r for r in response.results if r.url not in seen]
        if not new:
            break
        seen.update(r.url for r in new)
        results.extend(new)
        if len(results) >= top:
            break
    return results[:top]


async def measure(
    searxng: Searcher,
    query: str,
    locales: list[str],
    target: str,
    top: int,
    engines: str | None = None,
    *,
    fresh: bool = False,
    person: int | None = None,
) -> list[LocaleRow]:
    """For each locale, how many of the top results are in the target language (searched
    as ``person``, who asks in household mode)."""

    async def row(locale: str) -> LocaleRow:
        results = await top_results(
            searxng, query, locale, top, engines, fresh=fresh, person=person
        )
        languages = await asyncio.to_thread(detect_results, results)
        detected = [
            Detected(url=r.url, language=lang) for r, lang in zip(results, languages, strict=True)
        ]
        hits = sum(1 for lang in languages if lang == target)
        return LocaleRow(locale=locale, in_target=hits, total=len(results), results=detected)

    return list(await asyncio.gather(*(row(locale) for locale in locales)))
