"""``export_config``: the current configuration in the import format (spec 07).

Secrets never leave in clear: a connection's key and a combo's ``auto.nadir.apiKey``
are their ``env:`` reference or ``"***"``; an API key is always ``"***"``.
Re-importing an export changes nothing (``"***"`` keeps the stored secret).
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

import yaml

from combos.models import (
    ApiKey,
    CandidateOverride,
    Combo,
    GatewaySettings,
    ModelComboMapping,
    SmartRoute,
)
from combos.services import combo_as_data
from providers.models import Provider


def _connection(conn: Any) -> dict[str, Any]:
    out: dict[str, Any] = {"name": conn.name}
    if conn.api_key_ref:
        out["api_key"] = conn.api_key_ref
    elif conn.api_key_encrypted:
        out["api_key"] = "***"
    # the kind's other secrets (spec 10 §3): references as they are, literals masked
    out.update(dict.fromkeys(conn.stored_secrets(), "***"))
    out.update(conn.secret_refs or {})
    out.update(conn.settings or {})
    out.update(
        tier=conn.tier,
        active=conn.active,
        priority=conn.priority,
        max_concurrency=conn.max_concurrency,
    )
    if conn.default_model:
        out["default_model"] = conn.default_model
    quota = {
        k: v
        for k, v in (
            ("remaining_percent", conn.quota_remaining_percent),
            ("reset_interval_seconds", conn.quota_reset_interval_seconds),
        )
        if v is not None
    }
    if quota:
        out["quota"] = quota
    return out


def _proxy(provider: Any) -> dict[str, Any]:
    """``proxy_url`` as exported: masked when it carries credentials."""
    url = provider.proxy_url
    if not url:
        return {}
    return {"proxy_url": "***" if urlsplit(url).password else url}


def _model(model: Any) -> dict[str, Any]:
    out: dict[str, Any] = {"id": model.model_id}
    for name in (
        "input_cost",
        "output_cost",
        "cache_read_cost",
        "cache_write_cost",
        "context_window",
        "max_output_tokens",
        "capabilities",
    ):
        value = getattr(model, name)
        if value is not None:
            out[name] = value
    if model.tier:
        out["tier"] = model.tier
    if model.wire:
        out["wire"] = model.wire
    if model.deployment:
        out["deployment"] = model.deployment
    return out


def _key(key: ApiKey) -> dict[str, Any]:
    out: dict[str, Any] = {"name": key.name, "key": "***", "active": key.active}
    if key.expires_at is not None:
        out["expires_at"] = key.expires_at.isoformat().replace("+00:00", "Z")
    if key.allowed_models:
        out["allowed_models"] = list(key.allowed_models)
    for name in ("rpm", "tpm"):
        if getattr(key, name) is not None:
            out[name] = getattr(key, name)
    if key.budget_usd is not None:
        out["budget_usd"] = float(key.budget_usd)
    out["budget_period"] = key.budget_period
    if key.failover_defaults:
        out["failover_defaults"] = dict(key.failover_defaults)
    return out


def export_data() -> dict[str, Any]:
    providers = [
        {
            "slug": p.slug,
            "kind": p.kind,
            "base_url": p.base_url,
            **({"wire": p.wire} if p.wire != "chat" else {}),
            **({"preset": p.preset} if p.preset else {}),
            **dict(p.settings or {}),
            **_proxy(p),
            "connections": [
                _connection(c) for c in p.connections.order_by("priority", "name")
            ],
            "models": [_model(m) for m in p.models.order_by("position", "model_id")],
        }
        for p in Provider.objects.order_by("slug")
    ]
    data: dict[str, Any] = {
        "providers": providers,
        "combos": [combo_as_data(c) for c in Combo.objects.order_by("name")],
        "model_combo_mappings": [
            {"pattern": m.pattern, "combo": m.combo.name, "priority": m.priority}
            for m in ModelComboMapping.objects.select_related("combo")
        ],
        "api_keys": [_key(k) for k in ApiKey.objects.order_by("name")],
        "candidate_overrides": [
            {
                "api_key": o.api_key.name,
                "channel": o.channel,
                "exclude": list(o.exclude),
            }
            for o in CandidateOverride.objects.select_related("api_key")
        ],
        "smart_routes": [
            {
                "alias": r.alias,
                "easy": r.easy,
                "hard": r.hard,
                "threshold": r.threshold,
                "session_ttl_seconds": r.session_ttl_seconds,
            }
            for r in SmartRoute.objects.order_by("alias")
        ],
    }
    row = GatewaySettings.objects.filter(id=1).first()
    data["settings"] = dict(row.data) if row is not None else {}
    return data


def export_yaml() -> str:
    return yaml.safe_dump(export_data(), sort_keys=False, allow_unicode=True)


def _smart_route(obj: SmartRoute) -> dict[str, Any]:
    return {
        "alias": obj.alias,
        "easy": obj.easy,
        "hard": obj.hard,
        "threshold": obj.threshold,
        "session_ttl_seconds": obj.session_ttl_seconds,
    }


def _mapping(obj: ModelComboMapping) -> dict[str, Any]:
    return {"pattern": obj.pattern, "combo": obj.combo.name, "priority": obj.priority}


def _override(obj: CandidateOverride) -> dict[str, Any]:
    return {
        "api_key": obj.api_key.name,
        "channel": obj.channel,
        "exclude": list(obj.exclude),
    }


def _settings(obj: GatewaySettings) -> dict[str, Any]:
    return dict(obj.data or {})


_SNAPSHOTS: tuple[tuple[type, Any], ...] = (
    (Combo, combo_as_data),
    (ApiKey, _key),
    (SmartRoute, _smart_route),
    (ModelComboMapping, _mapping),
    (CandidateOverride, _override),
    (GatewaySettings, _settings),
)


def snapshot_of(obj: Any) -> dict[str, Any]:
    """One configuration row as the export writes it (secrets masked): the admin's
    change history compares two of these (issue #15)."""
    for model, snapshot in _SNAPSHOTS:
        if isinstance(obj, model):
            return dict(snapshot(obj))
    return {}
