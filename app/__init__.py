"""A private search-plus-chat stack: SearXNG with a Brave Search API engine, and its tools."""

__version__ = "0.1.0"
"""The project's version, as pyproject.toml states it (a test keeps the two equal): the app
runs from its checkout, not installed, so the package metadata is not there to read."""
