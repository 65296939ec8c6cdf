"""The routing table and the value objects the engine reasons over.

Everything here is immutable: the table is built once per config version by
``gateway.config.snapshot`` and swapped whole; a request keeps the table it started
with.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from gateway.kernel.globs import compile_glob

_EMPTY: Mapping[str, Any] = MappingProxyType({})
#: placeholder meaning "compile the glob from the pattern" (it never matches)
_FROM_PATTERN: re.Pattern[str] = re.compile(r"(?!)")


@dataclass(frozen=True, slots=True, kw_only=True)
class PriceTier:
    """A catalog context tier (spec 06 §1.3): its prices bill a whole attempt whose
    prompt exceeds ``size`` tokens (USD per 1M tokens; cache prices may be None)."""

    size: int
    input_cost: float
    output_cost: float
    cache_read_cost: float | None = None
    cache_write_cost: float | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class ModelInfo:
    provider: str
    model_id: str
    position: int = 0
    input_cost: float | None = None
    output_cost: float | None = None
    cache_read_cost: float | None = None
    cache_write_cost: float | None = None
    context_window: int | None = None
    max_output_tokens: int | None = None
    capabilities: frozenset[str] | None = None
    tier: str | None = None
    deprecated: bool = False  # catalog status (spec 06 §3.2): kept out of auto pools
    #: False for a connection's ``default_model`` without a catalog row: served by
    #: the connections naming it only (spec 04 §2.1)
    catalog_row: bool = True
    #: the catalog's context tiers, ascending by size; empty when the operator
    #: priced the model (an operator price is the whole price)
    price_tiers: tuple[PriceTier, ...] = ()
    #: the upstream wire this model is spoken over, when it differs from its
    #: provider's (``responses``: a Responses-only model; spec 10 §5)
    wire: str | None = None
    #: the name the upstream knows it by, when it differs from its id (an Azure
    #: deployment; spec 10 §1)
    deployment: str | None = None

    @property
    def key(self) -> str:
        return f"{self.provider}/{self.model_id}"

    @property
    def upstream_id(self) -> str:
        """What a request names it by upstream: its deployment, else its id."""
        return self.deployment or self.model_id


@dataclass(frozen=True, slots=True, kw_only=True)
class Auth:
    """A connection's credential beyond a plain ``api_key`` (spec 10 §3), as the
    snapshot resolved it (``env:`` references read, secrets decrypted).

    ``secrets``: the kind's secret fields (``aws_access_key_id``,
    ``aws_secret_access_key``, ``aws_session_token``, ``service_account_json``,
    ``tenant_id``, ``client_id``, ``client_secret``); ``settings``: its plain fields,
    the connection's over the provider's (``region``, ``project``,
    ``use_default_credentials``, ``resource``, ``api_version``, ``auth_header``).
    ``token``: a bearer token minted for this attempt (Vertex, Entra), filled by the
    upstream layer, never by the snapshot.  Never in a ``repr``.
    """

    kind: str
    secrets: Mapping[str, str] = field(default_factory=lambda: _EMPTY, repr=False)
    settings: Mapping[str, Any] = field(default_factory=lambda: _EMPTY)
    token: str | None = field(default=None, repr=False)

    def setting(self, name: str, default: Any = None) -> Any:
        value = self.settings.get(name)
        return default if value in (None, "") else value


@dataclass(frozen=True, slots=True, kw_only=True)
class ConnectionInfo:
    provider: str
    name: str
    api_key: str | None = field(default=None, repr=False)
    #: the kind's credential beyond ``api_key`` (None: the key is all there is)
    auth: Auth | None = None
    #: this connection's endpoint when it differs from its provider's (a region or
    #: project of its own: Vertex, Bedrock; spec 10 §1)
    base_url: str | None = None
    tier: str = "standard"
    default_model: str | None = None
    priority: int = 0
    max_concurrency: int = 0
    quota_remaining_percent: float | None = None
    quota_reset_interval_seconds: int | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class ProviderInfo:
    slug: str
    #: the provider kind: a key of ``gateway.dialects.REGISTRY``
    kind: str
    base_url: str
    #: the upstream wire of its models: ``chat`` (the kind's own) or ``responses``
    wire: str = "chat"
    #: outbound settings (spec 10 §4): ``proxy_url`` ("none" = no proxy),
    #: ``ca_bundle``, ``client_cert``, ``client_key``, ``headers``
    settings: Mapping[str, Any] = field(default_factory=lambda: _EMPTY)
    #: the same as the outbound policy's ``ProviderOutbound`` (built once with the
    #: table; None: the process policy), what its calls are routed by
    outbound: Any = None
    #: active connections only, ordered by priority, then name
    connections: tuple[ConnectionInfo, ...] = ()
    #: servable models by exact id, in catalog order
    models: Mapping[str, ModelInfo] = field(default_factory=lambda: _EMPTY)
    #: lower-cased id -> exact ids (for the case-insensitive fallback)
    models_lower: Mapping[str, tuple[str, ...]] = field(default_factory=lambda: _EMPTY)

    def serves(self, model: ModelInfo, connection: ConnectionInfo) -> bool:
        """Whether ``connection`` serves ``model``: every catalog model, and a
        ``default_model`` without a catalog row on the connections naming it."""
        return model.catalog_row or connection.default_model == model.model_id


@dataclass(frozen=True, slots=True, kw_only=True)
class ComboTargetInfo:
    model: str | None = None  # "provider/model"
    connection: str | None = None
    ref: str | None = None  # canonical name of the referenced combo
    weight: float | None = None
    timeout_ms: int | None = None

    @property
    def key(self) -> str:
        if self.ref is not None:
            return f"combo:{self.ref}"
        return f"{self.model}@{self.connection or '*'}"


@dataclass(frozen=True, slots=True, kw_only=True)
class ComboInfo:
    id: int
    name: str
    #: the canonical strategy name (``gateway.planning.strategies.SPECS``)
    strategy: str
    active: bool = True
    targets: tuple[ComboTargetInfo, ...] = ()
    config: Mapping[str, Any] = field(default_factory=lambda: _EMPTY)


@dataclass(frozen=True, slots=True, kw_only=True)
class MappingInfo:
    pattern: str
    combo: str  # canonical combo name
    priority: int = 0
    #: compiled from ``pattern`` unless given
    regex: re.Pattern[str] = _FROM_PATTERN

    def __post_init__(self) -> None:
        if self.regex is _FROM_PATTERN:
            object.__setattr__(self, "regex", compile_glob(self.pattern))


@dataclass(frozen=True, slots=True, kw_only=True)
class FailoverDefaults:
    models: tuple[str, ...] = ()
    timeout_ms: int | None = None
    first_token_timeout_ms: int | None = None
    on: tuple[str, ...] | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class KeyPolicy:
    id: int
    name: str
    prefix: str
    active: bool = True
    expires_at: float | None = None  # unix seconds
    allowed_models: tuple[str, ...] | None = None
    #: compiled from ``allowed_models`` unless given; None = every model allowed
    allowed_regexes: tuple[re.Pattern[str], ...] | None = None
    rpm: int | None = None
    tpm: int | None = None
    budget_usd: float | None = None
    budget_period: str = "month"
    failover_defaults: FailoverDefaults | None = None
    #: the stored SHA-256 hex digest of the key (what a presented key must match)
    key_hash: str | None = None

    def __post_init__(self) -> None:
        # An allow-list without its compiled form must not silently allow everything.
        if self.allowed_models is not None and self.allowed_regexes is None:
            regexes = tuple(compile_glob(glob) for glob in self.allowed_models)
            object.__setattr__(self, "allowed_regexes", regexes)


@dataclass(frozen=True, slots=True, kw_only=True)
class SmartRouteInfo:
    alias: str
    easy: str
    hard: str
    threshold: int = 4
    session_ttl_seconds: int = 1800


@dataclass(frozen=True, slots=True, kw_only=True)
class GatewaySettings:
    """The YAML ``settings:`` block with every default filled in (spec 07)."""

    attempt_timeout_ms: int = 120_000
    stream_idle_timeout_ms: int = 120_000
    max_attempts_per_request: int = 20
    sticky_round_robin_limit: int = 3
    connection_aware_expansion: bool = False
    promptcache_affinity: bool = True
    breaker: Mapping[str, float] = field(default_factory=lambda: _EMPTY)
    cooldown: Mapping[str, float] = field(default_factory=lambda: _EMPTY)
    auth_disable: Mapping[str, float] = field(default_factory=lambda: _EMPTY)
    model_lock_minutes: float = 10
    exploration_rate: float = 0.05
    hide_paid_models: bool = False
    smart_routing_mode: str = "enforce"
    adaptive: Mapping[str, Any] = field(default_factory=lambda: _EMPTY)
    #: ``exclusion_seconds`` / ``max_exclusion_seconds`` (spec 04 §6, amended)
    self_healing: Mapping[str, Any] = field(default_factory=lambda: _EMPTY)


@dataclass(frozen=True, slots=True, kw_only=True)
class WebhookTarget:
    """A webhook endpoint as publishing sees it (spec 02 §12.3): no URL, no secret."""

    endpoint_id: int
    events: frozenset[str] = frozenset()
    active: bool = True


@dataclass(frozen=True, slots=True, kw_only=True)
class RoutingTable:
    version: int = 0
    providers: Mapping[str, ProviderInfo] = field(
        default_factory=lambda: _EMPTY
    )  # by lower-cased slug
    combos: Mapping[str, ComboInfo] = field(
        default_factory=lambda: _EMPTY
    )  # by lower-cased name
    #: given in creation order (or already sorted); kept priority desc, then creation
    mappings: tuple[MappingInfo, ...] = ()
    keys_by_digest: Mapping[str, KeyPolicy] = field(default_factory=lambda: _EMPTY)
    smart_routes: Mapping[str, SmartRouteInfo] = field(
        default_factory=lambda: _EMPTY
    )  # by exact alias
    #: lower-cased bare model id -> (provider slug, exact model id) pairs
    bare_models: Mapping[str, tuple[tuple[str, str], ...]] = field(
        default_factory=lambda: _EMPTY
    )
    settings: GatewaySettings = field(default_factory=GatewaySettings)
    #: active webhook endpoints, by id
    webhooks: tuple[WebhookTarget, ...] = ()
    #: (api key id, channel) -> candidate keys excluded (spec 04 §2.3 F4)
    overrides: Mapping[tuple[int, str], frozenset[str]] = field(
        default_factory=lambda: MappingProxyType({})
    )

    def __post_init__(self) -> None:
        # Spec 03 §1.1 step 4: priority descending, then creation order.  The sort is
        # stable, so a tuple that is already in that order is kept as it is.
        ordered = tuple(sorted(self.mappings, key=lambda m: -m.priority))
        object.__setattr__(self, "mappings", ordered)


@dataclass(frozen=True, slots=True, kw_only=True)
class Target:
    """One concrete (provider, model, connection) the gateway can call."""

    provider: ProviderInfo
    model: ModelInfo
    connection: ConnectionInfo
    via: str | None = None
    timeout_ms: int | None = None

    @property
    def model_key(self) -> str:
        return f"{self.provider.slug}/{self.model.model_id}"

    @property
    def key(self) -> str:
        return f"{self.provider.slug}/{self.model.model_id}@{self.connection.name}"


@dataclass(frozen=True, slots=True, kw_only=True)
class CompositeUnit:
    """A ref to a ``fusion`` or ``pipeline`` combo inside another combo's order.

    Spec 03 §4.4: such a ref is ONE black-box unit; when dispatch reaches it the
    referenced combo runs as a whole (its panel or stages, failover included) and
    yields one answer.  ``via`` names the combo whose plan listed it.
    """

    combo: ComboInfo
    via: str | None = None

    @property
    def key(self) -> str:
        return f"combo:{self.combo.name}"

    @property
    def model_key(self) -> str:
        return f"combo/{self.combo.name}"


#: what a combo plan lists: a concrete target, or a composite ref run as one unit
PlannedUnit = Target | CompositeUnit
