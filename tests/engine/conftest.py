"""Builders for engine tests: compact arguments in, frozen engine values out.

``make_table`` mirrors what ``gateway.config.snapshot.build_table`` derives from the
database
(connection order, the case-insensitive model index, the bare-id index), so engine
tests run on tables shaped exactly like production ones without touching the ORM.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from types import MappingProxyType
from typing import Any

import pytest

from gateway.kernel.chain import EntrySpec, Slot
from gateway.kernel.failover import Item
from gateway.kernel.resolve import resolve
from gateway.kernel.types import (
    ComboInfo,
    ComboTargetInfo,
    ConnectionInfo,
    FailoverDefaults,
    GatewaySettings,
    KeyPolicy,
    MappingInfo,
    ModelInfo,
    ProviderInfo,
    RoutingTable,
)

ModelSpec = str | Mapping[str, Any]
ProviderSpec = Sequence[ModelSpec] | Mapping[str, Any]
TargetSpec = str | Mapping[str, Any]
ComboSpec = Sequence[TargetSpec] | Mapping[str, Any]


def _model(slug: str, spec: ModelSpec, position: int) -> ModelInfo:
    if isinstance(spec, str):
        return ModelInfo(provider=slug, model_id=spec, position=position)
    return ModelInfo(provider=slug, position=position, **spec)


def _connections(
    slug: str, spec: Sequence[str] | Mapping[str, int]
) -> tuple[ConnectionInfo, ...]:
    pairs = spec.items() if isinstance(spec, Mapping) else ((n, 0) for n in spec)
    # The snapshot keeps active connections ordered by priority, then name.
    ordered = sorted(pairs, key=lambda pair: (pair[1], pair[0]))
    return tuple(
        ConnectionInfo(provider=slug, name=name, priority=priority)
        for name, priority in ordered
    )


def _provider(slug: str, spec: ProviderSpec) -> ProviderInfo:
    """``["m1", ...]`` (one connection ``main``) or ``{"models": ..., ...}``.

    The mapping form takes ``models``, ``connections`` (names, or name -> priority;
    ``()`` for a provider without an active connection) and ``kind``.
    """
    options: Mapping[str, Any] = spec if isinstance(spec, Mapping) else {"models": spec}
    catalog = {
        model.model_id: model
        for model in (
            _model(slug, item, index)
            for index, item in enumerate(options.get("models", ()))
        )
    }
    lower: dict[str, list[str]] = defaultdict(list)
    for model_id in catalog:
        lower[model_id.lower()].append(model_id)
    return ProviderInfo(
        slug=slug,
        kind=options.get("kind", "openai"),
        base_url=f"https://{slug}.example/v1",
        connections=_connections(slug, options.get("connections", ("main",))),
        models=MappingProxyType(catalog),
        models_lower=MappingProxyType({k: tuple(v) for k, v in lower.items()}),
    )


def _target(spec: TargetSpec) -> ComboTargetInfo:
    """``"pa/m1"``, ``"pa/m1@main"`` (pinned), ``"combo:B"`` (ref) or kwargs."""
    if not isinstance(spec, str):
        return ComboTargetInfo(**spec)
    if spec.startswith("combo:"):
        return ComboTargetInfo(ref=spec.removeprefix("combo:"))
    model, _, connection = spec.partition("@")
    return ComboTargetInfo(model=model, connection=connection or None)


def _combo(index: int, name: str, spec: ComboSpec) -> ComboInfo:
    """``["pa/m1", ...]`` or ``{"targets": [...], "active": ..., "strategy": ...}``."""
    options: Mapping[str, Any] = (
        spec if isinstance(spec, Mapping) else {"targets": spec}
    )
    return ComboInfo(
        id=index + 1,
        name=name,
        strategy=options.get("strategy", "priority"),
        active=options.get("active", True),
        targets=tuple(_target(t) for t in options.get("targets", ())),
    )


def build_table(
    providers: Mapping[str, ProviderSpec] | None = None,
    *,
    combos: Mapping[str, ComboSpec] | None = None,
    mappings: Sequence[tuple[str, str, int]] = (),
    settings: GatewaySettings | None = None,
) -> RoutingTable:
    """A routing table from compact specs.

    ``mappings`` are ``(pattern, combo name, priority)`` in creation order; the table
    itself puts them in resolution order.
    """
    built = {
        slug.lower(): _provider(slug, spec) for slug, spec in (providers or {}).items()
    }
    bare: dict[str, list[tuple[str, str]]] = defaultdict(list)
    for provider in built.values():
        if provider.connections:
            for model_id in provider.models:
                bare[model_id.lower()].append((provider.slug, model_id))
    return RoutingTable(
        providers=MappingProxyType(built),
        combos=MappingProxyType(
            {
                name.lower(): _combo(index, name, spec)
                for index, (name, spec) in enumerate((combos or {}).items())
            }
        ),
        mappings=tuple(
            MappingInfo(pattern=pattern, combo=combo, priority=priority)
            for pattern, combo, priority in mappings
        ),
        bare_models=MappingProxyType({k: tuple(v) for k, v in bare.items()}),
        settings=settings or GatewaySettings(),
    )


def build_key(
    *,
    allowed: Sequence[str] | None = None,
    defaults: Sequence[str] | None = None,
    name: str = "k",
    **options: Any,
) -> KeyPolicy:
    """A key; ``defaults`` are its ``failoverDefaults.models``, ``options`` the rest."""
    failover = (
        FailoverDefaults(models=tuple(defaults or ()), **options)
        if defaults is not None or options
        else None
    )
    return KeyPolicy(
        id=1,
        name=name,
        prefix="sk-omni-test",
        # allowed_regexes are compiled by KeyPolicy itself
        allowed_models=tuple(allowed) if allowed is not None else None,
        failover_defaults=failover,
    )


@pytest.fixture
def make_table() -> Callable[..., RoutingTable]:
    return build_table


@pytest.fixture
def make_key() -> Callable[..., KeyPolicy]:
    return build_key


@pytest.fixture
def make_slot() -> Callable[..., Slot]:
    """A resolved chain slot: ``make_slot(table, "pa/m1", timeout_ms=...)``."""

    def _make(
        table: RoutingTable,
        model: str,
        *,
        param: str = "model",
        timeout_ms: int | None = None,
        first_token_timeout_ms: int | None = None,
    ) -> Slot:
        entry = EntrySpec(
            model=model,
            param=param,
            timeout_ms=timeout_ms,
            first_token_timeout_ms=first_token_timeout_ms,
        )
        return Slot(entry=entry, resolved=resolve(table, model))

    return _make


@pytest.fixture
def make_item() -> Callable[..., Item]:
    """A report item: ``make_item("failed", "server_error", model="pa/m1")``."""

    def _make(status: str, reason: str | None = None, **fields: Any) -> Item:
        fields.setdefault("model", "pa/m1")
        fields.setdefault("slot", 0)
        fields.setdefault("via", None)
        fields.setdefault("connection", "main")
        if status == "skipped":
            fields.setdefault("calls", 0)
        return Item(status=status, reason=reason, **fields)

    return _make


# --- ordering strategies (spec 03 §5) ---------------------------------------------

#: the fixed clock of strategy tests (unix seconds)
STRATEGY_NOW = 1_700_000_000.0


def build_candidate(key: str, index: int = 0, **facts: Any) -> Any:
    """A strategy candidate from its target key and flat facts.

    ``"pa/m1@main"`` (a connection), ``"pa/m1@*"`` (unpinned) or ``"combo:B"`` (a
    ref).  ``facts``: ``weight``, ``half_open``; the ``Stats`` fields (``in_flight``,
    ``calls``, ``successes``, ``failures``, ``success_latency_ms_sum``); the ``Quota``
    fields (``remaining``, ``resets_at``, ``window_s``, ``exhausted``); the catalog
    fields ``input_cost``, ``output_cost``, ``context_window``.
    """
    from gateway.planning.strategies.base import Candidate, Quota, Stats

    stats = {f: facts.pop(f) for f in Stats.__dataclass_fields__ if f in facts}
    quota = {f: facts.pop(f) for f in Quota.__dataclass_fields__ if f in facts}
    catalog = {
        f: facts.pop(f)
        for f in ("input_cost", "output_cost", "context_window")
        if f in facts
    }
    model = connection = None
    if not key.startswith("combo:"):
        model_key, _, pinned = key.partition("@")
        provider, _, model_id = model_key.partition("/")
        model = ModelInfo(provider=provider, model_id=model_id, **catalog)
        if pinned not in ("", "*"):
            connection = ConnectionInfo(provider=provider, name=pinned)
    return Candidate(
        key=key,
        index=index,
        model=model,
        connection=connection,
        stats=Stats(**stats),
        quota=Quota(**quota),
        **facts,
    )


def build_order_input(
    *survivors: Any,
    configured: Sequence[str] | None = None,
    seed: int = 0,
    rng: Any = None,
    **fields: Any,
) -> Any:
    """An ``OrderInput`` over ``survivors`` (keys or ``Candidate``s, declared order).

    A key becomes a bare candidate whose index is its position in ``configured``
    (default: the survivors' keys, i.e. nothing filtered).  ``fields`` override the
    rest: ``config``, ``r_in``, ``max_out``, ``cache_key``, ``session_key``, ``now``,
    ``state``, ``defaults``.  ``rng`` wins over ``seed``.
    """
    import random

    from gateway.planning.strategies.base import OrderInput

    keys = [s if isinstance(s, str) else s.key for s in survivors]
    configured = tuple(configured if configured is not None else keys)
    candidates = tuple(
        build_candidate(s, configured.index(s)) if isinstance(s, str) else s
        for s in survivors
    )
    fields.setdefault("config", {})
    fields.setdefault("r_in", 0)
    fields.setdefault("max_out", None)
    fields.setdefault("cache_key", None)
    fields.setdefault("session_key", None)
    fields.setdefault("now", STRATEGY_NOW)
    return OrderInput(
        survivors=candidates,
        configured=configured,
        rng=rng if rng is not None else random.Random(seed),
        **fields,
    )


def replay_requests(
    strategy: Any,
    requests: int,
    make_input: Callable[[Any], Any],
    *,
    state: Any = None,
    served: Callable[[Any], str] | None = None,
) -> tuple[list[str], Any]:
    """Run ``requests`` requests through ``strategy`` with a dict-like store of one.

    ``make_input(state)`` builds each request's input; ``state_before`` is written
    before dispatch and ``on_success`` applied for the served key (default: the
    primary; return None from ``served`` for a request where every target failed).
    Returns the primaries and the final state.
    """
    primaries = []
    for _ in range(requests):
        ordering = strategy.order(make_input(state))
        if ordering.state_before is not None:
            state = ordering.state_before
        primaries.append(ordering.order[0].key)
        key = ordering.order[0].key if served is None else served(ordering)
        if ordering.on_success is not None and key is not None:
            state = ordering.on_success(state, key)
    return primaries, state


@pytest.fixture(scope="session")
def make_candidate() -> Callable[..., Any]:
    return build_candidate


@pytest.fixture(scope="session")
def make_order_input() -> Callable[..., Any]:
    return build_order_input


@pytest.fixture(scope="session")
def replay() -> Callable[..., tuple[list[str], Any]]:
    return replay_requests
