"""The two shapes of the model server's wire that stay open JSON objects on purpose."""

from __future__ import annotations

from typing import Any, TypeAlias

RequestBody: TypeAlias = dict[str, Any]
"""A chat completion request as it is sent: our fields with the user's model parameters
(MODEL_PARAMS) and a /v1 client's own fields passed through as given. Free-form JSON: the
fields a server takes are its own, unknown to us by design."""

ServerObject: TypeAlias = dict[str, Any]
"""A JSON object the model server sent (a stream chunk, a part of one), read key by key
and defensively: servers differ, and any of them may send any shape (a wrong one fails as
``upstream``). Free-form JSON until read."""
