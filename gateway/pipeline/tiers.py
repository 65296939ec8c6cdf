"""Smart tier routing in the gateway (spec 05 §2): an alias entry becomes its easy or
hard target before resolution.

Per request: the classifier runs at most once; each alias entry gets its tier from
its own threshold and its own session pin (``tier:<alias>``, upward only); the first
alias describes the response headers.  ``settings.smart_routing_mode`` decides
whether the tier is used (``enforce``), only reported (``observe``: the alias goes to
``hard``) or not computed at all (``off``: ``hard``, no headers, no log, no metrics).
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from gateway.kernel import smart
from gateway.kernel.chain import EntrySpec
from gateway.kernel.globs import matches
from gateway.kernel.types import KeyPolicy, RoutingTable, SmartRouteInfo
from providers.pins import pins
from telemetry import metrics

SMART_HEADER = "x-omniroute-smart-routing"
TIER_HEADER = "x-omniroute-tier"


@dataclass(frozen=True, slots=True, kw_only=True)
class TierOutcome:
    """What smart routing decided for one alias entry."""

    alias: str
    tier: str  # the tier used (observe: the one enforce would use)
    source: str
    score: int | None
    signals: tuple[str, ...]
    target: str  # that tier's configured target
    mode: str  # enforce | observe

    def headers(self) -> list[tuple[bytes, bytes]]:
        found = [
            (b"x-omniroute-tier", self.tier.encode()),
            (b"x-omniroute-tier-target", self.target.encode("utf-8", "replace")),
        ]
        if self.source != "bypass" and self.score is not None:
            found.append((b"x-omniroute-tier-score", str(self.score).encode()))
        if self.mode == "observe":
            found.append((b"x-omniroute-tier-mode", b"observe"))
        return found


def _pin(session_key: str | None, alias: str) -> smart.TierPin | None:
    if session_key is None:
        return None
    found = pins.get(session_key, f"tier:{alias}")
    if not isinstance(found, dict):
        return None
    return smart.TierPin(
        tier=found.get("tier", "easy"),
        score=int(found.get("score", 0)),
        updated_at=float(found.get("updated_at", 0.0)),
    )


def _store(
    session_key: str | None, route: SmartRouteInfo, pin: smart.TierPin | None
) -> None:
    if session_key is None or pin is None:
        return
    pins.set(
        session_key,
        f"tier:{route.alias}",
        {"tier": pin.tier, "score": pin.score, "updated_at": pin.updated_at},
        route.session_ttl_seconds,
    )


def _decide(
    route: SmartRouteInfo,
    body: Mapping[str, Any],
    headers: Mapping[str, str],
    session_key: str | None,
    verdict: smart.Verdict | None,
    now: float,
) -> tuple[smart.TierDecision, smart.Verdict | None]:
    mode = smart.header_mode(headers.get(SMART_HEADER), headers.get(TIER_HEADER))
    if mode.classify and verdict is None:
        verdict = smart.classify(body, route.threshold)
    own = None
    if verdict is not None:  # the score is shared; the tier follows this threshold
        hard = verdict.explicit_reasoning or verdict.score >= route.threshold
        own = replace(verdict, tier="hard" if hard else "easy")
    decision = smart.decide_tier(
        own if mode.classify else None,
        smart_header=headers.get(SMART_HEADER),
        tier_header=headers.get(TIER_HEADER),
        pin=_pin(session_key, route.alias),
        has_session=session_key is not None,
        now=now,
    )
    return decision, verdict


def _observe(outcome: TierOutcome, decision: smart.TierDecision) -> None:
    alias = outcome.alias
    metrics.bounded(
        metrics.SMARTROUTE_REQUESTS, alias, outcome.tier, outcome.source, outcome.mode
    ).inc()
    if decision.escalated:
        metrics.bounded(metrics.SMARTROUTE_ESCALATIONS, alias).inc()
    if outcome.score is not None and outcome.source != "bypass":
        metrics.bounded(metrics.SMARTROUTE_SCORE, alias).observe(outcome.score)
    for signal in outcome.signals:
        name = smart.signal_name(signal)
        metrics.bounded(metrics.SMARTROUTE_SIGNALS, alias, name).inc()


def apply(
    table: RoutingTable,
    entries: tuple[EntrySpec, ...],
    body: Mapping[str, Any],
    headers: Mapping[str, str],
    session_key: str | None,
    now: float | None = None,
    key: KeyPolicy | None = None,
    observe: bool = True,
) -> tuple[tuple[EntrySpec, ...], TierOutcome | None]:
    """The entries with every alias replaced by its tier target, and the first
    alias's outcome (None: no alias, or ``smart_routing_mode: off``).
    ``observe=False`` (explain route) writes no pin and counts no metric."""
    routes = table.smart_routes
    if not routes or not any(e.model in routes for e in entries):
        return entries, None
    mode = table.settings.smart_routing_mode
    if mode == "off":
        return tuple(
            _substituted(e, routes[e.model].hard) if e.model in routes else e
            for e in entries
        ), None
    now = time.time() if now is None else now
    verdict: smart.Verdict | None = None
    first: TierOutcome | None = None
    result: list[EntrySpec] = []
    for entry in entries:
        route = routes.get(entry.model)
        if route is None:
            result.append(entry)
            continue
        if key is not None and not _allowed(key, route.alias):
            # refused when the chain is built; no tier, pin, header or metric
            result.append(_substituted(entry, route.hard))
            continue
        decision, verdict = _decide(route, body, headers, session_key, verdict, now)
        if observe:
            _store(session_key, route, decision.write_pin)
        signals = tuple(verdict.signals) if verdict is not None else ()
        if decision.ignored_header:
            signals = (*signals, "header_ignored")
        target = route.hard if decision.tier == "hard" else route.easy
        outcome = TierOutcome(
            alias=route.alias,
            tier=decision.tier,
            source=decision.source,
            score=verdict.score if verdict is not None else None,
            signals=signals,
            target=target,
            mode=mode,
        )
        if observe:
            _observe(outcome, decision)
        used = route.hard if mode == "observe" else target
        result.append(_substituted(entry, used))
        first = first or outcome
    return tuple(result), first


def _allowed(key: KeyPolicy, alias: str) -> bool:
    regexes = key.allowed_regexes
    return regexes is None or any(matches(r, alias) for r in regexes)


def _substituted(entry: EntrySpec, target: str) -> EntrySpec:
    return replace(entry, model=target, alias=entry.model)
