"""Main-text extraction: ours (app.pages.extract) against plain trafilatura, on the shared corpora.

Three corpora: ../shared/corpus/extraction (English, headline left out of the ground truth)
and the human and reviewed splits of ../shared/corpus/extraction-multilingual (see its
SOURCE.md; the human one includes the headline, which we print as the title, apart from the
text). Both extractors get the same pages, as bytes already read and gunzipped, in the same
process, so the time is decoding and extraction alone, on one core. Each page is timed for
ours and trafilatura in turn, several rounds, and its fastest time counts: load from other
processes then slows both alike. Quality is the metric of ../shared/tools/score_extraction.py
(word 4-gram shingles, precision and recall averaged over pages), imported from there, over
the text alone, as that scorer reads `extract --json`.
Run: .venv/bin/python bench/extraction.py [--rounds N]
"""

from __future__ import annotations

import argparse
import gzip
import importlib.util
import json
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

import trafilatura

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from app.pages.extract import extract_html  # noqa: E402

SHARED = ROOT.parent / "shared"
CORPORA = {
    "extraction (en)": SHARED / "corpus" / "extraction",
    "multilingual/human": SHARED / "corpus" / "extraction-multilingual" / "human",
    "multilingual/reviewed": SHARED / "corpus" / "extraction-multilingual" / "reviewed",
}
SCORER = SHARED / "tools" / "score_extraction.py"

Extractor = Callable[[bytes], str]
OURS: Extractor = lambda html: extract_html(html).text  # noqa: E731
PLAIN: Extractor = lambda html: trafilatura.extract(html, include_comments=False) or ""  # noqa: E731


@dataclass
class Page:
    truth: str
    lang: str
    html: bytes
    guesses: tuple[str, str] = ("", "")
    seconds: tuple[float, float] = (float("inf"), float("inf"))


def load_scorer() -> ModuleType:
    spec = importlib.util.spec_from_file_location("score_extraction", SCORER)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def load_corpus(corpus: Path) -> list[Page]:
    ground = json.loads((corpus / "ground-truth.json").read_text(encoding="utf-8"))
    return [
        Page(
            truth=ground[key].get("articleBody", ""),
            lang=ground[key].get("lang", "en"),
            html=gzip.decompress((corpus / "html" / f"{key}.html.gz").read_bytes()),
        )
        for key in sorted(ground)
    ]


def run(pages: list[Page], rounds: int) -> None:
    """Fill in each page's guesses and fastest times, ours and plain trafilatura in turn."""
    for _round in range(rounds):
        for page in pages:
            results = []
            for extract in (OURS, PLAIN):
                started = time.perf_counter()
                text = extract(page.html)
                results.append((text, time.perf_counter() - started))
            page.guesses = (results[0][0], results[1][0])
            page.seconds = (
                min(page.seconds[0], results[0][1]),
                min(page.seconds[1], results[1][1]),
            )


def f1(scorer: ModuleType, pairs: list[tuple[str, str]]) -> float:
    """F1 over (truth, guess) pairs exactly as score_extraction.py's main() computes it."""
    precisions, recalls = [], []
    for truth, guess in pairs:
        tp, fp, fn = scorer.page_counts(truth, guess)
        p = 1.0 if fp == fn == 0 else scorer.ratio(tp, fp)
        r = 1.0 if fp == fn == 0 else scorer.ratio(tp, fn)
        if p is not None:
            precisions.append(p)
        if r is not None:
            recalls.append(r)
    precision = sum(precisions) / len(precisions)
    recall = sum(recalls) / len(recalls)
    return 2 * precision * recall / (precision + recall) if precision + recall else 0.0


def row(scorer: ModuleType, label: str, pages: list[Page]) -> str:
    ours = f1(scorer, [(page.truth, page.guesses[0]) for page in pages])
    plain = f1(scorer, [(page.truth, page.guesses[1]) for page in pages])
    rates = [len(pages) / sum(page.seconds[i] for page in pages) for i in (0, 1)]
    return (
        f"| {label} | {len(pages)} | **{ours:.3f}** | {plain:.3f} | {ours - plain:+.3f} "
        f"| {rates[0]:.1f} | {rates[1]:.1f} | **{rates[0] / rates[1]:.2f}x** |"
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5, help="timed runs; each page's best counts")
    args = parser.parse_args()
    missing = [p for p in (*CORPORA.values(), SCORER) if not p.exists()]
    if missing:
        print(f"{missing[0]} is absent: the shared corpora sit beside the checkout")
        return 1
    scorer = load_scorer()
    print(f"best of {args.rounds} rounds per page, one core\n")
    print(
        "| corpus | pages | F1 ours | F1 trafilatura | F1 gain "
        "| pages/s ours | pages/s trafilatura | speed |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for name, corpus in CORPORA.items():
        pages = load_corpus(corpus)
        run(pages, args.rounds)
        print(row(scorer, f"**{name}**", pages))
        languages = sorted({page.lang for page in pages})
        for lang in languages if len(languages) > 1 else []:
            print(row(scorer, f"  {lang}", [page for page in pages if page.lang == lang]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
