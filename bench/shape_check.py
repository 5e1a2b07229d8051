"""The JSON shape check before any handler (app/api/access.py): its time on the worst bodies.

The check it replaced cut strings out with a regular expression that, on an unclosed
string, tried again from every quote: its time grows with the square of the body. Measured
here on 8, 16 and 32 KB and extrapolated to the 4 MiB a body may have; the new check is
measured on 4 MiB bodies built against it.

Run: .venv/bin/python bench/shape_check.py
"""

from __future__ import annotations

import re
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from app.api.access import MAX_BODY_BYTES
from app.api.json_shape import shape_refusal

OLD_STRING = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"')  # the replaced check's first step


def unclosed(size: int) -> bytes:
    opening = b'{"text": "'
    return opening + b'\\"' * ((size - len(opening)) // 2)


def seconds(work, *args) -> float:
    started = time.perf_counter()
    work(*args)
    return time.perf_counter() - started


def main() -> int:
    print("| body | check | seconds |\n|---|---|---|")
    old = {}
    for kb in (8, 16, 32):
        old[kb] = seconds(OLD_STRING.sub, b"", unclosed(kb * 1024))
        print(f"| unclosed string of escaped quotes, {kb} KB | old | {old[kb]:.2f} |")
    hours = old[32] * (MAX_BODY_BYTES / (32 * 1024)) ** 2 / 3600
    print(f"| the same, 4 MiB | old (extrapolated, quadratic) | about {hours:.0f} hours |")
    size = MAX_BODY_BYTES
    bodies = {
        "unclosed string of escaped quotes": unclosed(size),
        "one string of backslashes": b'{"text": "' + b"\\" * (size - 12) + b'"}',
        "one plain string": b'{"text": "' + b"a" * (size - 12) + b'"}',
        "1.4 million empty strings": b"[" + b'"",' * (size // 3 - 1) + b'""]',
        "two million empty lists at depth 15": b"[" * 15 + b"[]" * ((size - 15) // 2),
    }
    for name, body in bodies.items():
        best = min(seconds(shape_refusal, body) for _ in range(3))
        print(f"| {name}, 4 MiB | new | {best:.3f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
