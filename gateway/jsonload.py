"""JSON in, with the promise that it can go out again.

``orjson.loads`` accepts 1 024 levels of nesting but ``orjson.dumps`` only 254, so a
body or an upstream reply nested in between would be accepted and then fail when it
is relayed.  ``loads`` refuses it at once, as invalid JSON: a client gets its 400, an
upstream reply is a bad response.  Bodies with fewer than 254 brackets in all (nearly
every one) pay two byte counts and nothing else.
"""

from __future__ import annotations

from typing import Any

import orjson

MAX_DEPTH = 254  # what orjson.dumps serialises


def loads(data: bytes | str) -> Any:
    """``orjson.loads``; raises ``orjson.JSONDecodeError`` also when the value is
    nested more deeply than it could be serialised again."""
    value = orjson.loads(data)
    if isinstance(data, str):
        brackets = data.count("[") + data.count("{")
    else:
        brackets = data.count(b"[") + data.count(b"{")
    if brackets > MAX_DEPTH:
        try:
            orjson.dumps(value)
        except TypeError:
            text = (
                data if isinstance(data, str) else data[:64].decode("utf-8", "replace")
            )
            raise orjson.JSONDecodeError(
                f"nested more than {MAX_DEPTH} levels deep", text[:64], 0
            ) from None
    return value
