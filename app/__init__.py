"""A private search-plus-chat stack: SearXNG with a Brave Search API engine, and its tools."""
