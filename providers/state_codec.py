"""JSON for the shared state store: plain values, plus the health dataclasses.

Values in the state store are plain JSON (dicts, lists, strings, numbers, booleans)
except the health records of ``gateway.kernel.breaker``, which the board stores as
frozen dataclasses.  Those are written as an object tagged with ``"__state__"`` (the
class name) and revived on read, so a ``Breaker`` read back from Redis compares equal
to the one written: its ``window`` comes back as a tuple of tuples.

Invariants: ``decode(encode(v)) == v`` for every value the gateway stores (tuples
inside plain values come back as lists, which no reader distinguishes); an unreadable
value decodes as None, i.e. as a missing key: this state is soft and rebuilds.
"""

from __future__ import annotations

import dataclasses
import logging
from typing import Any

import orjson

from gateway.kernel.breaker import AuthDisable, Breaker, Cooldown

logger = logging.getLogger(__name__)

TAG = "__state__"
_TYPES: dict[str, type[Any]] = {
    cls.__name__: cls for cls in (Breaker, Cooldown, AuthDisable)
}
_OPTIONS = orjson.OPT_PASSTHROUGH_DATACLASS


def _tagged(value: Any) -> dict[str, Any]:
    """orjson's ``default``: a registered dataclass as a tagged object."""
    name = type(value).__name__
    if _TYPES.get(name) is not type(value):
        raise TypeError(f"cannot store {name} in the shared state store")
    found = {f.name: getattr(value, f.name) for f in dataclasses.fields(value)}
    found[TAG] = name
    return found


def _breaker(fields: dict[str, Any]) -> Breaker:
    window = fields.pop("window", ())
    return Breaker(window=tuple(tuple(bucket) for bucket in window), **fields)


def encode(value: Any) -> bytes:
    return orjson.dumps(value, default=_tagged, option=_OPTIONS)


def revive(value: Any) -> Any:
    """Parsed JSON back into the stored value (tagged objects become dataclasses)."""
    if isinstance(value, dict):
        name = value.get(TAG)
        if name is None:
            return {k: revive(v) for k, v in value.items()}
        fields = {k: v for k, v in value.items() if k != TAG}
        if name == "Breaker":
            return _breaker(fields)
        return _TYPES[name](**fields)
    if isinstance(value, list):
        return [revive(item) for item in value]
    return value


def decode(raw: bytes | str | None) -> Any:
    if raw is None:
        return None
    try:
        return revive(orjson.loads(raw))
    except (ValueError, TypeError, KeyError):
        # Written by another version, or damaged: soft state reads as missing.
        logger.warning("shared state: unreadable value dropped: %.80r", raw)
        return None
