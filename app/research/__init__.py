"""A research run: one question answered by a visible, bounded plan of searches and pages
read, ending in a report whose every claim cites a page that was read (docs/research.md).

The run (run.py) is an async iterator of typed events (events.py) ending with its result;
it knows no surface: the command line drives it today, as the page and /v1 drive the
answer engine."""
