"""Batched reads of combo planning (spec 08 §3.2).

Before ordering anything, the planner walks the combo tree for every record it will
read, mirroring ``_Planner.order``/``candidates``, and fetches them in at most two
Redis round trips: session pins (one MGET, only with a session), then strategy
records, quota readings and last-known-good records (MGET) pipelined with the shared
target stats (only for strategies whose ``Traits`` read them: ``p2c``,
``least-used``, ``quota-weighted``).  A record the
walk did not foresee is read on its own when planning asks for it.

A mixin of ``gateway.planning.combo._Planner``, beside ``affinity.SessionPlanning``
(``affinity.pin_scopes`` names the pins to read).  Health state is not read
here: it comes from the local mirror.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from gateway.kernel.ratelimits import quota_key
from gateway.kernel.types import ComboInfo, RoutingTable
from gateway.planning.affinity import pin_scopes
from gateway.planning.strategies import COMPOSITE, Traits, traits
from providers.health import board
from providers.pins import pins
from providers.target_stats import TargetSnapshot, stats

if TYPE_CHECKING:
    from gateway.planning.plan import RequestFacts

MAX_DEPTH = 3  # spec 03 §2.1


def strategy_record_key(
    strategy: str, combo: ComboInfo, facts: RequestFacts
) -> str | None:
    """The strategy's record (``Traits.record``) for this combo and request."""
    return traits(strategy).record_key(combo.id, facts.session_key)


def last_good_keys(combo: ComboInfo, session_key: str | None) -> dict[str, str]:
    """The last-known-good records an lkgp combo reads as its state (§8.6)."""
    keys = {"combo": f"lkgp:{combo.id}"}
    if session_key:
        keys["session"] = f"lkgp:{combo.id}:{session_key}"
    return keys


def expands(table: RoutingTable, combo: ComboInfo) -> bool:
    """One candidate per connection (``connectionAwareExpansion``, §4.1)."""
    return (
        bool(
            combo.config.get(
                "connectionAwareExpansion", table.settings.connection_aware_expansion
            )
        )
        or traits(combo.strategy).expands
    )


@dataclass(slots=True)
class _Wanted:
    """What planning a combo tree will read from the shared state."""

    keys: dict[str, None] = field(default_factory=dict)
    pins: dict[tuple[str, str], None] = field(default_factory=dict)
    stats: dict[str, None] = field(default_factory=dict)


class BatchedReads:
    """The batch read before planning, and the reads planning makes from it."""

    table: RoutingTable
    facts: RequestFacts
    now: float
    #: records, pins and target stats read in the batch
    prefetched: dict[str, Any]
    prefetched_pins: dict[tuple[str, str], dict[str, Any] | None]
    prefetched_stats: dict[str, TargetSnapshot]

    def prefetch(self, combo: ComboInfo) -> None:
        wanted = _Wanted()
        self._collect(combo, 1, wanted)
        if wanted.pins:
            refs = list(wanted.pins)
            self.prefetched_pins = dict(zip(refs, pins.get_many(refs), strict=True))
        keys, stat_keys = list(wanted.keys), list(wanted.stats)
        store = board.store
        along = getattr(store, "get_many_along", None)
        queue = getattr(stats, "queue_snapshot", None)
        if (
            keys
            and stat_keys
            and along is not None
            and queue is not None
            and getattr(store, "link", None) is getattr(stats, "link", None)
        ):  # both in one Redis: one pipeline, one round trip
            values, self.prefetched_stats = along(
                keys, lambda pipe: queue(pipe, stat_keys, self.now)
            )
        else:
            values = store.get_many(keys) if keys else []
            if stat_keys:
                self.prefetched_stats = stats.snapshot_many(stat_keys, self.now)
        self.prefetched = dict(zip(keys, values, strict=True))

    def _collect(self, combo: ComboInfo, depth: int, wanted: _Wanted) -> None:
        """Mirror of ``order``/``candidates``: the keys they will read."""
        name = combo.strategy
        declared = traits(name)
        session = self.facts.session_key
        state_key = strategy_record_key(name, combo, self.facts)
        if state_key is not None:
            wanted.keys[state_key] = None
        if declared.reads_last_good:
            wanted.keys.update(dict.fromkeys(last_good_keys(combo, session).values()))
        if declared.relays and session:
            wanted.keys[f"relay-summary:{combo.id}:{session}"] = None
        for scope in pin_scopes(combo, name, session):
            wanted.pins[(session or "", scope)] = None
        expand = expands(self.table, combo)
        for target in combo.targets:
            if target.ref is None:
                self._collect_model(
                    target.model or "", target.connection, declared, expand, wanted
                )
                continue
            inner = self.table.combos.get(target.ref.lower())
            if (
                inner is not None
                and inner.active
                and depth < MAX_DEPTH
                and inner.strategy not in COMPOSITE
            ):
                self._collect(inner, depth + 1, wanted)

    def _collect_model(
        self,
        model_key: str,
        pinned: str | None,
        strategy: Traits,
        expand: bool,
        wanted: _Wanted,
    ) -> None:
        slug, _, model_id = model_key.partition("/")
        provider = self.table.providers.get(slug.lower())
        if provider is None or model_id not in provider.models:
            return
        model = provider.models[model_id]
        for connection in provider.connections:
            if pinned not in (None, connection.name) or not provider.serves(
                model, connection
            ):
                continue
            if expand or pinned is not None or strategy.fills_first:
                wanted.keys[quota_key(f"{provider.slug}@{connection.name}")] = None
            if strategy.reads_stats:
                wanted.stats[f"{model.key}@{connection.name}"] = None

    def _read(self, key: str) -> Any:
        """A record from the batch read before planning, else read now."""
        if key in self.prefetched:
            return self.prefetched[key]
        return board.store.get(key)

    def _snapshot(self, target_key: str) -> TargetSnapshot:
        found = self.prefetched_stats.get(target_key)
        return found if found is not None else stats.snapshot(target_key, self.now)
