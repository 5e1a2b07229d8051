"""Main-text extraction: ours (app.extract) against plain trafilatura, on the shared corpus.

Both run in the same process on the same pages, already read and gunzipped, so the time is
extraction alone, on one core. Quality is the metric of ../shared/tools/score_extraction.py
(word 4-gram shingles, precision and recall averaged over pages), imported from there.
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
from pathlib import Path
from types import ModuleType

import trafilatura

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from app.extract import extract_html  # noqa: E402

SHARED = ROOT.parent / "shared"
CORPUS = SHARED / "corpus" / "extraction"
SCORER = SHARED / "tools" / "score_extraction.py"

Extractor = Callable[[bytes], str]
EXTRACTORS: dict[str, Extractor] = {
    "ours (app.extract)": lambda html: extract_html(html).text,
    "plain trafilatura": lambda html: trafilatura.extract(html, include_comments=False) or "",
}


def load_scorer() -> ModuleType:
    spec = importlib.util.spec_from_file_location("score_extraction", SCORER)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def score(scorer: ModuleType, truth: dict[str, str], guesses: dict[str, str]) -> tuple[float, ...]:
    """(F1, precision, recall) exactly as score_extraction.py's main() computes them."""
    precisions, recalls = [], []
    for key, body in truth.items():
        tp, fp, fn = scorer.page_counts(body, guesses[key])
        p = 1.0 if fp == fn == 0 else scorer.ratio(tp, fp)
        r = 1.0 if fp == fn == 0 else scorer.ratio(tp, fn)
        if p is not None:
            precisions.append(p)
        if r is not None:
            recalls.append(r)
    precision = sum(precisions) / len(precisions)
    recall = sum(recalls) / len(recalls)
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    return f1, precision, recall


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3, help="timed runs; the best one counts")
    args = parser.parse_args()
    if not (CORPUS / "ground-truth.json").exists() or not SCORER.exists():
        print(f"{CORPUS} or {SCORER} is absent: the shared corpus sits beside the checkout")
        return 1
    scorer = load_scorer()
    ground = json.loads((CORPUS / "ground-truth.json").read_text(encoding="utf-8"))
    truth = {key: ground[key].get("articleBody", "") for key in sorted(ground)}
    pages = {
        key: gzip.decompress((CORPUS / "html" / f"{key}.html.gz").read_bytes()) for key in truth
    }
    print(f"{len(pages)} pages from {CORPUS}, best of {args.rounds} rounds\n")
    print(f"{'extractor':<20} {'F1':>6} {'precision':>9} {'recall':>6} {'pages/s':>8}")
    for name, extract in EXTRACTORS.items():
        best = float("inf")
        for _round in range(args.rounds):
            started = time.perf_counter()
            guesses = {key: extract(html) for key, html in pages.items()}
            best = min(best, time.perf_counter() - started)
        f1, precision, recall = score(scorer, truth, guesses)
        print(f"{name:<20} {f1:>6.3f} {precision:>9.3f} {recall:>6.3f} {len(pages) / best:>8.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
