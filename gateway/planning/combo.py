"""From a combo to an ordered target list for one request (spec 03 §4).

1. Each configured target becomes a candidate: a model target pinned to a connection,
   unpinned (standing for every active connection of its provider), or expanded to one
   candidate per connection (``connectionAwareExpansion``, and always for the
   quota-driven strategies and ``cache-optimized``) with ``weight / n``; a combo-ref
   plans itself (depth ≤ 3) and is dropped when its own plan is empty.
2. Health filters (§4.2) remove connections; every removed connection is a skip
   item, listed in declared order.  A candidate survives if one of its connections
   does, keeping only those.
3. The combo's strategy (``gateway.planning.strategies``) orders the survivors; its
   state record is read from and written to the state store (atomically before
   dispatch, by compare-and-set on the value read, and again after a success for
   the sticky strategies).  Reads are batched (spec 08 §3.2,
   ``gateway.planning.reads``):
   at most two Redis round trips before ordering anything; health state comes from
   the local mirror.
4. Candidates expand back into targets: an unpinned model tries its surviving
   connections by priority, then name (rendezvous order on the cache key for equal
   priorities when prompt-cache affinity is on, never for ``fill-first``); a ref's
   targets are tried in place, except a ref to a ``fusion`` or ``pipeline`` combo,
   which stays ONE ``CompositeUnit`` (§4.4) that the attempt loop runs as a whole.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from typing import Any

from gateway.kernel.chain import connection_order
from gateway.kernel.facts import DIALECT_NEEDS
from gateway.kernel.ratelimits import MAX_AGE_SECONDS, quota_key
from gateway.kernel.types import (
    ComboInfo,
    CompositeUnit,
    ConnectionInfo,
    PlannedUnit,
    RoutingTable,
    Target,
)
from gateway.planning.affinity import SessionPlanning
from gateway.planning.plan import ComboPlan, RelayPlan, RequestFacts
from gateway.planning.reads import (
    MAX_DEPTH,
    BatchedReads,
    expands,
    last_good_keys,
    strategy_record_key,
)
from gateway.planning.rotation import expanded_positions
from gateway.planning.strategies import COMPOSITE, REGISTRY, Family, traits
from gateway.planning.strategies.base import (
    Candidate,
    Ordering,
    OrderInput,
    Quota,
    Stats,
)
from gateway.planning.strategies.simple import fill_first_reserve, is_drained
from providers.health import Skip, board
from providers.target_stats import TargetSnapshot

STATE_TTL_SECONDS = 24 * 3600
SESSION_STATE_TTL_SECONDS = 30 * 60
_rng = random.Random()


_UNREAD = object()


def connection_quota(
    connection: ConnectionInfo | None,
    conn_key: str,
    now: float,
    reading: Any = _UNREAD,
) -> Quota:
    if connection is None:
        return Quota()
    cooling = board.cooldown_remaining(conn_key, now) is not None
    window = connection.quota_reset_interval_seconds
    remaining: float | None = None
    resets_at: float | None = None
    if reading is _UNREAD:
        reading = board.store.get(quota_key(conn_key))
    if isinstance(reading, dict) and now - reading.get("at", 0) <= MAX_AGE_SECONDS:
        # source 1: the connection's last rate-limit headers (< 10 min old)
        remaining = float(reading["remaining"])
        resets_at = reading.get("resets_at")
    else:
        # source 2: the configured quota
        percent = connection.quota_remaining_percent
        remaining = None if percent is None else percent / 100
        resets_at = None if not window else (now // window + 1) * window
    return Quota(
        remaining=remaining,
        resets_at=resets_at,
        window_s=float(window) if window else None,
        exhausted=cooling or remaining == 0,
    )


def _target_quota(quotas: list[Quota]) -> Quota:
    """An unpinned target's quota for fill-first (§5.2): that of its best connection
    (exhausted only when every connection is; remaining unknown when a connection
    that is not exhausted has no reading)."""
    live = [q for q in quotas if not q.exhausted]
    if not live:
        return Quota(remaining=0.0, exhausted=True)
    known = [q.remaining for q in live]
    if any(r is None for r in known):
        return Quota()
    return Quota(remaining=max(r for r in known if r is not None))


class _Planner(SessionPlanning, BatchedReads):
    def __init__(self, table: RoutingTable, facts: RequestFacts, now: float) -> None:
        self.table = table
        self.facts = facts
        self.now = now
        self.plan = ComboPlan()
        self.prefetched: dict[str, Any] = {}
        self.prefetched_pins = {}
        self.prefetched_stats: dict[str, TargetSnapshot] = {}

    def _misfit(self, target: Target) -> Skip | None:
        """The request-shaped filters of §4.2 (context window, capabilities)."""
        window = target.model.context_window
        needed = self.facts.needed
        if window is not None and needed is not None and window < needed:
            return Skip("context_too_large", None)
        capabilities = target.model.capabilities
        if capabilities is not None:
            for need in self.facts.needs:
                if (
                    need.capability not in capabilities
                    and need.capability not in DIALECT_NEEDS
                ):
                    return Skip("capability_mismatch", None, need.param)
        return None

    def _check(self, target: Target) -> Skip | None:
        return board.skip_reason(
            f"{target.provider.slug}@{target.connection.name}",
            target.model.model_id,
            target.connection.max_concurrency,
            self.now,
        )

    def _model_candidate(
        self,
        combo: ComboInfo,
        index: int,
        model_key: str,
        pinned: str | None,
        weight: float | None,
        timeout: int | None,
        expand: bool,
    ) -> list[tuple[Candidate, list[PlannedUnit]]]:
        slug, _, model_id = model_key.partition("/")
        provider = self.table.providers.get(slug.lower())
        model = provider.models.get(model_id) if provider is not None else None
        if provider is None or model is None:
            return []
        conns = [
            c
            for c in provider.connections
            if (pinned is None or c.name == pinned) and provider.serves(model, c)
        ]
        targets = [
            Target(
                provider=provider,
                model=model,
                connection=c,
                via=combo.name,
                timeout_ms=timeout,
            )
            for c in conns
        ]
        if expand and not traits(combo.strategy).fills_first:
            # one candidate per connection, in connection order (§4.1)
            targets = connection_order(targets, self._affinity_key())
        groups = [[t] for t in targets] if (expand or pinned) else [targets]
        result: list[tuple[Candidate, list[PlannedUnit]]] = []
        for group in groups:
            alive = []
            for target in group:
                # a misfit is not eligible, for adaptive too (spec 05 §3.1): its
                # all-cooling choice reads only the cooling skips
                skip = self._misfit(target) or self._check(target)
                if skip is None:
                    alive.append(target)
                else:
                    self.plan.skips.append((target, skip))
            if not alive:
                continue
            single = len(group) == 1 and (expand or pinned)
            connection = group[0].connection if single else None
            key = (
                f"{model.key}@{connection.name}"
                if connection is not None
                else f"{model.key}@*"
            )
            share = (weight / len(targets)) if (expand and weight) else weight
            adaptive = traits(combo.strategy).family is Family.ADAPTIVE
            if expand and weight is None and adaptive:
                share = 1 / len(targets)  # spec 05 §3.1: the weight 1 split evenly
            snaps = [self._snapshot(t.key) for t in alive]
            conn_key = f"{provider.slug}@{connection.name}" if connection else ""
            if connection is not None:
                quota = connection_quota(
                    connection, conn_key, self.now, self._read(quota_key(conn_key))
                )
            elif traits(combo.strategy).fills_first:
                quota = _target_quota([self._quota(t) for t in alive])
            else:
                quota = Quota()
            result.append(
                (
                    Candidate(
                        key=key,
                        index=index,
                        weight=share,
                        model=model,
                        connection=connection,
                        stats=Stats(
                            in_flight=sum(s.in_flight for s in snaps),
                            calls=sum(s.calls for s in snaps),
                            successes=sum(s.successes for s in snaps),
                            failures=sum(s.failures for s in snaps),
                            success_latency_ms_sum=sum(
                                s.success_latency_ms_sum for s in snaps
                            ),
                        ),
                        quota=quota,
                        half_open=connection is not None
                        and board.describe_circuit(conn_key, self.now).value
                        == "half_open",
                    ),
                    list(alive),
                )
            )
        return result

    def _quota(self, target: Target) -> Quota:
        conn = f"{target.provider.slug}@{target.connection.name}"
        return connection_quota(
            target.connection, conn, self.now, self._read(quota_key(conn))
        )

    def _composite_alive(self, combo: ComboInfo, depth: int) -> bool:
        """A composite ref is kept when one of its members could still answer."""
        if depth > MAX_DEPTH:
            return False
        for declared in combo.targets:
            if declared.ref is not None:
                inner = self.table.combos.get(declared.ref.lower())
                if inner is not None and inner.active and depth < MAX_DEPTH:
                    return True
                continue
            slug, _, model_id = (declared.model or "").partition("/")
            provider = self.table.providers.get(slug.lower())
            if provider is None or model_id not in provider.models:
                continue
            model = provider.models[model_id]
            for connection in provider.connections:
                if declared.connection not in (
                    None,
                    connection.name,
                ) or not provider.serves(model, connection):
                    continue
                probe = Target(provider=provider, model=model, connection=connection)
                if self._check(probe) is None:
                    return True
        return False

    def candidates(
        self, combo: ComboInfo, depth: int
    ) -> list[tuple[Candidate, list[PlannedUnit]]]:
        expand = expands(self.table, combo)
        found: list[tuple[Candidate, list[PlannedUnit]]] = []
        for index, target in enumerate(combo.targets):
            if target.ref is not None:
                inner = self.table.combos.get(target.ref.lower())
                if inner is None or not inner.active or depth >= MAX_DEPTH:
                    continue
                ref = Candidate(
                    key=f"combo:{inner.name}", index=index, weight=target.weight
                )
                if inner.strategy in COMPOSITE:
                    if self._composite_alive(inner, depth + 1):
                        found.append(
                            (ref, [CompositeUnit(combo=inner, via=combo.name)])
                        )
                    continue
                targets = self.order(inner, depth + 1)
                if targets:
                    found.append((ref, targets))
                continue
            found.extend(
                self._model_candidate(
                    combo,
                    index,
                    target.model or "",
                    target.connection,
                    target.weight,
                    target.timeout_ms,
                    expand,
                )
            )
        return found

    def order(self, combo: ComboInfo, depth: int = 1) -> list[PlannedUnit]:
        skips_before = len(self.plan.skips)
        survivors = self.candidates(combo, depth)
        name = combo.strategy
        declared = traits(name)
        if declared.family is Family.ADAPTIVE:
            return self._adaptive(combo, survivors, skips_before)
        if not survivors:
            return []
        strategy = REGISTRY.get(name, REGISTRY["priority"])
        state_key = strategy_record_key(name, combo, self.facts)
        state = self._read(state_key) if state_key else None
        if declared.reads_last_good:
            state = self._last_good(combo)
        by_key = {candidate.key: targets for candidate, targets in survivors}
        scope, honored = self._target_pin(combo, name, survivors)
        configured = tuple(t.key for t in combo.targets)
        ordered_from = tuple(c for c, _ in survivors)
        if declared.rotates_expanded and expands(self.table, combo):
            # rotate over the expanded connections, not the configured targets
            configured, ordered_from = expanded_positions(
                self.table, combo, ordered_from
            )

        def order_on(record: Any) -> Ordering:
            return strategy.order(
                OrderInput(
                    survivors=ordered_from,
                    configured=configured,
                    config=combo.config,
                    r_in=self.facts.r_in,
                    max_out=self.facts.max_out,
                    cache_key=self.facts.cache_key,
                    session_key=self.facts.session_key,
                    now=self.now,
                    rng=_rng,
                    state=record,
                    defaults={"sticky_round_robin_limit": self._rr_limit},
                )
            )

        ordering = order_on(state)
        if (
            state_key is not None
            and ordering.state_before is not None
            and honored is None  # an honoured pin advances no rotation counter
        ):
            ordering = self._commit(state_key, state, ordering, order_on)
        result = self._expand(ordering.order, by_key, combo)
        if state_key is not None:
            self._transitions(state_key, ordering, by_key, honored)
        if declared.relays and state_key is not None and self.facts.session_key:
            self._relay(combo, state_key, survivors, result)
        return self._pinned_first(result, scope, honored, survivors)

    def _transitions(
        self,
        state_key: str,
        ordering: Ordering,
        by_key: dict[str, list[PlannedUnit]],
        honored: list[PlannedUnit] | None,
    ) -> None:
        """The strategy record's updates after a call: on a success (never for an
        honoured pin, which moves no shared sticky state) and on a failure."""
        for candidate in ordering.order:
            for target in by_key[candidate.key]:
                pinned = honored is not None and any(target is h for h in honored)
                if ordering.on_success is not None and not pinned:
                    self._remember(
                        target, state_key, candidate.key, ordering.on_success
                    )
                if ordering.on_failure is not None:
                    self._remember(
                        target,
                        state_key,
                        candidate.key,
                        ordering.on_failure,
                        self.plan.on_failure,
                    )

    def _expand(
        self,
        order: tuple[Candidate, ...],
        by_key: dict[str, list[PlannedUnit]],
        combo: ComboInfo,
    ) -> list[PlannedUnit]:
        """Candidates back into targets (a model's connections in their order)."""
        result: list[PlannedUnit] = []
        for candidate in order:
            targets = by_key[candidate.key]
            if not candidate.is_ref:
                targets = self._connection_order(targets, combo)
            result.extend(targets)
        return result

    def _relay(
        self,
        combo: ComboInfo,
        state_key: str,
        survivors: list[tuple[Candidate, list[PlannedUnit]]],
        result: list[PlannedUnit],
    ) -> None:
        assert self.facts.session_key is not None
        relay = RelayPlan(
            combo=combo,
            session_key=self.facts.session_key,
            state_key=state_key,
            declared=[candidate.key for candidate, _ in survivors],
            candidate_of={
                unit.key: candidate.key
                for candidate, units in survivors
                for unit in units
            },
        )
        self.plan.relays.append(relay)
        summary = self._read(relay.summary_key)
        if not isinstance(summary, dict) or not result:
            return
        primary = result[0]
        if isinstance(primary, Target) and primary.model_key != summary.get("model"):
            for unit in result:
                if isinstance(unit, Target):
                    self.plan.inject[unit.key] = str(summary.get("text", ""))

    @staticmethod
    def _commit(
        state_key: str,
        read: Any,
        ordering: Ordering,
        order_on: Callable[[Any], Ordering],
    ) -> Ordering:
        """Write the record the ordering consumed (a rotation step, a card) before
        dispatch, atomically: if another request or worker changed it since it was
        read, order again on the value it holds now (spec 03 §5.4: concurrent
        requests spread)."""
        chosen = [ordering]

        def step(current: Any) -> Any:
            # every retry orders on the value it sees, the one read included (it
            # may be back there after another worker's steps: A -> B -> A)
            chosen[0] = ordering if current == read else order_on(current)
            after = chosen[0].state_before
            return current if after is None else after

        board.store.update(state_key, step, STATE_TTL_SECONDS, known=read)
        return chosen[0]

    @property
    def _rr_limit(self) -> int:
        return self.table.settings.sticky_round_robin_limit

    def _last_good(self, combo: ComboInfo) -> dict[str, Any]:
        """lkgp's state: the session's record and the combo's (None when unset)."""
        keys = last_good_keys(combo, self.facts.session_key)
        return {
            name: self._read(keys[name]) if name in keys else None
            for name in ("session", "combo")
        }

    def _remember(
        self,
        target: PlannedUnit,
        state_key: str,
        candidate_key: str,
        transition: Callable[[Any, str], Any],
        hooks: dict[str, list[Callable[[], None]]] | None = None,
    ) -> None:
        """Run ``transition(record, candidate key)`` on the strategy's record when
        ``target`` serves (``hooks``: ``plan.on_success``) or fails."""
        session_scoped = self.facts.session_key is not None and state_key.endswith(
            f":{self.facts.session_key}"
        )

        def write() -> None:
            ttl = SESSION_STATE_TTL_SECONDS if session_scoped else STATE_TTL_SECONDS
            board.store.update(state_key, lambda s: transition(s, candidate_key), ttl)

        found = self.plan.on_success if hooks is None else hooks
        found.setdefault(target.key, []).append(write)

    def _connection_order(
        self, units: list[PlannedUnit], combo: ComboInfo
    ) -> list[PlannedUnit]:
        targets = [t for t in units if isinstance(t, Target)]
        if len(targets) < 2 or len(targets) != len(units):  # noqa: PLR2004
            return units
        ordered: list[Target] = sorted(
            targets, key=lambda t: (t.connection.priority, t.connection.name)
        )
        if traits(combo.strategy).fills_first:
            # spec 03 §5.2: the same rule orders the connections inside a target
            reserve = fill_first_reserve(combo.config)
            drained = [
                is_drained(Candidate(key=t.key, index=0, quota=self._quota(t)), reserve)
                for t in ordered
            ]
            return [
                *(t for t, spent in zip(ordered, drained, strict=True) if not spent),
                *(t for t, spent in zip(ordered, drained, strict=True) if spent),
            ]
        return [*connection_order(ordered, self._affinity_key())]

    def _affinity_key(self) -> str | None:
        """``K`` when prompt-cache affinity orders connections (spec 03 §4.1)."""
        if not self.table.settings.promptcache_affinity:
            return None
        return self.facts.cache_key


def plan_combo(
    table: RoutingTable, combo: ComboInfo, facts: RequestFacts, now: float | None = None
) -> ComboPlan:
    planner = _Planner(table, facts, time.time() if now is None else now)
    planner.prefetch(combo)
    planner.plan.targets = planner.order(combo)
    return planner.plan
