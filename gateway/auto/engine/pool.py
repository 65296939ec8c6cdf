"""The candidate pool of an auto route and its filter chain (spec 04 §2).

``servable(table, route)`` lists every (provider, model, connection) the route may
use, in configured order; ``apply_filters`` runs F1-F8 of §2.3 over it and says
which filters fell open or why the request must be refused.  F9 (self-healing) and
F10 (budget) need scores and run in ``gateway.auto.engine.decide``.

Pure: health (F8) arrives as a callable, overrides as a set of keys.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from gateway.dialects import REGISTRY
from gateway.kernel.globs import matches
from gateway.kernel.types import (
    ComboInfo,
    ConnectionInfo,
    KeyPolicy,
    ModelInfo,
    ProviderInfo,
    RoutingTable,
    Target,
)

_EMPTY: Mapping[str, Any] = MappingProxyType({})
#: category -> required catalog capability (§1.3)
CATEGORY_CAPABILITY = {
    "reasoning": "reasoning",
    "vision": "vision",
    "multimodal": "vision",
}
#: tier suffix -> required price class
TIER_PRICE_CLASS = {"free": "free", "pro": "premium"}


@dataclass(frozen=True, slots=True, kw_only=True)
class AutoRoute:
    """A built-in ``auto…`` id or a persisted ``strategy: auto`` combo."""

    route_id: str  # "auto/coding:fast", or "combo:<name>"
    combo: ComboInfo | None = None
    #: ``combos[].config.auto`` (validated), empty for built-in ids
    config: Mapping[str, Any] = field(default_factory=lambda: _EMPTY)

    @property
    def builtin(self) -> bool:
        return self.combo is None

    @property
    def channel(self) -> str | None:
        """The candidate-override channel: the suffix after ``auto/``, or ``auto``."""
        if self.combo is not None:
            return None
        return self.route_id[len("auto/") :] if "/" in self.route_id else "auto"

    @property
    def category(self) -> str | None:
        if self.combo is not None or "/" not in self.route_id:
            return None
        return self.route_id[len("auto/") :].partition(":")[0]

    @property
    def tier(self) -> str | None:
        if self.combo is not None:
            return None
        return self.route_id.partition(":")[2] or None

    @property
    def via(self) -> str:
        """What the report's ``via`` and the LKGP records name."""
        return self.combo.name if self.combo is not None else self.route_id

    @property
    def state_id(self) -> str:
        """``<combo>`` of the state keys: the built-in id, or the combo's key."""
        return str(self.combo.id) if self.combo is not None else self.route_id


def for_combo(combo: ComboInfo) -> AutoRoute:
    config = combo.config.get("auto")
    return AutoRoute(
        route_id=f"combo:{combo.name}",
        combo=combo,
        config=config if isinstance(config, Mapping) else _EMPTY,
    )


def usable(provider: ProviderInfo, connection: ConnectionInfo) -> bool:
    """Credentials resolve to a non-blank value; mock providers need none."""
    dialect = REGISTRY[provider.kind]
    if dialect.in_process:
        return True
    if not dialect.credentials.api_key:  # keys of its own shape (AWS, spec 10 §3)
        return connection.auth is not None
    return bool(connection.api_key and connection.api_key.strip())


def _order_key(target: Target) -> tuple[int, str, str, int]:
    return (
        target.connection.priority,
        target.provider.slug,
        target.connection.name,
        target.model.position,
    )


def embeds_only(model: ModelInfo) -> bool:
    """An embedding model (catalog capabilities ``[embeddings]``): never a chat
    candidate of ``auto`` (spec 09 §5.2)."""
    return model.capabilities is not None and "embeddings" in model.capabilities


def _fleet(table: RoutingTable, via: str) -> list[Target]:
    found = [
        Target(provider=provider, model=model, connection=connection, via=via)
        for provider in table.providers.values()
        for connection in provider.connections
        if usable(provider, connection)
        for model in provider.models.values()
        if not model.deprecated
        and not embeds_only(model)
        and provider.serves(model, connection)
    ]
    return sorted(found, key=_order_key)


def servable(table: RoutingTable, route: AutoRoute) -> list[Target]:
    """Every candidate of the route in configured order (§2.1), never persisted.

    Models the catalog marks deprecated are not servable and never appear."""
    combo = route.combo
    if combo is None or not combo.targets:
        return _fleet(table, route.via)
    found: list[Target] = []
    seen: set[str] = set()
    for declared in combo.targets:
        if declared.model is None:
            continue  # combo refs are a validation error for auto combos
        slug, _, model_id = declared.model.partition("/")
        provider = table.providers.get(slug.lower())
        model = provider.models.get(model_id) if provider is not None else None
        if provider is None or model is None or model.deprecated:
            continue  # unknown, or deprecated in the catalog: not servable (§2.1)
        if embeds_only(model):
            continue  # an embedding model answers no chat (09 §5.2)
        group = [
            Target(provider=provider, model=model, connection=c, via=route.via)
            for c in provider.connections
            if (declared.connection is None or c.name == declared.connection)
            and usable(provider, c)
            and provider.serves(model, c)
        ]
        for target in sorted(group, key=_order_key):
            if target.key not in seen:
                seen.add(target.key)
                found.append(target)
    return found


def price_class(input_cost: float | None, output_cost: float | None) -> str:
    """free, cheap, premium or unknown (§1.3)."""
    if input_cost is None:
        return "unknown"
    if input_cost == 0 and (output_cost is None or output_cost == 0):
        return "free"
    return "cheap" if input_cost <= 1.0 else "premium"


@dataclass(frozen=True, slots=True, kw_only=True)
class Refusal:
    """A filter left nothing and fails closed: the request gets this error."""

    status: int
    code: str
    message: str
    error_type: str
    param: str | None = None
    retry_after_s: float | None = None


@dataclass(slots=True, kw_only=True)
class Filtered:
    #: F7 output (incident mode looks at its circuits)
    fitting: list[Target] = field(default_factory=list)
    #: F8 output: the pool that is scored
    reachable: list[Target] = field(default_factory=list)
    #: candidates F8 dropped, with the health reason and wait
    unreachable: list[tuple[Target, str, float | None]] = field(default_factory=list)
    filter_fell_open: list[str] = field(default_factory=list)
    overrides_ignored: bool = False
    refusal: Refusal | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class Needs:
    """What the request asks of a model (03 §4.2) and its size ``R``."""

    tools: bool = False
    vision: bool = False
    json: bool = False
    need_tokens: int = 0


def allow_list_filter(key: KeyPolicy) -> bool:
    """F1 applies when an allow-list entry names a provider model, not an auto id."""
    return key.allowed_models is not None and any(
        "/" in glob and not glob.lower().startswith("auto")
        for glob in key.allowed_models
    )


def _fail_open(
    pool: list[Target], keep: Callable[[Target], bool], name: str, out: Filtered
) -> list[Target]:
    kept = [t for t in pool if keep(t)]
    if kept:
        return kept
    out.filter_fell_open.append(name)
    return pool


def _closed(
    pool: list[Target], route: AutoRoute, key: KeyPolicy, hide_paid: bool
) -> list[Target] | Refusal:
    """F1-F3: the filters an operator set explicitly; nothing left is an error."""
    current = pool
    if allow_list_filter(key) and key.allowed_regexes is not None:
        regexes = key.allowed_regexes
        current = [t for t in current if any(matches(r, t.model_key) for r in regexes)]
        if not current:
            return Refusal(
                status=403,
                code="model_not_allowed",
                message=f"This API key may not use any candidate of '{route.route_id}'",
                error_type="permission_error",
                param="model",
            )
    if hide_paid:
        current = [
            t
            for t in current
            if price_class(t.model.input_cost, t.model.output_cost) == "free"
        ]
        if not current:
            return _no_candidate(route, "hide_paid_models leaves no free model")
    allowed = route.config.get("candidatePool")
    if isinstance(allowed, list) and allowed:
        slugs = {str(s).lower() for s in allowed}
        current = [t for t in current if t.provider.slug.lower() in slugs]
        if not current:
            return _no_candidate(route, "candidatePool leaves no candidate")
    return current


def _overrides(
    pool: list[Target],
    excluded: frozenset[str] | None,
    failed: bool,
    out: Filtered,
) -> list[Target]:
    """F4: the key's exclusions for this channel; fails open."""
    if failed:
        out.overrides_ignored = True
        return pool
    if not excluded:
        return pool
    kept = [t for t in pool if t.key not in excluded]
    if kept:
        return kept
    out.overrides_ignored = True
    return pool


def _suffix_filters(
    pool: list[Target], route: AutoRoute, out: Filtered
) -> list[Target]:
    """F5: category, then tier; each fails open."""
    current = pool
    capability = CATEGORY_CAPABILITY.get(route.category or "")
    if capability is not None:
        current = _fail_open(
            current,
            lambda t: capability in (t.model.capabilities or ()),
            "category",
            out,
        )
    wanted = TIER_PRICE_CLASS.get(route.tier or "")
    if wanted is not None:
        current = _fail_open(
            current,
            lambda t: price_class(t.model.input_cost, t.model.output_cost) == wanted,
            "tier",
            out,
        )
    return current


def _capability_filters(
    pool: list[Target], needs: Needs, out: Filtered
) -> list[Target]:
    """F6: tools, vision, json in that order; unknown capabilities pass."""
    current = pool
    for name, needed in (
        ("tools", needs.tools),
        ("vision", needs.vision),
        ("json", needs.json),
    ):
        if needed:
            current = _fail_open(current, _has(name), name, out)
    return current


def _has(capability: str) -> Callable[[Target], bool]:
    def check(target: Target) -> bool:
        known = target.model.capabilities
        return known is None or capability in known

    return check


def apply_filters(  # noqa: PLR0913 - the filter chain's inputs, each explicit
    pool: Sequence[Target],
    *,
    route: AutoRoute,
    key: KeyPolicy,
    hide_paid: bool,
    needs: Needs,
    excluded: frozenset[str] | None,
    reachable: Callable[[Target], tuple[str, float | None] | None],
    overrides_failed: bool = False,
    health_only: bool = False,
) -> Filtered:
    """F1-F8 of §2.3; ``health_only`` skips F6/F7 and refuses nothing after F5
    (the candidates endpoint)."""
    out = Filtered()
    if not pool:
        out.refusal = _no_candidate(route, "no connected provider serves a model")
        return out
    closed = _closed(list(pool), route, key, hide_paid)
    if isinstance(closed, Refusal):
        out.refusal = closed
        return out
    current = _overrides(closed, excluded, overrides_failed, out)
    current = _suffix_filters(current, route, out)
    if not health_only:
        current = _capability_filters(current, needs, out)
        fitting = [
            t
            for t in current
            if t.model.context_window is None
            or t.model.context_window >= needs.need_tokens
        ]
        if not fitting:
            out.refusal = Refusal(
                status=400,
                code="context_length_exceeded",
                message=(
                    f"The request needs about {needs.need_tokens} tokens; no candidate "
                    f"of '{route.route_id}' has a context window that large"
                ),
                error_type="invalid_request_error",
                param="messages",
            )
            return out
        current = fitting
    out.fitting = list(current)
    # F8: reachability
    for target in current:
        found = reachable(target)
        if found is None:
            out.reachable.append(target)
        else:
            out.unreachable.append((target, found[0], found[1]))
    if not out.reachable and not health_only:
        waits = [w for _, _, w in out.unreachable if w is not None]
        out.refusal = Refusal(
            status=503,
            code="no_healthy_candidate",
            message=f"No candidate of '{route.route_id}' is reachable right now",
            error_type="upstream_error",
            retry_after_s=min(waits) if waits else None,
        )
    return out


def _no_candidate(route: AutoRoute, why: str) -> Refusal:
    return Refusal(
        status=503,
        code="no_healthy_candidate",
        message=f"No candidate for '{route.route_id}': {why}",
        error_type="upstream_error",
    )
