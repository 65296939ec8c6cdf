"""Parsing of the built-in ``auto…`` model ids (spec 04 §1.1).

``parse_auto_id(text)`` returns the canonical route id (lower case, ``floor`` written
``cheap``) or raises ``UnknownAutoVariant`` with the message the client sees.  Only a
string equal to ``auto`` or starting with ``auto/`` (ignoring case) is an auto id;
nothing is trimmed, so whitespace makes an id invalid.
"""

from __future__ import annotations

VARIANTS = ("coding", "fast", "cheap", "offline", "smart", "lkgp", "chaos")
CATEGORIES = ("coding", "reasoning", "vision", "chat", "multimodal")
TIERS = ("fast", "cheap", "floor", "reliable", "free", "pro")

_VALID_FORMS = (
    "Use auto, auto/<variant> (coding, fast, cheap, offline, smart, lkgp, chaos) or "
    "auto/<category>[:<tier>] (categories: coding, reasoning, vision, chat, "
    "multimodal; tiers: fast, cheap, floor, reliable, free, pro)."
)


class UnknownAutoVariant(ValueError):
    """An ``auto…`` string that the grammar does not accept."""


def is_auto_id(text: str) -> bool:
    lowered = text.lower()
    return lowered == "auto" or lowered.startswith("auto/")


def parse_auto_id(text: str) -> str:
    lowered = text.lower()
    if lowered == "auto":
        return "auto"
    rest = lowered[len("auto/") :]
    if rest == "":
        raise UnknownAutoVariant(f"Empty auto variant in '{text}'. {_VALID_FORMS}")
    category, sep, tier = rest.partition(":")
    if not sep and category in VARIANTS:
        return f"auto/{category}"
    if category in CATEGORIES and (not sep or tier in TIERS):
        if not sep:
            return f"auto/{category}"
        return f"auto/{category}:{'cheap' if tier == 'floor' else tier}"
    raise UnknownAutoVariant(f"Unknown auto model '{text}'. {_VALID_FORMS}")
