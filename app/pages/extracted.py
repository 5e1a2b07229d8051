"""What a page's extraction gives (Extracted), and the call that imports the extractor at its
first use (extract_here). Apart from app.pages.extract on purpose: the extractor
(trafilatura, lxml, numpy) costs about half a second of imports, which a process that
extracts nothing, or that extracts in its worker process (the service), must not pay. A
result the worker sends back is unpickled as this module's class: were the class the
extractor's, the unpickling would import the extractor into the service."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from app.pages.charset import CharsetSource


@dataclass(frozen=True)
class Extracted:
    title: str
    text: str
    charset: str | None = None
    """The codec bytes were decoded with (None for a page given as text), and why."""
    charset_source: CharsetSource | None = None

    def as_dict(self) -> dict[str, object]:
        """The shape `extract --json` prints (and score_extraction.py reads)."""
        out: dict[str, object] = {"title": self.title, "text": self.text, "chars": len(self.text)}
        if self.charset:
            out["charset"] = {"name": self.charset, "source": self.charset_source}
        return out


def extract_here(body: bytes, url: str, charset: str | None) -> Extracted:
    """The extraction, in this process: a command's thread, or the service's worker process
    (whose fork server imported the extractor at its start)."""
    from app.pages.extract import extract_html

    return extract_html(body, url, charset)
