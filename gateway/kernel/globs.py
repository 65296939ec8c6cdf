"""Glob patterns of model mappings and allow-lists (spec 03 §1.1).

``*`` matches any run of characters (``/`` included, or none), ``?`` exactly one, and
everything else is literal.  Matching always spans the whole string and ignores case.
"""

from __future__ import annotations

import re


def compile_glob(pattern: str) -> re.Pattern[str]:
    parts: list[str] = []
    for char in pattern:
        if char == "*":
            parts.append(".*")
        elif char == "?":
            parts.append(".")
        else:
            parts.append(re.escape(char))
    return re.compile("".join(parts), re.IGNORECASE | re.DOTALL)


def matches(regex: re.Pattern[str], value: str) -> bool:
    return regex.fullmatch(value) is not None
