"""The Markdown export (app/store/export.py): its time on an ordinary conversation and on
the worst messages found for it.

Each message is parsed by markdown-it-py and written back by mdformat, at tens of
microseconds an inline element, and mdformat finds an element's next sibling by searching
them all. So a message over MAX_RENDERED_CHARS is exported as a code block and a paragraph
of over MAX_INLINE_ELEMENTS elements as its text; the worst cases below sit just under
those bounds.

Run: .venv/bin/python bench/export.py
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from app.store.export import MAX_RENDERED_CHARS, inert, markdown

ROOT = Path(__file__).resolve().parent.parent
CHARS = MAX_RENDERED_CHARS - 1_000
WORST = {
    "emphases, 1,000 a paragraph": ("*a" * 499 + "\n\n") * (CHARS // 1_000),
    "opening brackets": "[" * CHARS,
    "image openings": "![" * (CHARS // 2),
    "table rows": "|a|b|\n|-|-|\n" + "|*x*|*y*|\n" * (CHARS // 10),
    "backslashes": "\\" * CHARS,
    "emphases past the bound (a code block)": "*a" * (MAX_RENDERED_CHARS * 32),
}


def seconds(work, *args) -> float:
    started = time.perf_counter()
    work(*args)
    return time.perf_counter() - started


def main() -> int:
    answer = (ROOT / "docs" / "security.md").read_text()[:3_000]
    messages = [
        {"role": "user", "content": "A question?"},
        {"role": "assistant", "content": answer},
    ]
    conversation = {"id": "bench", "title": "Bench", "messages": messages * 50}
    print("| export | seconds |\n|---|---|")
    print(f"| 50 answers of 3 KB | {seconds(markdown, conversation):.3f} |")
    for name, text in WORST.items():
        print(f"| {len(text):,} characters of {name} | {seconds(inert, text):.3f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
