"""Why a page was not read: refused before any connection, or failed on the way.

Both are said to the model as the tool's answer (app/chat/tools.py); the command line exits
2 for a refusal, 1 for a failure. ``status`` is what the web layer would answer with.
"""

from app.errors import ServiceError


class FetchRefused(ServiceError):
    """The address is not allowed (reason in the message): docs/security.md."""

    status = 403


class FetchFailed(ServiceError):
    """The page could not be fetched (network, HTTP status, timeout, too big, wrong type)."""

    status = 502
