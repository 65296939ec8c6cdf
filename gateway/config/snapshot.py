"""DB rows -> ``RoutingTable``: the only adapter from the ORM to the engine.

Runs off the request path (start-up and the config watcher's thread), with the sync
ORM.  Secrets are decrypted and ``env:`` references resolved here, in memory only.
"""

from __future__ import annotations

import logging
import os
from collections import defaultdict
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

from django.conf import settings

from combos.models import (
    ApiKey,
    CandidateOverride,
    Combo,
    ComboTarget,
    GatewaySettings,
    ModelComboMapping,
    SmartRoute,
)
from gateway.dialects import REGISTRY
from gateway.kernel.globs import compile_glob
from gateway.kernel.types import (
    Auth,
    ComboInfo,
    ComboTargetInfo,
    ConnectionInfo,
    FailoverDefaults,
    KeyPolicy,
    MappingInfo,
    ModelInfo,
    ProviderInfo,
    RoutingTable,
    SmartRouteInfo,
    WebhookTarget,
)
from gateway.kernel.types import GatewaySettings as SettingsInfo
from providers import crypto
from providers.catalog import CatalogIndex, fill_model_info, load_index
from providers.models import ConfigRevision, Connection, Provider, ProviderModel
from providers.outbound_policy import ProviderOutbound
from telemetry.models import WebhookEndpoint

logger = logging.getLogger(__name__)

MOCK_BASE_URL = "http://omniroute-mock/v1"  # served in-process (providers.http)


def current_version() -> int:
    row = (
        ConfigRevision.objects.order_by("id").values_list("version", flat=True).first()
    )
    return int(row or 0)


def _env_secret(ref: str) -> str | None:
    """An ``env:NAME`` reference: ``NAME``, else the file ``NAME_FILE`` names
    (spec 08 §1: any secret may be a file), stripped of its final newline."""
    name = ref[len("env:") :]
    value = os.environ.get(name)
    if value:
        return value
    path = os.environ.get(f"{name}_FILE")
    if not path:
        return None
    try:
        with open(path, encoding="utf-8") as handle:
            return handle.read().rstrip("\r\n") or None
    except OSError as exc:
        logger.warning("%s_FILE: cannot read %s: %s", name, path, exc.strerror)
        return None


def _secret(connection: Connection) -> str | None:
    if connection.api_key_ref:
        return _env_secret(connection.api_key_ref)
    if connection.api_key_encrypted:
        try:
            return crypto.decrypt(connection.api_key_encrypted)
        except crypto.SecretUnreadable:
            logger.warning("connection %s: stored secret is unreadable", connection)
    return None


def _auth(provider: Provider, connection: Connection) -> tuple[Auth | None, str | None]:
    """The connection's credential beyond ``api_key`` (spec 10 §3) with its
    references read, and its own endpoint where its settings name one; (None,
    None) for a kind whose credential is a key alone and sets nothing."""
    dialect = REGISTRY[provider.kind]
    shape = dialect.credentials
    if not (shape.secrets or shape.settings or shape.provider_settings):
        return None, None
    given = provider.settings if isinstance(provider.settings, dict) else {}
    own = {k: given[k] for k in shape.provider_settings if k in given}
    conn_settings = connection.settings if isinstance(connection.settings, dict) else {}
    own.update({k: v for k, v in conn_settings.items() if k in shape.settings})
    secrets = {
        k: v for k, v in connection.stored_secrets().items() if k in shape.secrets
    }
    for name, ref in (connection.secret_refs or {}).items():
        value = _env_secret(str(ref)) if name in shape.secrets else None
        if value is not None:
            secrets[name] = value
    if not own and not secrets:
        return None, None
    auth = Auth(
        kind=provider.kind,
        secrets=MappingProxyType(secrets),
        settings=MappingProxyType(own),
    )
    return auth, dialect.connection_base_url(provider.base_url, auth)


def _connection_info(provider: Provider, c: Connection, **more: Any) -> ConnectionInfo:
    auth, base_url = _auth(provider, c)
    return ConnectionInfo(
        provider=provider.slug,
        name=c.name,
        api_key=_secret(c),
        auth=auth,
        base_url=base_url,
        **more,
    )


def _model_info(
    row: ProviderModel, slug: str, catalog: CatalogIndex | None = None, kind: str = ""
) -> ModelInfo:
    """The configured row; its empty fields filled from the matching catalog row."""
    caps = row.capabilities
    info = ModelInfo(
        provider=slug,
        model_id=row.model_id,
        position=row.position,
        input_cost=row.input_cost,
        output_cost=row.output_cost,
        cache_read_cost=row.cache_read_cost,
        cache_write_cost=row.cache_write_cost,
        context_window=row.context_window,
        max_output_tokens=row.max_output_tokens,
        capabilities=frozenset(caps) if isinstance(caps, list) else None,
        tier=row.tier or None,
        wire=row.wire or None,
        deployment=row.deployment or None,
    )
    if catalog is None:
        return info
    return fill_model_info(info, catalog.match(slug, kind, row.model_id))


def provider_outbound(settings_: Mapping[str, Any]) -> ProviderOutbound | None:
    """The outbound policy's per-provider values (None: nothing overridden); an
    unusable value (it passed validation, then changed on disk) is logged and the
    process policy applies."""
    if not settings_:
        return None
    try:
        return ProviderOutbound(
            proxy_url=settings_.get("proxy_url"),
            ca_bundle=settings_.get("ca_bundle"),
            client_cert=settings_.get("client_cert"),
            client_key=settings_.get("client_key"),
            headers=settings_.get("headers"),
        )
    except ValueError as exc:
        logger.warning("provider outbound settings unusable: %s", exc)
        return None


def _outbound(provider: Provider) -> Mapping[str, Any]:
    """The provider's outbound settings (spec 10 §4): ``proxy_url`` (decrypted),
    ``ca_bundle``, ``client_cert``, ``client_key``, ``headers``."""
    found: dict[str, Any] = {
        k: v
        for k, v in (provider.settings or {}).items()
        if k in ("ca_bundle", "client_cert", "client_key", "headers")
    }
    if provider.proxy_url:
        found["proxy_url"] = provider.proxy_url
    return MappingProxyType(found)


def probe_info(
    provider: Provider, connection: Connection | None = None
) -> ProviderInfo:
    """One provider as a probe sees it (spec 10 §2: discovery, Test connection):
    its configured model ids, and ``connection`` (active or not), else its active
    connections; secrets decrypted as for routing."""
    rows = (
        [connection]
        if connection is not None
        else list(provider.connections.filter(active=True).order_by("priority", "name"))
    )
    conns = tuple(_connection_info(provider, c) for c in rows)
    models = {
        m.model_id: ModelInfo(
            provider=provider.slug,
            model_id=m.model_id,
            deployment=m.deployment or None,
        )
        for m in provider.models.all()
    }
    kind = provider.kind
    outbound = _outbound(provider)
    return ProviderInfo(
        slug=provider.slug,
        kind=kind,
        base_url=MOCK_BASE_URL if REGISTRY[kind].in_process else provider.base_url,
        wire=provider.wire or "chat",
        settings=outbound,
        outbound=provider_outbound(outbound),
        connections=conns,
        models=MappingProxyType(models),
    )


def _providers() -> dict[str, ProviderInfo]:
    models: dict[int, list[ProviderModel]] = defaultdict(list)
    for row in ProviderModel.objects.order_by("position", "model_id"):
        models[row.provider_id].append(row)
    connections: dict[int, list[Connection]] = defaultdict(list)
    for conn in Connection.objects.filter(active=True).order_by("priority", "name"):
        connections[conn.provider_id].append(conn)
    result: dict[str, ProviderInfo] = {}
    providers = list(Provider.objects.all())
    # a provider's models.dev id (its own, or its preset's) maps its slug, over the
    # operator's OMNIROUTE_CATALOG_PROVIDER_MAP (spec 10 §2)
    catalog_map = {
        **settings.OMNIROUTE_CATALOG_PROVIDER_MAP,
        **{
            p.slug: str(p.settings["models_dev_id"])
            for p in providers
            if isinstance(p.settings, dict) and p.settings.get("models_dev_id")
        },
    }
    index = load_index(((p.slug, p.kind) for p in providers), catalog_map)
    for provider in providers:
        slug = provider.slug
        catalog = {
            m.model_id: _model_info(m, slug, index, provider.kind)
            for m in models[provider.id]
        }
        conns = tuple(
            _connection_info(
                provider,
                c,
                tier=c.tier,
                default_model=c.default_model or None,
                priority=c.priority,
                max_concurrency=c.max_concurrency,
                quota_remaining_percent=c.quota_remaining_percent,
                quota_reset_interval_seconds=c.quota_reset_interval_seconds,
            )
            for c in connections[provider.id]
        )
        position = len(catalog)
        for info in conns:  # a default model without a catalog row is servable
            if info.default_model and info.default_model not in catalog:
                catalog[info.default_model] = fill_model_info(
                    ModelInfo(
                        provider=slug,
                        model_id=info.default_model,
                        position=position,
                        catalog_row=False,
                    ),
                    index.match(slug, provider.kind, info.default_model),
                )
                position += 1
        lower: dict[str, list[str]] = defaultdict(list)
        for model_id in catalog:
            lower[model_id.lower()].append(model_id)
        kind = provider.kind
        outbound = _outbound(provider)
        result[slug.lower()] = ProviderInfo(
            slug=slug,
            kind=kind,
            base_url=MOCK_BASE_URL if REGISTRY[kind].in_process else provider.base_url,
            wire=provider.wire or "chat",
            settings=outbound,
            outbound=provider_outbound(outbound),
            connections=conns,
            models=MappingProxyType(catalog),
            models_lower=MappingProxyType({k: tuple(v) for k, v in lower.items()}),
        )
    return result


def _combos() -> dict[str, ComboInfo]:
    names = dict(Combo.objects.values_list("id", "name"))
    targets: dict[int, list[ComboTargetInfo]] = defaultdict(list)
    for row in ComboTarget.objects.order_by("position", "id"):
        targets[row.combo_id].append(
            ComboTargetInfo(
                model=row.model or None,
                connection=row.connection or None,
                ref=names.get(row.ref_id) if row.ref_id else None,
                weight=row.weight,
                timeout_ms=row.timeout_ms,
            )
        )
    return {
        combo.name.lower(): ComboInfo(
            id=combo.id,
            name=combo.name,
            strategy=combo.strategy,
            active=combo.active,
            targets=tuple(targets[combo.id]),
            config=MappingProxyType(dict(combo.config or {})),
        )
        for combo in Combo.objects.all()
    }


def _failover_defaults(data: Any) -> FailoverDefaults | None:
    if not isinstance(data, dict) or not data.get("models"):
        return None
    on = data.get("on")
    return FailoverDefaults(
        models=tuple(data["models"]),
        timeout_ms=data.get("timeout_ms"),
        first_token_timeout_ms=data.get("first_token_timeout_ms"),
        on=tuple(on) if isinstance(on, list) else None,
    )


def _keys() -> dict[str, KeyPolicy]:
    result: dict[str, KeyPolicy] = {}
    for key in ApiKey.objects.all():
        allowed = tuple(key.allowed_models) if key.allowed_models else None
        result[key.key_hash] = KeyPolicy(
            id=key.id,
            name=key.name,
            prefix=key.prefix,
            active=key.active,
            expires_at=key.expires_at.timestamp() if key.expires_at else None,
            allowed_models=allowed,
            allowed_regexes=tuple(compile_glob(g) for g in allowed)
            if allowed
            else None,
            rpm=key.rpm,
            tpm=key.tpm,
            budget_usd=float(key.budget_usd) if key.budget_usd is not None else None,
            budget_period=key.budget_period,
            failover_defaults=_failover_defaults(key.failover_defaults),
            key_hash=key.key_hash,
        )
    return result


def read_settings() -> SettingsInfo:
    """The ``settings:`` row with every default filled in (one query)."""
    row = GatewaySettings.objects.order_by("id").first()
    data = dict(row.data) if row is not None else {}
    return SettingsInfo(
        **{k: v for k, v in data.items() if k in SettingsInfo.__slots__}
    )


def _webhooks() -> tuple[WebhookTarget, ...]:
    rows = WebhookEndpoint.objects.filter(active=True).order_by("id")
    return tuple(
        WebhookTarget(endpoint_id=row.id, events=frozenset(row.events or ()))
        for row in rows.only("id", "events")
    )


def _overrides() -> dict[tuple[int, str], frozenset[str]]:
    return {
        (row.api_key_id, row.channel): frozenset(
            str(k) for k in (row.exclude or []) if isinstance(k, str)
        )
        for row in CandidateOverride.objects.all()
    }


def build_table() -> RoutingTable:
    """Read every configuration row once and freeze it into a routing table."""
    version = current_version()
    providers = _providers()
    bare: dict[str, list[tuple[str, str]]] = defaultdict(list)
    for provider in providers.values():
        if not provider.connections:
            continue
        for model_id in provider.models:
            bare[model_id.lower()].append((provider.slug, model_id))
    mappings = tuple(
        MappingInfo(
            pattern=m.pattern,
            combo=m.combo.name,
            priority=m.priority,
            regex=compile_glob(m.pattern),
        )
        for m in ModelComboMapping.objects.select_related("combo").order_by(
            "-priority", "created_at", "id"
        )
    )
    smart = {
        r.alias: SmartRouteInfo(
            alias=r.alias,
            easy=r.easy,
            hard=r.hard,
            threshold=r.threshold,
            session_ttl_seconds=r.session_ttl_seconds,
        )
        for r in SmartRoute.objects.all()
    }
    return RoutingTable(
        version=version,
        providers=MappingProxyType(providers),
        combos=MappingProxyType(_combos()),
        mappings=mappings,
        keys_by_digest=MappingProxyType(_keys()),
        smart_routes=MappingProxyType(smart),
        bare_models=MappingProxyType({k: tuple(v) for k, v in bare.items()}),
        settings=read_settings(),
        webhooks=_webhooks(),
        overrides=MappingProxyType(_overrides()),
    )
