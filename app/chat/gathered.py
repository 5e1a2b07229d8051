"""What an answer's tools gathered so far, as a value: its sources (numbered for [n]
citations), each search result's text and the start of each page read, for the digest that
follow-up questions read. The runner (app/chat/tools.py) hands a copy of it with each step
(`Gathered`), so a surface keeps what it was given and never shares the runner's lists;
numbering the sources as the answer cites them gives a new value."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from app.chat.events import Source
from app.chat.given_addresses import MASK, Planted, masked
from app.webtext import untrusted

DIGEST_MAX_CHARS = 4_000
"""A turn's kept sources at most (about 1,300 tokens): they ride along for several turns."""


@dataclass(frozen=True)
class Gathered:
    sources: tuple[Source, ...] = ()
    snippets: Mapping[int, str] = field(default_factory=dict)
    """Each search result's text by source number, for the answer's digest."""
    excerpts: Mapping[int, str] = field(default_factory=dict)
    """The start of each page read, by source number, for the answer's digest."""
    planted: Planted = field(default_factory=Planted)
    """Addresses the model wrote in its queries: a title or snippet echoing one is masked."""

    def digest(self) -> str:
        """The results in short, for follow-up questions ("what else did the second result
        say?"): numbered as the answer cites them, pages read first (what an answer most
        likely rests on), then the other results, within DIGEST_MAX_CHARS; wrapped as web
        data once, here, so the history's text stays the same from turn to turn and the
        server's prompt cache keeps hitting. Empty when no tool gave anything."""
        order = [*self.excerpts, *(n for n in self.snippets if n not in self.excerpts)]
        kept: dict[int, str] = {}
        size = 0
        for number in order:
            entry = self.digest_entry(number)
            if size + len(entry) > DIGEST_MAX_CHARS:
                break
            kept[number] = entry
            size += len(entry) + 2
        if not kept:
            return ""
        entries = [kept[n] for n in sorted(kept)]
        if len(kept) < len(order):
            entries.append(f"({len(order) - len(kept)} more results not kept)")
        return untrusted("\n\n".join(entries), "earlier_results")

    def digest_entry(self, number: int) -> str:
        source = self.sources[number - 1]
        dated = f" ({source['date']})" if source.get("date") else ""
        # A title or snippet may echo the query: what the model wrote there is never given,
        # in this answer or in the later ones that read this digest.
        url = MASK if self.planted.written(source["url"]) else source["url"]
        head = f"[{number}] {masked(source['title'], self.planted)}{dated}\n{url}"
        if number in self.excerpts:
            return f"{head}\nThe page read, its start:\n{self.excerpts[number]}"
        return f"{head}\n{masked(self.snippets[number], self.planted)}"

    def renumbered(self, order: list[int]) -> Gathered:
        """The same, numbered anew: `order` lists the old numbers in their new order (see
        app/chat/numbering.py)."""
        new = {old: position for position, old in enumerate(order, 1)}
        return Gathered(
            sources=tuple(self.sources[old - 1] for old in order),
            snippets={new[n]: text for n, text in self.snippets.items()},
            excerpts={new[n]: text for n, text in self.excerpts.items()},
            planted=self.planted,
        )
