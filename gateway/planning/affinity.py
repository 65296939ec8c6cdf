"""Session-aware parts of combo planning (spec 05 §1.4, §3): target pins for the
pin-capable strategies and the ``adaptive`` strategy (weighted power of two choices
over peak-EWMA latency × in-flight, the all-cooling exception, the warm cache).

A mixin of ``gateway.planning.combo._Planner``: it reads the planner's table, request
facts, clock and plan, and writes pins through ``providers.pins``.
"""

from __future__ import annotations

import random
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from django.conf import settings

from gateway.kernel import adaptive
from gateway.kernel.failover import REQUEST_SKIPS
from gateway.kernel.types import ComboInfo, PlannedUnit, RoutingTable, Target
from gateway.planning.strategies import Family, traits
from gateway.planning.strategies.base import Candidate
from providers.health import board
from providers.latency import latency
from providers.pins import pins
from telemetry import metrics

if TYPE_CHECKING:
    from gateway.planning.plan import ComboPlan, RequestFacts

_rng = random.Random()

#: skip reasons of a cooling candidate (spec 05 §3.3: OPEN breaker, cooldown, auth
#: disable, model lock); ``busy`` and the request-shaped misfits are not cooling
COOLING = frozenset({"circuit_open", "cooldown", "auth_disabled", "model_locked"})
#: skips of a pinned target that say nothing about it, only about this request: at
#: ``max_concurrency``, or unfit for its size or capabilities (§1.4: only a cooldown
#: or a broken target releases a pin)
KEEPS_PIN = frozenset({"busy", *REQUEST_SKIPS})


@dataclass(frozen=True, slots=True)
class AdaptiveTuning:
    objective: str
    min_weight_fraction: float
    warm_weight: float
    trickle_fraction: float
    warm_ttl_s: float


def adaptive_tuning(table: RoutingTable, combo: ComboInfo) -> AdaptiveTuning:
    """``settings.adaptive`` with the combo's ``objective`` (spec 05 §3.7)."""
    conf = table.settings.adaptive
    objective = combo.config.get("objective") or conf.get("objective") or "balanced"
    return AdaptiveTuning(
        objective=str(objective),
        min_weight_fraction=float(conf.get("min_weight_fraction", 0.05)),
        trickle_fraction=float(
            conf.get("trickle_fraction", adaptive.DEFAULT_TRICKLE_FRACTION)
        ),
        warm_weight=float(conf.get("warm_cache_weight", 8)),
        warm_ttl_s=float(conf.get("warm_cache_ttl_seconds", 600)),
    )


def pin_ttl_seconds() -> float:
    return float(getattr(settings, "OMNIROUTE_SESSION_PIN_TTL_SECONDS", 3600))


def pin_scopes(combo: ComboInfo, strategy: str, session: str | None) -> list[str]:
    """The pin scopes planning this combo reads (``_target_pin``, ``_warm_key``)."""
    if session is None:
        return []
    affinity = combo.config.get("sessionAffinity", True) is not False
    scopes = []
    declared = traits(strategy)
    if declared.pin_capable and affinity and len(combo.targets) >= 2:  # noqa: PLR2004
        scopes.append(f"combo:{combo.id}")
    if declared.family is Family.ADAPTIVE and not affinity:
        scopes.append(f"warm:{combo.id}")
    return scopes


class SessionPlanning:
    """Target pins and ``adaptive`` for the combo planner."""

    table: RoutingTable
    facts: RequestFacts
    now: float
    plan: ComboPlan
    #: pins read in the planner's batch, by (session key, scope)
    prefetched_pins: dict[tuple[str, str], dict[str, Any] | None]

    def _pin(self, session: str, scope: str) -> dict[str, Any] | None:
        """A pin from the batch read before planning, else read now."""
        ref = (session, scope)
        if ref in self.prefetched_pins:
            return self.prefetched_pins[ref]
        return pins.get(session, scope)

    def _adaptive(
        self,
        combo: ComboInfo,
        survivors: list[tuple[Candidate, list[PlannedUnit]]],
        skips_before: int,
    ) -> list[PlannedUnit]:
        """Spec 05 §3: weighted P2C over peak-EWMA latency x in-flight, the whole
        order drawn now (each later pick over the remaining candidates)."""
        scope, honored = self._target_pin(combo, combo.strategy, survivors)
        if scope is not None:
            owners = _owners(survivors)
            for _, units in survivors:
                for unit in units:
                    self._pin_on_success(unit, scope, owners[id(unit)])
        tuning = adaptive_tuning(self.table, combo)
        warming = (
            combo.config.get("sessionAffinity", True) is False
            and self.facts.session_key is not None
        )
        if not survivors:
            return self._all_cooling(combo, skips_before, scope, warming)
        by_key = {c.key: units for c, units in survivors}
        warm = None
        if warming:
            warm = self._warm_key(combo, tuning.warm_ttl_s)
            self._remember_warm(combo, survivors)
        pool = [
            (c, u)
            for c, u in survivors
            if honored is None or any(not _among(x, honored) for x in u)
        ]
        observed = adaptive.observe(
            [self._adaptive_candidate(c) for c, _ in pool], latency, self.now
        )
        _show_estimates(observed)
        order = adaptive.plan_order(
            observed,
            estimator=None,
            now=self.now,
            objective=tuning.objective,
            min_weight_fraction=tuning.min_weight_fraction,
            warm_key=warm,
            warm_weight=tuning.warm_weight,
            rng=_rng,
            trickle_fraction=tuning.trickle_fraction,
        )
        result: list[PlannedUnit] = list(honored) if honored is not None else []
        if honored is not None:
            pinned = _owners(survivors)[id(honored[0])]
            metrics.bounded(
                metrics.ROUTING_SELECTIONS, combo.name, pinned, "session_pin"
            ).inc()
        failovers: list[str] = []  # picks of the repeated selection (§3.5 step 4)
        for picked, reason in order:
            units = [
                u
                for u in by_key[picked.key]
                if honored is None or not _among(u, honored)
            ]
            if not result:
                metrics.bounded(
                    metrics.ROUTING_SELECTIONS, combo.name, picked.key, reason
                ).inc()
            else:
                failovers.append(picked.key)
                self._count_failovers(combo, units, tuple(failovers))
            result.extend(units)
        return result

    def _count_failovers(
        self, combo: ComboInfo, units: list[PlannedUnit], picks: tuple[str, ...]
    ) -> None:
        """``reason="failover"`` for every repeated selection made before one of
        ``units`` served (the plan is drawn up front; only a served request shows
        how far down it went)."""

        def count() -> None:
            for key in picks:
                metrics.bounded(
                    metrics.ROUTING_SELECTIONS, combo.name, key, "failover"
                ).inc()

        for unit in units:
            self.plan.on_success.setdefault(unit.key, []).append(count)

    def _adaptive_candidate(self, candidate: Candidate) -> adaptive.AdaptiveCandidate:
        model = candidate.model
        price = None
        if model is not None and (
            model.input_cost is not None or model.output_cost is not None
        ):
            price = (model.input_cost or 0.0) + (model.output_cost or 0.0)
        return adaptive.AdaptiveCandidate(
            key=candidate.key,
            index=candidate.index,
            base_weight=candidate.weight,
            price=price,
        )

    def _all_cooling(
        self,
        combo: ComboInfo,
        skips_before: int,
        scope: str | None,
        warming: bool,
    ) -> list[PlannedUnit]:
        """Every eligible candidate is cooling: call the one whose cooling ends
        soonest, ties to the higher configured weight, then declaration order (the
        one exception to "no fail-open", spec 05 §3.1).  Its success pins (§1.4) or
        warms (§3.4) the session like any other."""
        cooling = [
            (target, skip)
            for target, skip in self.plan.skips[skips_before:]
            if skip.reason in COOLING  # not busy, not a request-shaped misfit
        ]
        if not cooling:
            return []
        choice = adaptive.all_cooling_choice(
            [
                (
                    adaptive.AdaptiveCandidate(
                        key=t.key, index=i, base_weight=_declared_weight(combo, t)
                    ),
                    self.now + (skip.retry_after_s or 0.0),
                )
                for i, (t, skip) in enumerate(cooling)
            ]
        )
        target = cooling[choice.index][0]
        self.plan.forced.add(target.key)
        metrics.bounded(metrics.ROUTING_ALL_COOLING, combo.name).inc()
        metrics.bounded(
            metrics.ROUTING_SELECTIONS, combo.name, target.key, "all_cooling"
        ).inc()
        if scope is not None:
            self._pin_on_success(target, scope, target.key)
        if warming:
            self._remember_warm(combo, [(_cooling_candidate(target), [target])])
        return [target]

    def _warm_key(self, combo: ComboInfo, ttl_s: float) -> str | None:
        assert self.facts.session_key is not None
        record = self._pin(self.facts.session_key, f"warm:{combo.id}")
        if record is None or self.now - record.get("last_served_at", 0) > ttl_s:
            return None
        return str(record.get("candidate"))

    def _remember_warm(
        self, combo: ComboInfo, survivors: list[tuple[Candidate, list[PlannedUnit]]]
    ) -> None:
        session = self.facts.session_key
        assert session is not None
        for candidate, units in survivors:
            for unit in units:

                def write(key: str = candidate.key) -> None:
                    pins.set(
                        session,
                        f"warm:{combo.id}",
                        {"candidate": key, "last_served_at": time.time()},
                        pin_ttl_seconds(),
                    )

                self.plan.on_success.setdefault(unit.key, []).append(write)

    def _target_pin(
        self,
        combo: ComboInfo,
        name: str,
        survivors: list[tuple[Candidate, list[PlannedUnit]]],
    ) -> tuple[str | None, list[PlannedUnit] | None]:
        """Spec 05 §1.4: the pin scope, and the pinned target's units when it is
        honoured: one target, or every unit of a nested combo (``combo:<name>``)."""
        session = self.facts.session_key
        scope = f"combo:{combo.id}"
        if session is None or scope not in pin_scopes(combo, name, session):
            return None, None
        pin = self._pin(session, scope)
        if pin is None:
            return scope, None
        pinned = pin.get("target")
        for candidate, units in survivors:
            if candidate.is_ref and candidate.key == pinned and units:
                self._affinity(combo, "honored")  # the nested combo runs as a whole
                return scope, list(units)
            for unit in units:
                if isinstance(unit, Target) and unit.key == pinned:
                    self._affinity(combo, "honored")
                    self._release_on_failover(combo, unit, survivors)
                    return scope, [unit]
        skipped = next(
            (skip for target, skip in self.plan.skips if target.key == pinned), None
        )
        if skipped is not None and skipped.reason in KEEPS_PIN:
            self._affinity(combo, "bypassed")  # keep the pin; not for this request
            return scope, None
        pins.delete(session, scope)  # cooling, removed from the combo, or inactive
        self._affinity(combo, "released")
        return scope, None

    def _release_on_failover(
        self,
        combo: ComboInfo,
        honored: Target,
        survivors: list[tuple[Candidate, list[PlannedUnit]]],
    ) -> None:
        """E7: the honoured target fails and starts cooling (§3.3), so the pin is
        released; the failover attempt that then serves moves it (``_pin_on_success``).
        A failure that leaves the target usable only moves the pin."""

        def release() -> None:
            connection = honored.connection
            skip = board.skip_reason(
                f"{honored.provider.slug}@{connection.name}",
                honored.model.model_id,
                connection.max_concurrency,
                time.time(),
            )
            if skip is not None and skip.reason != "busy":
                self._affinity(combo, "released")

        for _, units in survivors:
            for unit in units:
                if unit is not honored:
                    self.plan.on_success.setdefault(unit.key, []).append(release)

    @staticmethod
    def _affinity(combo: ComboInfo, outcome: str) -> None:
        metrics.bounded(metrics.ROUTING_SESSION_AFFINITY, combo.name, outcome).inc()

    def _pin_on_success(self, unit: PlannedUnit, scope: str, pinned: str) -> None:
        """When ``unit`` serves, pin ``pinned``: its own key, or ``combo:<name>`` for
        a unit of a nested combo (spec 05: a nested-combo target is one candidate)."""
        session = self.facts.session_key
        assert session is not None

        def write() -> None:
            now = time.time()
            old = pins.get(session, scope)
            pinned_at = (
                old.get("pinned_at", now)
                if old is not None and old.get("target") == pinned
                else now
            )
            pins.set(
                session,
                scope,
                {"target": pinned, "pinned_at": pinned_at, "last_served_at": now},
                pin_ttl_seconds(),
            )

        self.plan.on_success.setdefault(unit.key, []).append(write)

    def _pinned_first(
        self,
        result: list[PlannedUnit],
        scope: str | None,
        honored: list[PlannedUnit] | None,
        survivors: list[tuple[Candidate, list[PlannedUnit]]],
    ) -> list[PlannedUnit]:
        """An honoured pin goes first; a success anywhere in the combo (re)pins."""
        if honored is not None:
            result = [*honored, *(u for u in result if not _among(u, honored))]
        if scope is not None:
            owners = _owners(survivors)
            for unit in result:
                self._pin_on_success(unit, scope, owners.get(id(unit), unit.key))
        return result


def _owners(survivors: list[tuple[Candidate, list[PlannedUnit]]]) -> dict[int, str]:
    """Unit identity -> the key a pin names: ``combo:<name>`` for the units of a
    nested combo, the unit's own key otherwise."""
    return {
        id(unit): candidate.key if candidate.is_ref else unit.key
        for candidate, units in survivors
        for unit in units
    }


def _among(unit: PlannedUnit, units: list[PlannedUnit]) -> bool:
    return any(unit is other for other in units)


def _declared_weight(combo: ComboInfo, target: Target) -> float:
    """The configured weight of ``target`` in ``combo`` (None counts 1), split evenly
    over its provider's connections when the declared target names none."""
    for declared in combo.targets:
        if declared.ref is not None or declared.model is None:
            continue
        slug, _, model_id = declared.model.partition("/")
        if (
            slug.lower() != target.provider.slug.lower()
            or model_id != target.model.model_id
            or declared.connection not in (None, target.connection.name)
        ):
            continue
        weight = 1.0 if declared.weight is None else float(declared.weight)
        if declared.connection is None and target.provider.connections:
            weight /= len(target.provider.connections)
        return weight
    return 1.0


def _cooling_candidate(target: Target) -> Candidate:
    return Candidate(key=target.key, index=0)


def _show_estimates(observed: list[adaptive.AdaptiveCandidate]) -> None:
    """``omniroute_routing_latency_estimate_ms``: ``L``, or ``D`` when unknown
    (spec 05 §3.8), as this pool sees it."""
    default = adaptive.pool_default(
        c.latency_ms for c in observed if c.latency_ms is not None
    )
    for candidate in observed:
        estimate = candidate.latency_ms
        metrics.bounded(metrics.ROUTING_LATENCY_ESTIMATE, candidate.key).set(
            default if estimate is None else estimate
        )
