"""The gateway settings as a form (issue #15): one field per key, its default shown.

The fields come from the validator's own tables (``combos.settings_validation``), so a
key the YAML accepts always has its field; ``DEFAULTS`` and ``HELP`` say what an empty
field means (spec 07 ``settings:``, 04 §6, 05 §3.5).  Only the fields the operator fills
are stored, as with the YAML block; the validator checks the result and each problem
lands on its field.
"""

from __future__ import annotations

from typing import Any

from django import forms

from combos.settings_validation import BOOL_KEYS as _BOOLS
from combos.settings_validation import NESTED_KEYS as _NESTED
from combos.settings_validation import SCALAR_KEYS as _SCALARS
from providers.validation import Problem, plain_number

DEFAULTS: dict[str, Any] = {
    "attempt_timeout_ms": 120_000,
    "stream_idle_timeout_ms": 120_000,
    "max_attempts_per_request": 20,
    "sticky_round_robin_limit": 3,
    "model_lock_minutes": 10,
    "exploration_rate": 0.05,
    "connection_aware_expansion": False,
    "promptcache_affinity": True,
    "hide_paid_models": False,
    "smart_routing_mode": "enforce",
    "breaker.consecutive_failures": 5,
    "breaker.window_seconds": 60,
    "breaker.min_requests": 10,
    "breaker.failure_ratio": 0.5,
    "breaker.open_seconds": 30,
    "breaker.max_open_seconds": 300,
    "breaker.partial_open_seconds": 5,
    "cooldown.base_seconds": 30,
    "cooldown.max_seconds": 300,
    "cooldown.max_retry_after_seconds": 3600,
    "auth_disable.seconds": 300,
    "auth_disable.max_seconds": 3600,
    "adaptive.objective": "balanced",
    "adaptive.min_weight_fraction": 0.05,
    "adaptive.trickle_fraction": 0.02,
    "adaptive.warm_cache_weight": 8,
    "adaptive.warm_cache_ttl_seconds": 600,
    "self_healing.exclusion_seconds": 300,
    "self_healing.max_exclusion_seconds": 1800,
}

HELP: dict[str, str] = {
    "attempt_timeout_ms": "Per-attempt timeout when nothing more specific sets one.",
    "stream_idle_timeout_ms": "Longest silence between upstream bytes after the "
    "first token.",
    "max_attempts_per_request": "Upstream calls per request, composite slots included.",
    "sticky_round_robin_limit": "Requests a round-robin target keeps before the "
    "next one.",
    "model_lock_minutes": "How long a model that answered 404 stays locked on its "
    "connection.",
    "exploration_rate": "Share of auto requests that try a non-best candidate.",
    "connection_aware_expansion": "Expand combo targets into one slot per connection.",
    "promptcache_affinity": "Keep a conversation on the connection that holds its "
    "prompt cache.",
    "hide_paid_models": "Leave paid models out of auto pools.",
    "smart_routing_mode": "enforce routes by tier; observe only logs the verdict; "
    "off skips the classifier.",
    "breaker.consecutive_failures": "Failures in a row that open the circuit.",
    "breaker.window_seconds": "The failure-ratio window.",
    "breaker.min_requests": "Requests in the window before the ratio counts.",
    "breaker.failure_ratio": "Failure share in the window that opens the circuit.",
    "breaker.open_seconds": "First open period; doubled after each failed probe.",
    "breaker.max_open_seconds": "Longest open period.",
    "breaker.partial_open_seconds": "Open period when the failures in a row hit a "
    "connection that mostly answers (a partial outage).",
    "cooldown.base_seconds": "First rate-limit cooldown without Retry-After; "
    "doubled after each.",
    "cooldown.max_seconds": "Longest cooldown without Retry-After.",
    "cooldown.max_retry_after_seconds": "Retry-After honoured exactly up to this.",
    "auth_disable.seconds": "First disable after a 401/402/403; doubled after each.",
    "auth_disable.max_seconds": "Longest auth disable.",
    "adaptive.objective": "What adaptive optimises: latency, cost or balanced.",
    "adaptive.min_weight_fraction": "Floor of each target's draw weight.",
    "adaptive.trickle_fraction": "Share of picks that go to the other drawn target "
    "without a comparison.",
    "adaptive.warm_cache_weight": "Weight bonus of a target with a warm prompt cache.",
    "adaptive.warm_cache_ttl_seconds": "How long a prompt cache counts as warm.",
    "self_healing.exclusion_seconds": "First exclusion of an auto candidate that "
    "keeps failing; doubled after each.",
    "self_healing.max_exclusion_seconds": "Longest exclusion (at least the first).",
}

CHOICES: dict[str, tuple[str, ...]] = {
    "smart_routing_mode": ("enforce", "observe", "off"),
    "adaptive.objective": ("latency", "cost", "balanced"),
}
GROUP_TITLES = {
    "": "Requests",
    "breaker": "Circuit breaker (per connection)",
    "cooldown": "Rate-limit cooldown (per connection)",
    "auth_disable": "Auth disable (per connection)",
    "adaptive": "Adaptive routing",
    "self_healing": "Self-healing (auto)",
}


def field_name(key: str) -> str:
    """``breaker.open_seconds`` -> ``breaker__open_seconds`` (a form field name)."""
    return key.replace(".", "__")


def _default_text(key: str) -> str:
    value = DEFAULTS[key]
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return plain_number(value)
    return str(value)


def _number_field(key: str, spec: tuple[str, float, float | None]) -> forms.Field:
    kind, low, high = spec
    bounds = (
        f"{plain_number(low)} to {plain_number(high)}"
        if high is not None
        else f"at least {plain_number(low)}"
    )
    text = f"{HELP[key]} Default {_default_text(key)}; allowed {bounds}."
    attrs = {"placeholder": _default_text(key)}
    if kind == "int":
        return forms.IntegerField(
            required=False,
            min_value=int(low),
            max_value=int(high) if high is not None else None,
            help_text=text,
            widget=forms.NumberInput(attrs=attrs),
        )
    return forms.FloatField(
        required=False,
        min_value=low,
        max_value=high,
        help_text=text,
        widget=forms.NumberInput(attrs={**attrs, "step": "any"}),
    )


def _choice_field(key: str, options: tuple[str, ...]) -> forms.Field:
    return forms.ChoiceField(
        required=False,
        choices=[("", f"default ({_default_text(key)})"), *((o, o) for o in options)],
        help_text=HELP[key],
    )


def settings_fields() -> dict[str, tuple[str, forms.Field]]:
    """field name -> (settings key, form field), in the table's order."""
    out: dict[str, tuple[str, forms.Field]] = {}
    for key, spec in _SCALARS.items():
        out[field_name(key)] = (key, _number_field(key, spec))
    for key in _BOOLS:
        out[field_name(key)] = (key, _choice_field(key, ("true", "false")))
    key = "smart_routing_mode"
    out[field_name(key)] = (key, _choice_field(key, CHOICES[key]))
    for group, fields in _NESTED.items():
        if group == "adaptive":
            key = "adaptive.objective"
            out[field_name(key)] = (key, _choice_field(key, CHOICES[key]))
        for name, spec in fields.items():
            key = f"{group}.{name}"
            out[field_name(key)] = (key, _number_field(key, spec))
    return out


def initial_values(data: dict[str, Any]) -> dict[str, Any]:
    """Stored settings -> the fields' initial values."""
    initial: dict[str, Any] = {}
    for name, (key, _field) in settings_fields().items():
        group, _, leaf = key.rpartition(".")
        source = data.get(group, {}) if group else data
        if isinstance(source, dict) and leaf in source:
            value = source[leaf]
            if isinstance(value, bool):
                value = "true" if value else "false"
            elif isinstance(value, float) and value.is_integer():
                value = int(value)  # typed 12, shown as 12 again, not 12.0
            initial[name] = value
    return initial


def settings_data(cleaned: dict[str, Any]) -> dict[str, Any]:
    """The filled fields -> the ``settings:`` block (only what was set)."""
    data: dict[str, Any] = {}
    for name, (key, _field) in settings_fields().items():
        value = cleaned.get(name)
        if value is None or value == "":
            continue
        if key in _BOOLS:
            value = value == "true"
        group, _, leaf = key.rpartition(".")
        (data.setdefault(group, {}) if group else data)[leaf] = value
    return data


def field_of(problem: Problem) -> str | None:
    """The field a validator problem (path ``settings.breaker.x``) belongs to."""
    path = problem.path.removeprefix("settings").lstrip(".")
    name = field_name(path)
    return name if name in settings_fields() else None


def fieldsets() -> list[tuple[str, dict[str, Any]]]:
    groups: dict[str, list[str]] = {}
    for name, (key, _field) in settings_fields().items():
        group = key.rpartition(".")[0]
        groups.setdefault(group, []).append(name)
    return [
        (GROUP_TITLES.get(group, group), {"fields": tuple(names)})
        for group, names in groups.items()
    ]
