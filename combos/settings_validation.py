"""Validation of the gateway-wide ``settings:`` block (spec 07).

Only the keys the operator set are stored; the engine fills in the defaults.
"""

from __future__ import annotations

from typing import Any

from providers.validation import Checker

DEFAULT_EXCLUSION_SECONDS = 300  # spec 04 §6

_NESTED: dict[str, dict[str, tuple[str, float, float | None]]] = {
    "breaker": {
        "consecutive_failures": ("int", 1, 1000),
        "window_seconds": ("int", 1, 86_400),
        "min_requests": ("int", 1, 100_000),
        "failure_ratio": ("num", 0, 1),
        "open_seconds": ("int", 1, 86_400),
        "max_open_seconds": ("int", 1, 86_400),
        "partial_open_seconds": ("int", 1, 86_400),  # spec 03 §8.1 (amended)
    },
    "cooldown": {
        "base_seconds": ("int", 1, 86_400),
        "max_seconds": ("int", 1, 86_400),
        "max_retry_after_seconds": ("int", 1, 86_400),
    },
    "auth_disable": {
        "seconds": ("int", 1, 86_400),
        "max_seconds": ("int", 1, 604_800),
    },
    "adaptive": {
        "min_weight_fraction": ("num", 0, 0.5),
        "trickle_fraction": ("num", 0, 0.2),
        "warm_cache_weight": ("num", 0, 1000),
        "warm_cache_ttl_seconds": ("int", 1, 86_400),
    },
    "self_healing": {  # spec 04 §6 (amended)
        "exclusion_seconds": ("int", 5, 3600),
        "max_exclusion_seconds": ("int", 5, 86_400),
    },
}
_SCALARS: dict[str, tuple[str, float, float | None]] = {
    "attempt_timeout_ms": ("int", 1000, 300_000),
    "stream_idle_timeout_ms": ("int", 1000, 3_600_000),
    "max_attempts_per_request": ("int", 1, 100),
    "sticky_round_robin_limit": ("int", 1, 1000),
    "model_lock_minutes": ("num", 0, 10_080),
    "exploration_rate": ("num", 0, 1),
}
_BOOLS = ("connection_aware_expansion", "promptcache_affinity", "hide_paid_models")


def _value(
    data: dict[str, Any],
    name: str,
    spec: tuple[str, float, float | None],
    check: Checker,
) -> Any:
    kind, low, high = spec
    if kind == "int":
        return check.integer(data, name, int(low), int(high) if high else None)
    return check.number(data, name, low, high)


def validate_settings(  # noqa: C901, PLR0912
    data: Any, check: Checker
) -> dict[str, Any]:
    if data is None:
        return {}
    if not isinstance(data, dict):
        check.error("", "must be a mapping")
        return {}
    allowed = set(_SCALARS) | set(_NESTED) | set(_BOOLS) | {"smart_routing_mode"}
    check.unknown_keys(data, allowed)
    out: dict[str, Any] = {}
    for name, spec in _SCALARS.items():
        if name in data:
            out[name] = _value(data, name, spec, check)
    for name in _BOOLS:
        if name in data:
            out[name] = check.boolean(data, name, False)
    if "smart_routing_mode" in data:
        out["smart_routing_mode"] = check.choice(
            data, "smart_routing_mode", ("enforce", "observe", "off")
        )
    for group, fields in _NESTED.items():
        if group not in data:
            continue
        value = data[group]
        if not isinstance(value, dict):
            check.error(group, "must be a mapping")
            continue
        sub = Checker(check.path(group))
        sub.unknown_keys(
            value, set(fields) | ({"objective"} if group == "adaptive" else set())
        )
        nested: dict[str, Any] = {}
        for name, spec in fields.items():
            if name in value:
                nested[name] = _value(value, name, spec, sub)
        if group == "adaptive" and "objective" in value:
            nested["objective"] = sub.choice(
                value, "objective", ("latency", "cost", "balanced")
            )
        check.problems += sub.problems
        out[group] = nested
    _check_exclusions(out.get("self_healing"), check)
    return out


def _check_exclusions(healing: dict[str, Any] | None, check: Checker) -> None:
    """``max_exclusion_seconds`` is at least the first exclusion (default 300)."""
    if not healing:
        return
    first = healing.get("exclusion_seconds")
    cap = healing.get("max_exclusion_seconds")
    if not isinstance(cap, int):
        return
    if not isinstance(first, int):
        first = DEFAULT_EXCLUSION_SECONDS
    if cap < first:
        check.error(
            "self_healing.max_exclusion_seconds",
            f"must be at least exclusion_seconds ({first})",
        )


#: the tables above, for the admin's settings form (combos/settings_form.py)
SCALAR_KEYS = _SCALARS
NESTED_KEYS = _NESTED
BOOL_KEYS = _BOOLS
