"""Configuration writes for the routing app: validate, write, bump — one transaction.

The admin, the REST API and ``import_config`` all call these functions, so the same
validator (``providers.validation`` and friends) guards every path into the database.
"""

from __future__ import annotations

import base64
import copy
import hashlib
import secrets
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from django.db import transaction

from combos.combo_validation import validate_combo
from combos.key_validation import (
    validate_api_key,
    validate_mapping,
    validate_override,
    validate_smart_route,
)
from combos.models import (
    ApiKey,
    CandidateOverride,
    Combo,
    ComboTarget,
    GatewaySettings,
    ModelComboMapping,
    SmartRoute,
)
from combos.settings_validation import validate_settings
from providers.models import Provider
from providers.services import MASKED, bump_config_revision
from providers.validation import Checker, ConfigIndex, Problem

KEY_PREFIX = "sk-or-"
KEY_DISPLAY_CHARS = 12


class ConfigInvalid(Exception):
    def __init__(self, problems: list[Problem]) -> None:
        super().__init__("; ".join(str(p) for p in problems))
        self.problems = problems


@dataclass(slots=True)
class SaveResult:
    instance: Any
    warnings: list[Problem] = field(default_factory=list)
    plaintext_key: str | None = None


def build_index() -> ConfigIndex:
    """The referential context of validation, read from the database."""
    index = ConfigIndex()
    for provider in Provider.objects.prefetch_related("connections", "models"):
        index.providers[provider.slug.lower()] = (
            provider.slug,
            {c.name for c in provider.connections.all()},
            {m.model_id for m in provider.models.all()}
            | {c.default_model for c in provider.connections.all() if c.default_model},
        )
    refs: dict[int, list[str]] = {}
    for target in ComboTarget.objects.filter(ref__isnull=False).select_related("ref"):
        assert target.ref is not None
        refs.setdefault(target.combo_id, []).append(target.ref.name.lower())
    for combo in Combo.objects.all():
        index.combos[combo.name.lower()] = (
            combo.name,
            combo.strategy,
            refs.get(combo.id, []),
        )
    routes = SmartRoute.objects.values_list("alias", "easy", "hard")
    index.smart_aliases = {alias for alias, _, _ in routes}
    index.smart_targets = {
        target: alias for alias, easy, hard in routes for target in (easy, hard)
    }
    index.api_keys = set(ApiKey.objects.values_list("name", flat=True))
    index.mapping_patterns = set(
        ModelComboMapping.objects.values_list("pattern", flat=True)
    )
    return index


def _raise_if(check: Checker) -> None:
    if check.problems:
        raise ConfigInvalid(check.problems)


# ------------------------------------------------------------------ combos


def combo_as_data(combo: Combo) -> dict[str, Any]:
    targets: list[dict[str, Any]] = []
    for target in combo.targets.select_related("ref").order_by("position", "id"):
        item: dict[str, Any] = {}
        if target.ref is not None:
            item["combo"] = target.ref.name
        else:
            item["model"] = target.model
            if target.connection:
                item["connection"] = target.connection
            if target.timeout_ms is not None:
                item["timeout_ms"] = target.timeout_ms
        if target.weight is not None:
            item["weight"] = target.weight
        targets.append(item)
    return {
        "name": combo.name,
        "strategy": combo.strategy,
        "active": combo.active,
        "targets": targets,
        "config": mask_config_secrets(combo.config or {}),
    }


def _nadir(config: Any) -> dict[str, Any] | None:
    auto = config.get("auto") if isinstance(config, dict) else None
    nadir = auto.get("nadir") if isinstance(auto, dict) else None
    return nadir if isinstance(nadir, dict) else None


def mask_config_secrets(config: dict[str, Any]) -> dict[str, Any]:
    """A copy of a combo ``config`` fit to show: a literal ``auto.nadir.apiKey`` (spec
    04 §2.2) becomes ``"***"``; an ``env:`` reference is shown as is (spec 07)."""
    out = copy.deepcopy(dict(config))
    nadir = _nadir(out)
    key = nadir.get("apiKey") if nadir else None
    if nadir is not None and isinstance(key, str) and not key.startswith("env:"):
        nadir["apiKey"] = MASKED
    return out


def keep_masked_secrets(
    config: dict[str, Any], previous: dict[str, Any] | None
) -> dict[str, Any]:
    """``config`` to store: an ``auto.nadir.apiKey`` of ``"***"`` (as shown by
    ``mask_config_secrets``) keeps the stored key, or is dropped when there is none."""
    nadir = _nadir(config)
    if nadir is None or nadir.get("apiKey") != MASKED:
        return config
    out = copy.deepcopy(config)
    stored = _nadir(previous or {})
    kept = stored.get("apiKey") if stored else None
    if isinstance(kept, str) and kept != MASKED:
        out["auto"]["nadir"]["apiKey"] = kept
    else:
        del out["auto"]["nadir"]["apiKey"]
    return out


def check_combo(
    data: dict[str, Any],
    index: ConfigIndex,
    *,
    path: str = "",
    previous_name: str | None = None,
) -> tuple[dict[str, Any], Checker]:
    """Validate ``data`` as it would stand after the write (index updated in place)."""
    check = Checker(path)
    name = data.get("name")
    if isinstance(name, str):
        lowered = name.lower()
        clash = index.combos.get(lowered)
        if clash is not None and (
            previous_name is None or previous_name.lower() != lowered
        ):
            check.error(
                "name",
                f"a combo named '{clash[0]}' already exists "
                "(names are unique ignoring case)",
            )
        if previous_name is not None and previous_name.lower() != lowered:
            index.combos.pop(previous_name.lower(), None)
        targets = data.get("targets")
        refs = [
            str(t["combo"]).lower()
            for t in (targets if isinstance(targets, list) else [])
            if isinstance(t, dict) and isinstance(t.get("combo"), str)
        ]
        index.combos[lowered] = (name, str(data.get("strategy", "priority")), refs)
    clean = validate_combo(data, check, index)
    return clean, check


def _write_combo(combo: Combo, clean: dict[str, Any]) -> Combo:
    combo.name = clean["name"]
    combo.strategy = clean["strategy"]
    combo.active = clean["active"]
    combo.config = keep_masked_secrets(clean["config"], combo.config)
    combo.save()
    combo.targets.all().delete()
    by_name = {c.name.lower(): c for c in Combo.objects.all()}
    ComboTarget.objects.bulk_create(
        [
            ComboTarget(
                combo=combo,
                position=position,
                model=t.get("model") or "",
                connection=t.get("connection") or "",
                ref=by_name.get(str(t["combo"]).lower()) if t.get("combo") else None,
                weight=t.get("weight"),
                timeout_ms=t.get("timeout_ms"),
            )
            for position, t in enumerate(clean["targets"])
        ]
    )
    return combo


@transaction.atomic
def save_combo(data: dict[str, Any], instance: Combo | None = None) -> SaveResult:
    index = build_index()
    clean, check = check_combo(
        data, index, previous_name=instance.name if instance else None
    )
    _raise_if(check)
    combo = _write_combo(instance or Combo(), clean)
    bump_config_revision()
    return SaveResult(combo, check.warnings)


def combo_referrers(combo: Combo) -> list[str]:
    names = [
        f"combo {t.combo.name}" for t in combo.referenced_by.select_related("combo")
    ]
    names += [f"mapping {m.pattern}" for m in combo.mappings.all()]
    return names


class ComboInUse(Exception):
    pass


@transaction.atomic
def delete_combo(combo: Combo) -> None:
    referrers = combo_referrers(combo)
    if referrers:
        raise ComboInUse(
            f"combo '{combo.name}' is referenced by: {', '.join(referrers)}"
        )
    combo.delete()
    bump_config_revision()


# ------------------------------------------------------------------ keys


def generate_api_key() -> str:
    """``sk-or-`` + 43 base64url characters (32 random bytes, spec 08 §5.1)."""
    raw = base64.urlsafe_b64encode(secrets.token_bytes(32)).decode("ascii").rstrip("=")
    return KEY_PREFIX + raw


def hash_api_key(key: str) -> str:
    return hashlib.sha256(key.encode("utf-8")).hexdigest()


def _apply_key(key: ApiKey, clean: dict[str, Any]) -> None:
    key.name = clean["name"]
    key.active = clean["active"]
    key.expires_at = clean["expires_at"]
    key.allowed_models = clean["allowed_models"]
    key.rpm, key.tpm = clean["rpm"], clean["tpm"]
    budget = clean["budget_usd"]
    key.budget_usd = (
        None if budget is None else Decimal(str(budget)).quantize(Decimal("0.0001"))
    )
    key.budget_period = clean["budget_period"] or ApiKey.Period.MONTH
    key.failover_defaults = clean["failover_defaults"]


def check_api_key(
    data: dict[str, Any], index: ConfigIndex, *, path: str = ""
) -> tuple[dict[str, Any], Checker]:
    check = Checker(path)
    return validate_api_key(data, check, index), check


def literal_key(clean: dict[str, Any]) -> str | None:
    """The literal key a validated API key sets, if any (``"***"`` keeps the old)."""
    key = clean.get("key")
    return key if isinstance(key, str) and key != MASKED else None


def key_owner(literal: str, *, other_than: str | None) -> str | None:
    """The name of the stored API key, other than ``other_than``, whose key is
    ``literal`` (digests are unique, spec 08 §5.1)."""
    return (
        ApiKey.objects.filter(key_hash=hash_api_key(literal))
        .exclude(name=other_than)
        .values_list("name", flat=True)
        .first()
    )


@transaction.atomic
def save_api_key(data: dict[str, Any], instance: ApiKey | None = None) -> SaveResult:
    """Create (plaintext returned once) or update a key; the hash never changes here
    unless ``data['key']`` carries a new literal key."""
    clean, check = check_api_key(data, build_index())
    if (
        instance is None
        and clean["name"]
        and ApiKey.objects.filter(name=clean["name"]).exists()
    ):
        check.error("name", f"an API key named '{clean['name']}' already exists")
    literal = literal_key(clean)
    if literal is not None:
        owner = key_owner(literal, other_than=instance.name if instance else None)
        if owner is not None:
            check.error("key", f"is already the key of API key '{owner}'")
    _raise_if(check)
    key = instance or ApiKey()
    _apply_key(key, clean)
    plaintext = None
    if literal is not None:
        key.key_hash, key.prefix = hash_api_key(literal), literal[:KEY_DISPLAY_CHARS]
    elif instance is None:
        plaintext = generate_api_key()
        key.key_hash, key.prefix = (
            hash_api_key(plaintext),
            plaintext[:KEY_DISPLAY_CHARS],
        )
    key.save()
    bump_config_revision()
    return SaveResult(key, check.warnings, plaintext)


@transaction.atomic
def delete_api_key(key: ApiKey) -> None:
    key.delete()
    bump_config_revision()


# ------------------------------------------------------ mappings, overrides, smart


@transaction.atomic
def save_mapping(
    data: dict[str, Any], instance: ModelComboMapping | None = None
) -> SaveResult:
    check = Checker("")
    clean = validate_mapping(data, check, build_index())
    _raise_if(check)
    combo = Combo.objects.get(name=clean["combo"])
    twin = ModelComboMapping.objects.filter(pattern=clean["pattern"], combo=combo)
    if instance is not None:
        twin = twin.exclude(pk=instance.pk)
    if twin.exists():
        raise ConfigInvalid(
            [
                Problem(
                    "pattern",
                    f"a mapping of '{clean['pattern']}' to combo '{combo.name}' "
                    "already exists",
                )
            ]
        )
    mapping = instance or ModelComboMapping()
    mapping.pattern = clean["pattern"]
    mapping.combo = combo
    mapping.priority = clean["priority"]
    mapping.save()
    bump_config_revision()
    return SaveResult(mapping)


@transaction.atomic
def save_override(
    data: dict[str, Any], instance: CandidateOverride | None = None
) -> SaveResult:
    check = Checker("")
    clean = validate_override(data, check, build_index())
    _raise_if(check)
    api_key = ApiKey.objects.get(name=clean["api_key"])
    twin = CandidateOverride.objects.filter(api_key=api_key, channel=clean["channel"])
    if instance is not None:
        twin = twin.exclude(pk=instance.pk)
    if twin.exists():
        raise ConfigInvalid(
            [
                Problem(
                    "channel",
                    f"key '{api_key.name}' already has an override for channel "
                    f"'{clean['channel']}'",
                )
            ]
        )
    override = instance or CandidateOverride()
    override.api_key = api_key
    override.channel = clean["channel"]
    override.exclude = clean["exclude"]
    override.save()
    bump_config_revision()
    return SaveResult(override)


def candidate_keys() -> dict[str, list[str]]:
    """The candidate keys ``provider/model@connection`` the catalog yields now, by
    provider slug (spec 04 §2.1, the form of ``candidate_overrides.exclude``).

    Every active connection gives one key per catalog model of its provider, then
    one for its ``default_model`` if that has no catalog row; connections in
    priority then name order, models in catalog order. Credentials are not checked:
    this lists what an override may name, not who is servable right now.
    """
    groups: dict[str, list[str]] = {}
    for provider in Provider.objects.prefetch_related("connections", "models"):
        catalog = [m.model_id for m in provider.models.all()]
        keys: list[str] = []
        for connection in provider.connections.all():
            if not connection.active:
                continue
            models = list(catalog)
            if connection.default_model and connection.default_model not in catalog:
                models.append(connection.default_model)
            keys += [f"{provider.slug}/{m}@{connection.name}" for m in models]
        if keys:
            groups[provider.slug] = keys
    return groups


@transaction.atomic
def save_smart_route(
    data: dict[str, Any], instance: SmartRoute | None = None
) -> SaveResult:
    index = build_index()
    if instance is not None:
        index.drop_smart_route(instance.alias)
    check = Checker("")
    clean = validate_smart_route(data, check, index)
    _raise_if(check)
    twin = SmartRoute.objects.filter(alias=clean["alias"])
    if instance is not None:
        twin = twin.exclude(pk=instance.pk)
    if twin.exists():
        raise ConfigInvalid([Problem("alias", "already exists")])
    route = instance or SmartRoute()
    for name in ("alias", "easy", "hard", "threshold", "session_ttl_seconds"):
        setattr(route, name, clean[name])
    route.save()
    bump_config_revision()
    return SaveResult(route, check.warnings)


@transaction.atomic
def save_settings(data: Any) -> SaveResult:
    check = Checker("settings")
    clean = validate_settings(data, check)
    _raise_if(check)
    row, _ = GatewaySettings.objects.get_or_create(id=1)
    row.data = clean
    row.save()
    bump_config_revision()
    return SaveResult(row)


@transaction.atomic
def delete_instance(instance: Any) -> None:
    """Delete a mapping, override or smart route and publish the change."""
    instance.delete()
    bump_config_revision()
