"""Scoring weights: the defaults, the six mode packs and where each applies (spec 04
§1.2, §1.3, §3.4, §3.5, §5.1).

* ``DEFAULT_WEIGHTS`` are the exact values of §3.4 (they sum to 1.0).
* Each pack of ``MODE_PACKS`` is divided by its own sum (the printed values sum to
  0.9999), so every pack sums to 1.  A pack replaces the whole map; nothing merges.
* ``normalize_scoring_weights`` overlays a partial map on the defaults and divides by
  the sum.  Unknown names and values that are not finite numbers ≥ 0 raise
  ``ValueError`` naming the key: they are rejected, never clamped.
* ``weights_for_mode`` reads ``X-OmniRoute-Mode``; ``route_weights``,
  ``route_exploration`` and ``route_tier_hint`` read a canonical built-in route id.

Every map handed out is read-only.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from types import MappingProxyType

#: The 16 factors, in the order of the §3.4 table.
FACTORS: tuple[str, ...] = (
    "quota",
    "health",
    "costInv",
    "latencyInv",
    "taskFit",
    "stability",
    "tierPriority",
    "tierAffinity",
    "specificityMatch",
    "contextAffinity",
    "sessionAvailability",
    "connectionDensity",
    "cacheAffinity",
    "resetWindowAffinity",
    "quality",
    "reliability",
)
_FACTOR_SET = frozenset(FACTORS)

DEFAULT_WEIGHTS: Mapping[str, float] = MappingProxyType(
    dict(
        zip(
            FACTORS,
            (
                0.1429,
                0.1605,
                0.1429,
                0.1143,
                0.0762,
                0.0476,
                0.0476,
                0.0476,
                0.0476,
                0.0476,
                0.0476,
                0.0476,
                0.0,
                0.0,
                0.03,
                0.0,
            ),
            strict=True,
        )
    )
)

DEFAULT_SOURCE = "default"

# The §3.5 table as printed, in FACTORS order; divided by each column's sum below.
_PACKS_AS_PRINTED: dict[str, tuple[float, ...]] = {
    #               quota   health  costInv latInv  taskFit stabil  tierPri tierAff
    #               specif  context session density cache   reset   quality reliab
    "ship-fast": (
        *(0.1133, 0.2667, 0.0276, 0.3048, 0.0952, 0.0000, 0.0376, 0.0),
        *(0.0, 0.0095, 0.0476, 0.0476, 0.0, 0.0, 0.02, 0.03),
    ),
    "cost-saver": (
        *(0.1133, 0.1810, 0.3324, 0.0476, 0.0952, 0.0476, 0.0376, 0.0),
        *(0.0, 0.0, 0.0476, 0.0476, 0.0, 0.0, 0.02, 0.03),
    ),
    "quality-first": (
        *(0.0752, 0.1714, 0.0276, 0.0476, 0.3524, 0.1429, 0.0276, 0.0),
        *(0.0, 0.0, 0.0476, 0.0476, 0.0, 0.0, 0.03, 0.03),
    ),
    "offline-friendly": (
        *(0.3324, 0.2667, 0.0752, 0.0476, 0.0000, 0.0952, 0.0376, 0.0),
        *(0.0, 0.0, 0.0476, 0.0476, 0.0, 0.0, 0.02, 0.03),
    ),
    "reliability-first": (
        *(0.1133, 0.3524, 0.0181, 0.0476, 0.0952, 0.1905, 0.0276, 0.0),
        *(0.0, 0.0, 0.0476, 0.0476, 0.0, 0.0, 0.02, 0.04),
    ),
    "chaos-mode": (
        *(0.0376, 0.4000, 0.0140, 0.0186, 0.1905, 0.1714, 0.0040, 0.0),
        *(0.0, 0.0186, 0.0476, 0.0476, 0.0, 0.0, 0.02, 0.03),
    ),
}


def _divided_by_sum(values: tuple[float, ...]) -> Mapping[str, float]:
    total = math.fsum(values)
    return MappingProxyType(
        {name: value / total for name, value in zip(FACTORS, values, strict=True)}
    )


MODE_PACKS: Mapping[str, Mapping[str, float]] = MappingProxyType(
    {name: _divided_by_sum(values) for name, values in _PACKS_AS_PRINTED.items()}
)

#: ``X-OmniRoute-Mode`` value (trimmed, lower case) -> pack name, or "default".
MODE_HEADER: Mapping[str, str] = MappingProxyType(
    {
        "fast": "ship-fast",
        "cheap": "cost-saver",
        "quality": "quality-first",
        "reliable": "reliability-first",
        "offline": "offline-friendly",
        "balanced": DEFAULT_SOURCE,
        "default": DEFAULT_SOURCE,
        **{name: name for name in MODE_PACKS},
    }
)


def _checked_weight(key: object, value: object) -> float:
    if not isinstance(key, str) or key not in _FACTOR_SET:
        raise ValueError(
            f"unknown scoring weight {key!r}; expected one of {', '.join(FACTORS)}"
        )
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValueError(  # noqa: TRY004 - §3.4: a validation error is a ValueError
            f"scoring weight {key!r} must be a number, not {type(value).__name__}"
        )
    number = float(value)
    if not math.isfinite(number) or number < 0:
        raise ValueError(
            f"scoring weight {key!r} must be finite and >= 0, got {value!r}"
        )
    return number


def normalize_scoring_weights(
    partial: Mapping[str, object] | None,
) -> Mapping[str, float]:
    """``partial`` overlaid on ``DEFAULT_WEIGHTS``, divided by its sum (§3.4).

    ``None``, ``{}`` and maps whose overlaid sum is 0 give ``DEFAULT_WEIGHTS``.  Every
    key is validated before anything is computed.
    """
    if partial is None:
        return DEFAULT_WEIGHTS
    if not isinstance(partial, Mapping):
        raise ValueError(  # noqa: TRY004 - §3.4: a validation error is a ValueError
            f"scoring weights must be a mapping, not {type(partial).__name__}"
        )
    if not partial:
        return DEFAULT_WEIGHTS
    overlay = {key: _checked_weight(key, value) for key, value in partial.items()}
    merged = {**DEFAULT_WEIGHTS, **overlay}
    total = math.fsum(merged.values())
    if total <= 0:
        return DEFAULT_WEIGHTS
    return MappingProxyType({name: merged[name] / total for name in FACTORS})


def _pack(name: str) -> Mapping[str, float]:
    return DEFAULT_WEIGHTS if name == DEFAULT_SOURCE else MODE_PACKS[name]


def weights_for_mode(value: str | None) -> tuple[Mapping[str, float], str] | None:
    """The weights and ``weights_source`` label chosen by ``X-OmniRoute-Mode``.

    The value is trimmed and compared case-insensitively; ``None``, an empty value
    and anything unknown give ``None`` (the header is ignored, §5.1).
    """
    if value is None:
        return None
    name = MODE_HEADER.get(value.strip().lower())
    if name is None:
        return None
    return _pack(name), f"header:{name}"


# --- built-in route ids (§1.2, §1.3) --------------------------------------------------

_VARIANT_PACKS: Mapping[str, str] = MappingProxyType(
    {
        "coding": "quality-first",
        "fast": "ship-fast",
        "cheap": "cost-saver",
        "offline": "offline-friendly",
        "smart": "quality-first",
        "lkgp": DEFAULT_SOURCE,
        "chaos": "chaos-mode",
    }
)
_CATEGORY_PACKS: Mapping[str, str] = MappingProxyType(
    {
        "coding": "quality-first",
        "reasoning": "quality-first",
        "vision": "quality-first",
        "multimodal": "quality-first",
        "chat": DEFAULT_SOURCE,
    }
)
#: tier suffix -> pack; ``free`` and ``pro`` keep the category's weights.
_TIER_PACKS: Mapping[str, str] = MappingProxyType(
    {
        "fast": "ship-fast",
        "cheap": "cost-saver",
        "floor": "cost-saver",
        "reliable": "reliability-first",
    }
)
_TIER_HINTS: Mapping[str, str] = MappingProxyType(
    {"cheap": "cheap", "floor": "cheap", "free": "free", "pro": "premium"}
)
SMART_EXPLORATION_RATE = 0.10  # §1.2: auto/smart explores more, fixed
CHAOS_EXPLORATION_RATE = 0.0  # §1.2, §7: a fan-out has nothing to explore


def _route_parts(route_id: str) -> tuple[str, str | None]:
    """``auto/coding:fast`` -> ("coding", "fast"); ``auto`` and ids that are not
    built-in -> ("", None)."""
    lowered = route_id.lower()
    if not lowered.startswith("auto/"):
        return "", None
    name, sep, tier = lowered[len("auto/") :].partition(":")
    return name, (tier if sep else None)


def route_weights(route_id: str) -> tuple[Mapping[str, float], str]:
    """The weights of a canonical built-in route id and their label.

    The label is the pack name or ``"default"``.  A tier suffix ``fast``, ``cheap``
    or ``reliable`` wins over the category; ``free`` and ``pro`` keep it.  Ids that
    are not built-in (``combo:<name>``) contribute nothing: ``DEFAULT_WEIGHTS``.
    """
    name, tier = _route_parts(route_id)
    pack = DEFAULT_SOURCE
    if tier is None and name in _VARIANT_PACKS:
        pack = _VARIANT_PACKS[name]
    elif name in _CATEGORY_PACKS:
        pack = _TIER_PACKS.get(tier or "", _CATEGORY_PACKS[name])
    return _pack(pack), pack


def route_exploration(route_id: str, setting: float) -> float:
    """The exploration rate of a route id: ``auto/smart`` 0.10, ``auto/chaos`` 0,
    every other id ``setting`` (``settings.exploration_rate``)."""
    name, tier = _route_parts(route_id)
    if tier is None and name == "smart":
        return SMART_EXPLORATION_RATE
    if tier is None and name == "chaos":
        return CHAOS_EXPLORATION_RATE
    return setting


def route_tier_hint(route_id: str) -> str | None:
    """The ``tierAffinity`` hint of a route id's tier suffix (§1.3), if any."""
    _, tier = _route_parts(route_id)
    return _TIER_HINTS.get(tier or "")
