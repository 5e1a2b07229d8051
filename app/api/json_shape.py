"""The shape of a JSON body, checked before anything parses it: nesting depth and the
number of values, in one pass over the bytes that never goes back (docs/security.md).
app/api/access.py runs it on every body a route may parse."""

from __future__ import annotations

import asyncio
import itertools
import operator
import re
from collections.abc import Iterator

MAX_JSON_DEPTH = 16
"""Our deepest body is two levels; Python's parser would recurse until it crashed."""
MAX_JSON_ITEMS = 10_000
"""Our longest list holds 200 model ids."""
DEPTH_PIECE_BYTES = 64 * 1024
"""The shape check works through a body in pieces of this size: each piece is a few C
calls of a millisecond or so, between which the GIL passes to the event loop."""
DEPTH_IN_THREAD_BYTES = 64 * 1024
"""Bodies longer than this are checked in a thread, not on the event loop."""
BACKSLASHES = re.compile(rb"\\*")
UP_DOWN = bytes.maketrans(b"[{]}", b"\x02\x02\x00\x00")
NOT_BRACKETS = bytes(sorted(set(range(256)) - set(b"[]{}")))


def shape_refusal(body: bytes) -> str | None:
    """Why the body's JSON has a shape no route takes (nested deeper than MAX_JSON_DEPTH,
    more than MAX_JSON_ITEMS values), found without parsing, in one pass that never goes
    back: escapes are dropped, so that every quote left opens or closes a string; the text
    between quotes is dropped; what is left is structure. (A regular expression that cut
    whole strings out tried again from every quote of an unclosed string: quadratic, hours
    for 4 MiB.) Every step is a C call over one piece of the body."""
    depth, items, in_string = 0, 0, False
    for piece in pieces(body, DEPTH_PIECE_BYTES):
        unescaped = piece.replace(b"\\\\", b"").replace(b'\\"', b"")
        parts = unescaped.split(b'"')
        outside = b"".join(parts[1 if in_string else 0 :: 2])
        in_string ^= len(parts) % 2 == 0
        steps = outside.translate(UP_DOWN, NOT_BRACKETS)  # an opening 2, a closing 0
        if steps and deeper_than(steps, MAX_JSON_DEPTH - depth):
            return f"the JSON is nested deeper than {MAX_JSON_DEPTH} levels"
        depth += 2 * steps.count(2) - len(steps)
        # Each value past an array's or object's first follows a comma: a bound on the
        # objects the parser would build, on the event loop, before any field is checked.
        items += outside.count(b",") + steps.count(2)
        if items > MAX_JSON_ITEMS:
            return f"the JSON holds more than {MAX_JSON_ITEMS:,} values"
    return None


def deeper_than(steps: bytes, room: int) -> bool:
    """Whether these brackets rise more than `room` levels. Cheap bounds first: no higher
    than their openings; and dropping every empty pair ("[]", one C call) lowers the
    highest point by one at most."""
    return (
        steps.count(2) > room
        and deepest(steps.replace(b"\x02\x00", b"")) + 1 > room
        and deepest(steps) > room
    )


def deepest(steps: bytes) -> int:
    """The highest depth reached, from 0 at the start: after each bracket, twice the
    openings so far less the brackets so far (C iterators, no Python loop per byte)."""
    rises = itertools.accumulate(steps, initial=0)
    highest: int = max(map(operator.sub, rises, itertools.count(0)))
    return highest


def pieces(body: bytes, size: int) -> Iterator[bytes]:
    """The body cut into pieces of about `size` bytes, never inside an escape: a cut that
    falls in a run of backslashes moves past the run and the byte it escapes."""
    start = 0
    while start < len(body):
        end = start + size
        if end < len(body) and body[end - 1] == ord("\\"):
            run = BACKSLASHES.match(body, end)
            assert run is not None  # a run of no backslash matches too
            end = run.end() + 1
        yield body[start:end]
        start = end


async def checked_shape(body: bytes) -> str | None:
    """The shape check, in a thread for a long body: linear, but tens of milliseconds of
    CPU for 4 MiB, which the event loop must not spend."""
    if len(body) <= DEPTH_IN_THREAD_BYTES:
        return shape_refusal(body)
    return await asyncio.to_thread(shape_refusal, body)
