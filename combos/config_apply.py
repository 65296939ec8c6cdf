"""Writes a validated import plan (``combos.config_file``) with change detection.

Each row is upserted by its natural key and saved only when a field differs, so the
report (``ImportReport``, built here) says exactly what changed and a repeated import
writes nothing.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from combos import services
from combos.models import (
    ApiKey,
    CandidateOverride,
    Combo,
    ComboTarget,
    GatewaySettings,
    ModelComboMapping,
    SmartRoute,
)
from providers import crypto
from providers.models import Connection, Provider, ProviderModel
from providers.services import MASKED, apply_connection_fields, apply_model_fields
from providers.validation import Problem


@dataclass(slots=True)
class ImportReport:
    """What an import did: per kind of row, how many were created, updated, left
    unchanged and deleted (``changed`` once any was not unchanged); the API keys it
    generated, as (name, plaintext); the plan's warnings (``import_config``)."""

    changed: bool = False
    counts: dict[str, dict[str, int]] = field(default_factory=dict)
    generated_keys: list[tuple[str, str]] = field(default_factory=list)
    warnings: list[Problem] = field(default_factory=list)

    def count(self, kind: str, outcome: str) -> None:
        bucket = self.counts.setdefault(
            kind, {"created": 0, "updated": 0, "unchanged": 0, "deleted": 0}
        )
        bucket[outcome] += 1
        if outcome != "unchanged":
            self.changed = True


def _fields(instance: Any, names: tuple[str, ...]) -> tuple[Any, ...]:
    return tuple(getattr(instance, name) for name in names)


def _upsert(
    report: ImportReport,
    kind: str,
    instance: Any,
    created: bool,
    before: tuple[Any, ...],
    names: tuple[str, ...],
) -> None:
    if created:
        instance.save()
        report.count(kind, "created")
    elif _fields(instance, names) != before:
        instance.save()
        report.count(kind, "updated")
    else:
        report.count(kind, "unchanged")


_CONN_FIELDS = (
    "tier",
    "default_model",
    "active",
    "priority",
    "max_concurrency",
    "quota_remaining_percent",
    "quota_reset_interval_seconds",
    "api_key_ref",
    "api_key_encrypted",
    "settings",
)
_MODEL_FIELDS = (
    "input_cost",
    "output_cost",
    "cache_read_cost",
    "cache_write_cost",
    "context_window",
    "max_output_tokens",
    "capabilities",
    "tier",
    "wire",
    "deployment",
    "position",
)


def _same_secret(connection: Connection, value: str | None) -> bool:
    if value is None or value == MASKED:
        return True
    if value.startswith("env:"):
        return connection.api_key_ref == value
    if not connection.api_key_encrypted:
        return value == ""
    try:
        return crypto.decrypt(connection.api_key_encrypted) == value
    except crypto.SecretUnreadable:
        return False


def _apply_provider(data: dict[str, Any], report: ImportReport, prune: bool) -> None:
    provider = Provider.objects.filter(slug__iexact=data["slug"]).first()
    created = provider is None
    provider = provider or Provider(slug=data["slug"])
    own = ("slug", "kind", "base_url", "wire", "preset", "settings")
    before = _fields(provider, own)
    old_proxy = provider.proxy_url
    provider.slug, provider.kind, provider.base_url = (
        data["slug"],
        data["kind"],
        data["base_url"],
    )
    provider.wire = data.get("wire") or "chat"
    provider.preset = data.get("preset") or ""
    provider.settings = dict(data.get("settings") or {})
    proxy = data.get("proxy_url")
    if proxy not in (MASKED, old_proxy):  # "***": the stored one stays
        provider.set_proxy_url(proxy)
        before = (*before, "proxy")  # a changed proxy makes the row "updated"
    _upsert(report, "providers", provider, created, before, own)
    for conn_data in data["connections"]:
        connection = Connection.objects.filter(
            provider=provider, name=conn_data["name"]
        ).first()
        is_new = connection is None
        connection = connection or Connection(provider=provider, name=conn_data["name"])
        before = _fields(connection, _CONN_FIELDS)
        same = _same_secret(connection, conn_data.get("api_key"))
        apply_connection_fields(
            connection, {**conn_data, "api_key": None, "secrets": None}
        )
        if not same:
            connection.set_api_key(conn_data.get("api_key"))
        # the file is the whole state: a secret field it does not name is removed
        given = conn_data.get("secrets") or {}
        stored = {*(connection.secret_refs or {}), *connection.stored_secrets()}
        if connection.set_secrets(
            {name: given.get(name) for name in {*given, *stored}}
        ):
            before = (*before, "secrets")  # a changed secret makes the row "updated"
        _upsert(report, "connections", connection, is_new, before, _CONN_FIELDS)
    for position, model_data in enumerate(data["models"]):
        model = ProviderModel.objects.filter(
            provider=provider, model_id=model_data["id"]
        ).first()
        is_new = model is None
        model = model or ProviderModel(provider=provider, model_id=model_data["id"])
        before = _fields(model, _MODEL_FIELDS)
        apply_model_fields(model, model_data)
        model.position = position
        _upsert(report, "models", model, is_new, before, _MODEL_FIELDS)
    if prune:
        names = [c["name"] for c in data["connections"]]
        for stale in Connection.objects.filter(provider=provider).exclude(
            name__in=names
        ):
            stale.delete()
            report.count("connections", "deleted")
        ids = [m["id"] for m in data["models"]]
        for stale_model in ProviderModel.objects.filter(provider=provider).exclude(
            model_id__in=ids
        ):
            stale_model.delete()
            report.count("models", "deleted")


def _target_rows(combo: Combo) -> list[tuple[Any, ...]]:
    return [
        (t.position, t.model, t.connection, t.ref_id, t.weight, t.timeout_ms)
        for t in combo.targets.order_by("position", "id")
    ]


def _apply_combos(items: list[dict[str, Any]], report: ImportReport) -> None:
    combos: dict[str, tuple[Combo, bool, tuple[Any, ...], list[Any]]] = {}
    names = ("name", "strategy", "active", "config")
    for data in items:  # pass 1: the rows themselves, so refs can point at them
        combo = Combo.objects.filter(name_lower=data["name"].lower()).first()
        created = combo is None
        combo = combo or Combo()
        before = _fields(combo, names)
        old_targets = _target_rows(combo) if not created else []
        combo.name, combo.strategy = data["name"], data["strategy"]
        combo.active = data["active"]
        combo.config = services.keep_masked_secrets(data["config"], combo.config)
        if created or _fields(combo, names) != before:
            combo.save()
        combos[data["name"].lower()] = (combo, created, before, old_targets)
    by_name = {c.name_lower: c for c in Combo.objects.all()}
    for data in items:  # pass 2: targets
        combo, created, before, old_targets = combos[data["name"].lower()]
        new_targets = [
            (
                position,
                t.get("model") or "",
                t.get("connection") or "",
                by_name[str(t["combo"]).lower()].id if t.get("combo") else None,
                t.get("weight"),
                t.get("timeout_ms"),
            )
            for position, t in enumerate(data["targets"])
        ]
        if new_targets != old_targets:
            combo.targets.all().delete()
            ComboTarget.objects.bulk_create(
                [
                    ComboTarget(
                        combo=combo,
                        position=p,
                        model=m,
                        connection=c,
                        ref_id=r,
                        weight=w,
                        timeout_ms=t,
                    )
                    for p, m, c, r, w, t in new_targets
                ]
            )
        if created:
            report.count("combos", "created")
        elif _fields(combo, names) != before or new_targets != old_targets:
            report.count("combos", "updated")
        else:
            report.count("combos", "unchanged")


def _apply_keys(items: list[dict[str, Any]], report: ImportReport) -> None:
    names = (
        "active",
        "expires_at",
        "allowed_models",
        "rpm",
        "tpm",
        "budget_usd",
        "budget_period",
        "failover_defaults",
        "key_hash",
    )
    for data in items:
        key = ApiKey.objects.filter(name=data["name"]).first()
        created = key is None
        key = key or ApiKey(name=data["name"])
        before = _fields(key, names)
        services._apply_key(key, data)
        literal = services.literal_key(data)
        if literal is not None:
            key.key_hash = services.hash_api_key(literal)
            key.prefix = literal[: services.KEY_DISPLAY_CHARS]
        elif created:
            plaintext = services.generate_api_key()
            key.key_hash = services.hash_api_key(plaintext)
            key.prefix = plaintext[: services.KEY_DISPLAY_CHARS]
            report.generated_keys.append((key.name, plaintext))
        _upsert(report, "api_keys", key, created, before, names)


def _apply_simple(plan: dict[str, Any], report: ImportReport) -> None:
    for data in plan["model_combo_mappings"]:
        combo = Combo.objects.get(name_lower=data["combo"].lower())
        mapping = ModelComboMapping.objects.filter(
            pattern=data["pattern"], combo=combo
        ).first()
        created = mapping is None
        mapping = mapping or ModelComboMapping(pattern=data["pattern"], combo=combo)
        before = _fields(mapping, ("priority",))
        mapping.priority = data["priority"]
        _upsert(report, "model_combo_mappings", mapping, created, before, ("priority",))
    for data in plan["candidate_overrides"]:
        key = ApiKey.objects.get(name=data["api_key"])
        override = CandidateOverride.objects.filter(
            api_key=key, channel=data["channel"]
        ).first()
        created = override is None
        override = override or CandidateOverride(api_key=key, channel=data["channel"])
        before = _fields(override, ("exclude",))
        override.exclude = data["exclude"]
        _upsert(report, "candidate_overrides", override, created, before, ("exclude",))
    fields = ("easy", "hard", "threshold", "session_ttl_seconds")
    for data in plan["smart_routes"]:
        route = SmartRoute.objects.filter(alias=data["alias"]).first()
        created = route is None
        route = route or SmartRoute(alias=data["alias"])
        before = _fields(route, fields)
        for name in fields:
            setattr(route, name, data[name])
        _upsert(report, "smart_routes", route, created, before, fields)
    if "settings" in plan:
        row = GatewaySettings.objects.filter(id=1).first()
        if row is None and not plan["settings"]:
            # No row means "all defaults": an empty block (as exported) changes nothing.
            report.count("settings", "unchanged")
            return
        created = row is None
        row = row or GatewaySettings(id=1)
        before = _fields(row, ("data",))
        row.data = plan["settings"]
        _upsert(report, "settings", row, created, before, ("data",))


def _prune(  # noqa: C901, PLR0912
    plan: dict[str, Any], report: ImportReport
) -> None:
    present = plan["_present"]
    if "model_combo_mappings" in present:
        keep = {
            (m["pattern"], m["combo"].lower()) for m in plan["model_combo_mappings"]
        }
        for mapping in ModelComboMapping.objects.select_related("combo"):
            if (mapping.pattern, mapping.combo.name_lower) not in keep:
                mapping.delete()
                report.count("model_combo_mappings", "deleted")
    if "candidate_overrides" in present:
        keep_o = {(o["api_key"], o["channel"]) for o in plan["candidate_overrides"]}
        for override in CandidateOverride.objects.select_related("api_key"):
            if (override.api_key.name, override.channel) not in keep_o:
                override.delete()
                report.count("candidate_overrides", "deleted")
    if "smart_routes" in present:
        aliases = [r["alias"] for r in plan["smart_routes"]]
        for route in SmartRoute.objects.exclude(alias__in=aliases):
            route.delete()
            report.count("smart_routes", "deleted")
    if "api_keys" in present:
        names = [k["name"] for k in plan["api_keys"]]
        for key in ApiKey.objects.exclude(name__in=names):
            key.delete()
            report.count("api_keys", "deleted")
    if "combos" in present:
        _prune_combos({c["name"].lower() for c in plan["combos"]}, report)
    if "providers" in present:
        slugs = {p["slug"].lower() for p in plan["providers"]}
        for provider in Provider.objects.all():
            if provider.slug.lower() not in slugs:
                provider.delete()
                report.count("providers", "deleted")


def _prune_combos(keep: set[str], report: ImportReport) -> None:
    stale = [c for c in Combo.objects.all() if c.name_lower not in keep]
    ComboTarget.objects.filter(combo__in=stale).delete()
    ModelComboMapping.objects.filter(combo__in=stale).delete()
    for combo in stale:
        combo.delete()
        report.count("combos", "deleted")


def apply_plan(plan: dict[str, Any], *, prune: bool) -> ImportReport:
    report = ImportReport()
    for provider in plan["providers"]:
        _apply_provider(provider, report, prune)
    _apply_combos(plan["combos"], report)
    _apply_keys(plan["api_keys"], report)
    _apply_simple(plan, report)
    if prune:
        _prune(plan, report)
    return report
