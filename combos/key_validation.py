"""Validation of API keys, candidate overrides, model->combo mappings, smart routes and
the gateway ``settings:`` block (spec 07, 02 §13, 04 §2.3, 05 §2.1)."""

from __future__ import annotations

import os
import re
from datetime import UTC, date, datetime
from typing import Any

from gateway.kernel.autoids import (
    CATEGORIES,
    VARIANTS,
    UnknownAutoVariant,
    parse_auto_id,
)
from gateway.kernel.globs import compile_glob
from gateway.kernel.smart import MAX_SCORE
from providers.validation import ON_ORDER, Checker, ConfigIndex

#: any visible ASCII (it travels in an Authorization header), 1..200 characters
API_KEY_FORMAT = re.compile(r"^[\x21-\x7e]{1,200}$")
ENV_PREFIX = "env:"
KEY_KEYS = frozenset(
    {
        "name",
        "key",
        "active",
        "expires_at",
        "allowed_models",
        "rpm",
        "tpm",
        "budget_usd",
        "budget_period",
        "failover_defaults",
    }
)
DEFAULTS_KEYS = frozenset({"models", "timeout_ms", "first_token_timeout_ms", "on"})
MAPPING_KEYS = frozenset({"pattern", "combo", "priority"})
OVERRIDE_KEYS = frozenset({"api_key", "channel", "exclude"})
SMART_KEYS = frozenset({"alias", "easy", "hard", "threshold", "session_ttl_seconds"})
TARGET_KEY = re.compile(r"^[^/@\s]+/[^@\s]+@[^@\s]+$")
#: the largest value of the integer columns (``ApiKey.tpm`` is a PositiveIntegerField)
MAX_INT_COLUMN = 2_147_483_647


def _expiry(value: Any, check: Checker) -> datetime | None:
    if value is None:
        return None
    if isinstance(value, datetime):
        return value if value.tzinfo else value.replace(tzinfo=UTC)
    if isinstance(value, date):
        return datetime(value.year, value.month, value.day, tzinfo=UTC)
    if isinstance(value, str):
        try:
            parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
        except ValueError:
            check.error("expires_at", "must be an ISO 8601 date-time")
            return None
        return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)
    check.error("expires_at", "must be an ISO 8601 date-time")
    return None


def validate_failover_defaults(  # noqa: C901, PLR0912
    value: Any, check: Checker, index: ConfigIndex, allowed: list[str] | None
) -> dict[str, Any] | None:
    """Spec 02 §13; the stored object keeps only the keys that are set."""
    if value is None or value == {}:
        return None
    if not isinstance(value, dict):
        check.error("failover_defaults", "must be a mapping")
        return None
    sub = Checker(check.path("failover_defaults"))
    sub.unknown_keys(value, DEFAULTS_KEYS)
    models = value.get("models")
    out: dict[str, Any] = {}
    if not isinstance(models, list) or not 1 <= len(models) <= 3:  # noqa: PLR2004
        sub.error("models", "is required: a list of 1..3 model strings")
    else:
        identities: set[str] = set()
        for position, model in enumerate(models):
            where = f"models[{position}]"
            if not isinstance(model, str) or not model:
                sub.error(where, "must be a non-empty model string")
            elif model not in index.smart_aliases and not index.resolves(model):
                sub.error(where, f"unknown model '{model}'")
            elif allowed is not None and not _permitted(model, index, allowed):
                sub.error(where, f"'{model}' is not permitted by allowed_models")
            elif _identity(model, index) in identities:
                sub.error(where, f"duplicate of an earlier entry ('{model}')")
            else:
                identities.add(_identity(model, index))
        out["models"] = list(models)
    timeout = sub.integer(value, "timeout_ms", 1000, 300_000)
    first = sub.integer(value, "first_token_timeout_ms", 500, 60_000)
    if timeout is not None:
        out["timeout_ms"] = timeout
    if first is not None:
        out["first_token_timeout_ms"] = first
    on = value.get("on")
    if on is not None:
        if not isinstance(on, list) or any(item not in ON_ORDER for item in on):
            sub.error("on", f"must be a list of: {', '.join(ON_ORDER)}")
        else:
            out["on"] = [reason for reason in ON_ORDER if reason in on]
    check.problems += sub.problems
    return out


def _permitted(model: str, index: ConfigIndex, allowed: list[str]) -> bool:
    """Spec 03 §1.2: a glob matches the string as sent or its resolved form."""
    resolved = index.resolved_name(model) or model
    return any(
        compile_glob(glob).fullmatch(model) or compile_glob(glob).fullmatch(resolved)
        for glob in allowed
    )


def _identity(model: str, index: ConfigIndex) -> str:
    """Spec 02 §2 identity: ``combo:<name>``, the auto route id, ``provider/model``
    or ``*/<id>`` (compared ignoring case)."""
    if model in index.smart_aliases:  # an alias is itself (spec 05 §2.1)
        return f"alias:{model}"
    resolved = (index.resolved_name(model) or model).lower()
    if model.lower().removeprefix("combo/") in index.combos:
        return f"combo:{resolved}"
    return resolved


def validate_api_key(
    data: dict[str, Any], check: Checker, index: ConfigIndex
) -> dict[str, Any]:
    check.unknown_keys(data, KEY_KEYS)
    key = data.get("key")
    if isinstance(key, str) and key.startswith(ENV_PREFIX):
        # hashed when stored, so the variable is read now (import, REST, admin)
        variable = key.removeprefix(ENV_PREFIX)
        key = os.environ.get(variable)
        if not key:
            check.error("key", f"environment variable {variable!r} is not set")
            key = None
    if key is not None and (
        not isinstance(key, str) or (key != "***" and not API_KEY_FORMAT.fullmatch(key))
    ):
        check.error("key", "must be 1..200 visible ASCII characters")
        key = None
    allowed = check.string_list(data, "allowed_models")
    if allowed is not None and not allowed:
        allowed = None
    budget = check.number(data, "budget_usd", 0, 1_000_000_000)
    return {
        "name": check.string(data, "name", required=True, max_len=100),
        "key": key,
        "active": check.boolean(data, "active", True),
        "expires_at": _expiry(data.get("expires_at"), check),
        "allowed_models": allowed,
        "rpm": check.integer(data, "rpm", 1, 10_000_000),
        "tpm": check.integer(data, "tpm", 1, MAX_INT_COLUMN),
        "budget_usd": budget,
        "budget_period": check.choice(
            data, "budget_period", ("day", "week", "month"), default="month"
        ),
        "failover_defaults": validate_failover_defaults(
            data.get("failover_defaults"), check, index, allowed
        ),
    }


def validate_mapping(
    data: dict[str, Any], check: Checker, index: ConfigIndex
) -> dict[str, Any]:
    check.unknown_keys(data, MAPPING_KEYS)
    pattern = check.string(data, "pattern", required=True)
    combo = check.string(data, "combo", required=True, max_len=64)
    if combo is not None:
        if combo.lower() not in index.combos:
            check.error("combo", f"unknown combo '{combo}'")
        else:
            combo = index.combos[combo.lower()][0]
    return {
        "pattern": pattern,
        "combo": combo,
        "priority": check.integer(data, "priority", -1_000_000, 1_000_000, default=0),
    }


def _valid_channel(channel: str) -> bool:
    if channel == "auto":
        return True
    try:
        return parse_auto_id(f"auto/{channel}") == f"auto/{channel}"
    except UnknownAutoVariant:
        return False


def validate_override(
    data: dict[str, Any], check: Checker, index: ConfigIndex
) -> dict[str, Any]:
    check.unknown_keys(data, OVERRIDE_KEYS)
    key = check.string(data, "api_key", required=True, max_len=100)
    if key is not None and key not in index.api_keys:
        check.error("api_key", f"unknown API key '{key}'")
    channel = check.string(data, "channel", required=True, max_len=64)
    if channel is not None and not _valid_channel(channel):
        check.error(
            "channel",
            "must be 'auto' or the suffix of a built-in auto id "
            f"(variants {', '.join(VARIANTS)}; categories {', '.join(CATEGORIES)})",
        )
    exclude = check.string_list(data, "exclude") or []
    for position, item in enumerate(exclude):
        if not TARGET_KEY.fullmatch(item):
            check.error(f"exclude[{position}]", "must be provider/model@connection")
    return {"api_key": key, "channel": channel, "exclude": exclude}


def validate_smart_route(
    data: dict[str, Any], check: Checker, index: ConfigIndex
) -> dict[str, Any]:
    check.unknown_keys(data, SMART_KEYS)
    alias = check.string(data, "alias", required=True, max_len=100)
    if alias is not None:
        lowered = alias.lower()
        if re.search(r"\s", alias):
            check.error("alias", "must not contain whitespace")
        elif lowered == "auto" or lowered.startswith(("auto/", "combo/")):
            check.error("alias", "must not be auto, auto/… or combo/…")
        elif (route_of := index.smart_targets.get(alias)) not in (None, alias):
            check.error("alias", f"is a target of smart route '{route_of}'")
        elif lowered in index.combos:
            # Same text shape as COMBO_NAME_SHADOWS_MODEL; a combo has no provider.
            shadowed = index.combos[lowered][0]
            check.warn("alias", f"SMART_ALIAS_SHADOWS_MODEL: {alias} (/{shadowed})")
        elif (owner := index.bare_model_owner(alias)) is not None:
            check.warn(
                "alias", f"SMART_ALIAS_SHADOWS_MODEL: {alias} ({owner[0]}/{owner[1]})"
            )
    out: dict[str, Any] = {"alias": alias}
    for tier in ("easy", "hard"):
        target = check.string(data, tier, required=True)
        if target is not None:
            if target in index.smart_aliases or target == alias:
                check.error(tier, "must not be a smart alias")
            elif not index.resolves(target):
                check.error(tier, f"unknown model or combo '{target}'")
        out[tier] = target
    out["threshold"] = _threshold(data, check)
    out["session_ttl_seconds"] = check.integer(
        data, "session_ttl_seconds", 60, 86_400, default=1800
    )
    return out


#: what the admin's threshold field says (spec 05 §2.1, §2.2)
THRESHOLD_HELP = (
    f"A request whose classifier score reaches this goes to hard, below it to easy "
    f"(explicit reasoning always goes to hard). Scores run from 0 to {MAX_SCORE}: "
    f"a code block scores 3, an effort phrase 4, tools 2. Default 4; 1 to {MAX_SCORE}."
)


def _threshold(data: dict[str, Any], check: Checker) -> int | None:
    """1 to the classifier's highest score: a higher threshold is never reached, so
    every request would go to ``easy`` (spec 05 §2.2, issue #15)."""
    value = check.integer(data, "threshold", 1, None, default=4)
    if value is not None and value > MAX_SCORE:
        check.error(
            "threshold",
            f"must be between 1 and {MAX_SCORE}: the classifier never scores more "
            f"than {MAX_SCORE}, so a higher threshold sends every request to easy",
        )
        return 4
    return value
