"""Quota readings from upstream rate-limit headers (spec 03 §8.5 source 1).

OpenAI style: ``x-ratelimit-{remaining,limit,reset}-{requests,tokens}`` with resets
like ``1s``, ``6m0s``, ``20ms``, ``1h2m3.5s``.  Anthropic style:
``anthropic-ratelimit-{requests,tokens,input-tokens,output-tokens}-{remaining,limit,
reset}`` with RFC 3339 resets.  ``remaining`` is the lowest remaining/limit ratio over
the dimensions that give both; ``resets_at`` is that dimension's reset.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime

PREFIXES = ("x-ratelimit-", "anthropic-ratelimit-")
_DURATION = re.compile(r"(\d+(?:\.\d+)?)(ms|h|m|s)")
_UNIT_S = {"h": 3600.0, "m": 60.0, "s": 1.0, "ms": 0.001}
_OPENAI = re.compile(r"^x-ratelimit-(remaining|limit|reset)-(.+)$")
_ANTHROPIC = re.compile(r"^anthropic-ratelimit-(.+)-(remaining|limit|reset)$")
#: a reading older than this is ignored (spec 03 §8.5)
MAX_AGE_SECONDS = 600.0


def quota_key(connection: str) -> str:
    """State-store key of a connection's last reading (``<provider>@<name>``)."""
    return f"quota:{connection}"


@dataclass(frozen=True, slots=True)
class Reading:
    remaining: float  # 0..1
    resets_at: float | None  # unix seconds


def parse_duration(text: str) -> float | None:
    """``6m0s`` -> 360.0; None when the text is not a duration."""
    text = text.strip()
    if not text:
        return None
    total, pos = 0.0, 0
    for match in _DURATION.finditer(text):
        if match.start() != pos:
            return None
        total += float(match.group(1)) * _UNIT_S[match.group(2)]
        pos = match.end()
    if pos != len(text):
        try:
            return float(text)  # a bare number of seconds
        except ValueError:
            return None
    return total


def _parse_reset(text: str, now: float) -> float | None:
    seconds = parse_duration(text)
    if seconds is not None:
        return now + seconds
    try:
        return datetime.fromisoformat(text.strip().replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


def parse(headers: Iterable[tuple[str, str]], now: float) -> Reading | None:
    """The reading of one response's rate-limit headers (lower-case names)."""
    dims: dict[str, dict[str, str]] = {}
    for name, value in headers:
        match = _OPENAI.match(name)
        if match is not None:
            field, dim = match.groups()
        else:
            match = _ANTHROPIC.match(name)
            if match is None:
                continue
            dim, field = match.groups()
        dims.setdefault(dim, {})[field] = value
    best: Reading | None = None
    for values in dims.values():
        try:
            remaining = float(values["remaining"])
            limit = float(values["limit"])
        except (KeyError, ValueError):
            continue
        if limit <= 0:
            continue
        ratio = min(1.0, max(0.0, remaining / limit))
        if best is None or ratio < best.remaining:
            reset = values.get("reset")
            best = Reading(ratio, _parse_reset(reset, now) if reset else None)
    return best
