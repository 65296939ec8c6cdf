"""Explain route: what the gateway would do with one sample request, as a report.

``explain(table, model, key_name=..., body=...)`` follows ``gateway.pipeline.handle``
without
calling anyone:

1. The body is validated (``parse_chat_request``) and the chain resolved
   (``build_chain``) with the key's allow-list and ``failover_defaults``; a refusal is
   reported as the gateway would answer it (status, code, param, message).
2. Each slot is planned as the attempt loop plans it: ``plan_combo`` for a combo
   (health pre-filter skips, strategy order), ``plan_targets`` for a direct or
   ``auto`` route.  Every target then passes the checks the loop makes before a call
   (already attempted, context window, capabilities, connection health).
3. Kept targets get their attempt position and why they sit there; skipped ones get
   the reason, the seconds until usable and the connection's health record.

Invariant: it is a dry run.  Planning writes strategy state before dispatch (a
round-robin pointer, a strict-random deck); here every write lands in a throwaway
overlay that only this call sees (a context variable routes the store), so live
traffic running meanwhile reads and writes the real store, and the report shows the
record read and the one a real request would have written.  No database access: the
caller passes the table.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

import orjson

from gateway import jsonload
from gateway.auto import live as auto_glue
from gateway.auto.engine.decide import AutoRequest, decide
from gateway.auto.engine.pool import AutoRoute, servable
from gateway.auto.live import auto_route
from gateway.inbound.chat import ChatRequest, RequestError, parse_chat_request
from gateway.kernel.chain import (
    ChainError,
    Slot,
    build_chain,
    plan_targets,
    with_defaults,
)
from gateway.kernel.facts import cache_key, needed_tokens, needs
from gateway.kernel.types import (
    ComboInfo,
    CompositeUnit,
    KeyPolicy,
    PlannedUnit,
    RoutingTable,
    Target,
)
from gateway.pipeline import tiers as smart_routes
from gateway.pipeline.filters import pre_call_skip, skip_detail
from gateway.pipeline.sessions import request_session, session_key
from gateway.planning.combo import RequestFacts, plan_combo, request_facts
from gateway.planning.reads import MAX_DEPTH, expands
from gateway.planning.strategies import REGISTRY
from providers.health import board, health_view
from providers.pins import dry_run as pin_dry_run
from providers.state_store import UNREAD, StateStore

DRY_RUN_NOTE = (
    "dry run: health and strategy state are read from this process's store; "
    "nothing is written and no upstream is called"
)
DEFAULT_CONTENT = "explain"
NO_KEY = KeyPolicy(id=0, name="(no key)", prefix="")
_STATE_PREFIXES = ("state:", "lkgp:")


class UnknownKey(LookupError):
    """``--key NAME`` names no API key of the table."""


# ------------------------------------------------------------------ dry-run store


class _Overlay:
    """Reads fall through to the real store; writes stay here and are logged."""

    def __init__(self, base: StateStore) -> None:
        self.base = base
        self.data: dict[str, Any] = {}
        self.reads: dict[str, Any] = {}

    def get(self, key: str) -> Any:
        value = self.data[key] if key in self.data else self.base.get(key)
        if key.startswith(_STATE_PREFIXES) and key not in self.reads:
            self.reads[key] = value
        return value

    def get_many(self, keys: Iterable[str]) -> list[Any]:
        return [self.get(key) for key in keys]

    def set(self, key: str, value: Any, ttl_s: float | None) -> None:
        self.data[key] = value

    def delete(self, key: str) -> None:
        self.data[key] = None

    def incr(self, key: str, delta: int, ttl_s: float | None) -> int:
        return int(self.update(key, lambda old: (old or 0) + delta, ttl_s))

    def update(
        self,
        key: str,
        fn: Callable[[Any], Any],
        ttl_s: float | None,
        *,
        known: Any = UNREAD,
    ) -> Any:
        value = fn(self.get(key))
        self.data[key] = value
        return value

    def keys(self, prefix: str) -> list[str]:
        found = {k for k in self.base.keys(prefix) if self.data.get(k, k) is not None}
        found.update(
            k for k, v in self.data.items() if k.startswith(prefix) and v is not None
        )
        return sorted(found)


_dry_run: ContextVar[_Overlay | None] = ContextVar("explain_dry_run", default=None)
_swap_lock = threading.Lock()


class _Routed:
    """The board's store while an explain runs: its overlay there, the real one
    everywhere else (other threads and tasks never see the context variable)."""

    def __init__(self, real: StateStore) -> None:
        self.real = real

    def _store(self) -> StateStore:
        return _dry_run.get() or self.real

    def get(self, key: str) -> Any:
        return self._store().get(key)

    def get_many(self, keys: Iterable[str]) -> list[Any]:
        return self._store().get_many(keys)

    def set(self, key: str, value: Any, ttl_s: float | None) -> None:
        self._store().set(key, value, ttl_s)

    def delete(self, key: str) -> None:
        self._store().delete(key)

    def incr(self, key: str, delta: int, ttl_s: float | None) -> int:
        return self._store().incr(key, delta, ttl_s)

    def update(
        self,
        key: str,
        fn: Callable[[Any], Any],
        ttl_s: float | None,
        *,
        known: Any = UNREAD,
    ) -> Any:
        return self._store().update(key, fn, ttl_s, known=known)

    def keys(self, prefix: str) -> list[str]:
        return self._store().keys(prefix)


@contextmanager
def _dry_run_store() -> Iterator[_Overlay]:
    with _swap_lock:  # one explain at a time swaps the board's store
        real = board.store
        overlay = _Overlay(real)
        board.store = _Routed(real)
        token = _dry_run.set(overlay)
        try:
            with pin_dry_run():  # session pins stay untouched as well
                yield overlay
        finally:
            _dry_run.reset(token)
            board.store = real


# ------------------------------------------------------------------ the report


@dataclass(slots=True)
class _Run:
    table: RoutingTable
    key: KeyPolicy
    request: ChatRequest
    now: float
    overlay: _Overlay
    kept: set[str] = field(default_factory=set)
    position: int = 0


def _find_key(table: RoutingTable, name: str | None) -> KeyPolicy:
    if name is None:
        return NO_KEY
    for policy in table.keys_by_digest.values():
        if policy.name == name:
            return policy
    raise UnknownKey(f"no API key named '{name}'")


def _body_bytes(model: str | None, body: bytes | None) -> bytes:
    if body is None:
        sample = {
            "model": model,
            "messages": [{"role": "user", "content": DEFAULT_CONTENT}],
        }
        return orjson.dumps(sample)
    if model is None:
        return body
    try:
        parsed = jsonload.loads(body)
    except orjson.JSONDecodeError:
        return body  # the gateway's own 400 says what is wrong
    if not isinstance(parsed, dict):
        return body
    return orjson.dumps({**parsed, "model": model})


def _refusal(exc: RequestError | ChainError) -> dict[str, Any]:
    return {
        "status": exc.status,
        "code": exc.code,
        "param": exc.param,
        "type": exc.error_type,
        "message": exc.message,
    }


def _key_refusal(key: KeyPolicy, now: float) -> RequestError | None:
    if key.active and (key.expires_at is None or now < key.expires_at):
        return None
    return RequestError(
        401,
        "key_disabled",
        "This API key is disabled or expired",
        error_type="authentication_error",
    )


def _allow_list(key: KeyPolicy, slot: Slot) -> dict[str, Any]:
    if key.allowed_models is None or key.allowed_regexes is None:
        return {"verdict": "allowed", "why": "no allow-list"}
    names = (slot.entry.model, slot.resolved.resolved_name)
    for glob, regex in zip(key.allowed_models, key.allowed_regexes, strict=True):
        if any(regex.fullmatch(name) for name in names):
            return {"verdict": "allowed", "why": f"matches '{glob}'"}
    return {"verdict": "denied", "why": "no glob matches"}


def _dispatch_skip(run: _Run, target: Target) -> tuple[str, float | None, str] | None:
    """The attempt loop's checks before a call: (reason, retry after, detail)."""
    body = run.request.body
    found = pre_call_skip(
        target,
        repeat=target.key in run.kept,
        failed_connections=(),
        too_large=(),
        needed=lambda: needed_tokens(body),
        wanted=lambda: needs(body),
        now=run.now,
    )
    if found is None:
        return None
    return found.reason, found.retry_after_s, skip_detail(found, target, body)


def _health(target: Target, now: float) -> dict[str, Any]:
    conn = SimpleNamespace(provider=target.provider, name=target.connection.name)
    return health_view(conn, now)


def _skipped(
    target: Target,
    reason: str,
    wait: float | None,
    stage: str,
    now: float,
    detail: str | None = None,
) -> dict[str, Any]:
    return {
        "target": target.key,
        "via": target.via,
        "reason": reason,
        "detail": detail,
        "retry_after_s": None if wait is None else round(wait, 1),
        "stage": stage,
        "health": _health(target, now),
    }


def _why_direct(target: Target, rank: int, by_cache: bool) -> str:
    conn = target.connection
    then = "rendezvous on the cache key" if by_cache else "name"
    return f"connection order {rank} (priority {conn.priority}, then provider, {then})"


def _reachable(table: RoutingTable, name: str, depth: int = 1) -> set[str]:
    combo = table.combos.get(name.lower())
    if combo is None or depth > MAX_DEPTH:
        return set()
    found = {combo.name.lower()}
    for target in combo.targets:
        if target.ref is not None:
            found |= _reachable(table, target.ref, depth + 1)
    return found


def _groups(
    table: RoutingTable, combo: ComboInfo, targets: list[PlannedUnit]
) -> list[str]:
    """The strategy candidate each target came from (``combo_plan`` step 1)."""
    expand = expands(table, combo)
    pinned = {
        (t.model.lower(), t.connection)
        for t in combo.targets
        if t.model and t.connection
    }
    refs = {t.ref: _reachable(table, t.ref) for t in combo.targets if t.ref}
    labels = []
    for target in targets:
        if isinstance(target, CompositeUnit) and target.via == combo.name:
            labels.append(target.key)
        elif isinstance(target, Target) and target.via == combo.name:
            conn = target.connection.name
            single = expand or (target.model_key.lower(), conn) in pinned
            labels.append(f"{target.model.key}@{conn if single else '*'}")
        else:
            via = (target.via or "").lower()
            ref = next((r for r, names in refs.items() if via in names), target.via)
            labels.append(f"combo:{ref}")
    return labels


def _state_of(combo: ComboInfo, records: dict[str, Any]) -> Any:
    for key, value in records.items():
        parts = key.split(":")
        owner = parts[2] if parts[0] == "state" and len(parts) > 2 else parts[1]  # noqa: PLR2004
        if owner == str(combo.id):
            return value
    return None


def _strategy_summary(table: RoutingTable, combo: ComboInfo, state: Any) -> str:
    name = combo.strategy.value
    if name not in REGISTRY:
        return f"{name}, ordered as priority"
    if name != "round-robin":
        return name if state is None else f"{name} state {orjson.dumps(state).decode()}"
    limit = combo.config.get("stickyRoundRobinLimit") or (
        table.settings.sticky_round_robin_limit
    )
    record = state if isinstance(state, dict) else {}
    text = f"round-robin next={record.get('next', 0)}"
    sticky = record.get("sticky")
    if isinstance(sticky, dict):
        return f"{text}, sticky {sticky.get('key')} {sticky.get('count')}/{limit}"
    return f"{text}, limit {limit}"


def _combo_whys(
    run: _Run, combo: ComboInfo, targets: list[PlannedUnit], summary: str
) -> list[str]:
    labels = _groups(run.table, combo, targets)
    ranks = list(dict.fromkeys(labels))
    whys = []
    for target, label in zip(targets, labels, strict=True):
        rank = ranks.index(label) + 1
        why = f"strategy order {rank} of {len(ranks)} ({summary})"
        group = [t for t, lab in zip(targets, labels, strict=True) if lab == label]
        if len(group) > 1 and not label.startswith("combo:"):
            why += f", connection {group.index(target) + 1} of {len(group)}"
        elif label.startswith("combo:"):
            why += f", via {label}"
        if isinstance(target, CompositeUnit):
            why += f", one {target.combo.strategy.value} unit (runs as a whole)"
        whys.append(why)
    return whys


def _facts(run: _Run) -> RequestFacts:
    """As the attempt loop derives them; the session comes from the body only."""
    session = request_session({}, run.request, run.key)
    return request_facts(run.request.body, session_key(run.key, session))


def _plan_auto(
    run: _Run, route: AutoRoute
) -> tuple[list[PlannedUnit], list[str], list[dict[str, Any]], dict[str, Any]]:
    """The auto pipeline as the attempt loop runs it, without Nadir calls and without
    storing self-healing exclusions (a dry run)."""
    session = request_session({}, run.request, run.key)
    scoped = session_key(run.key, session)
    env = auto_glue.environment(run.table, run.key, route, run.now, scoped)
    env.nadir_post = None
    request = AutoRequest(
        route=route,
        key=run.key,
        body=run.request.body,
        session_key=scoped,
        now=run.now,
    )
    decision = asyncio.run(decide(request, env, servable(run.table, route)))
    state: dict[str, Any] = {"auto_decision": decision.record()}
    filtered = decision.filtered
    skips = [
        _skipped(t, reason, wait, "pre-filter", run.now)
        for t, reason, wait in (filtered.unreachable if filtered else [])
    ]
    if decision.refusal is not None:
        state["refusal"] = {
            "status": decision.refusal.status,
            "code": decision.refusal.code,
            "message": decision.refusal.message,
        }
        return [], [], skips, state
    ranks = {s.key: (i + 1, s.score) for i, s in enumerate(decision.eligible)}
    whys = []
    for position, target in enumerate(decision.order):
        rank, score = ranks.get(target.key, (0, 0.0))
        why = f"auto rank {rank} of {len(decision.eligible)}, score {score:.4f}"
        if position == 0:
            why += f" — primary by {decision.strategy}"
            if decision.explored:
                why += " (explored)"
        if target.key in decision.probes:
            why += "; self-healing probe (shortened timeout)"
        whys.append(why)
    return [*decision.order], whys, skips, state


def _plan_slot(
    run: _Run, slot: Slot, warnings: list[str]
) -> tuple[list[PlannedUnit], list[str], list[dict[str, Any]], dict[str, Any]]:
    """Targets, why each is where it is, pre-filter skips, strategy state read."""
    route = auto_route(slot)
    if route is not None:
        return _plan_auto(run, route)
    combo = slot.resolved.combo
    if combo is None:
        affinity = run.table.settings.promptcache_affinity
        key = cache_key(run.request.body) if affinity else None
        targets: list[PlannedUnit] = [*plan_targets(run.table, slot, warnings, key)]
        whys = [
            _why_direct(t, i + 1, key is not None)
            for i, t in enumerate(targets)
            if isinstance(t, Target)
        ]
        return targets, whys, [], {}
    before = set(run.overlay.reads)
    plan = plan_combo(run.table, combo, _facts(run), run.now)
    reads = {k: v for k, v in run.overlay.reads.items() if k not in before}
    summary = _strategy_summary(run.table, combo, _state_of(combo, reads))
    skips = [
        _skipped(t, s.reason, s.retry_after_s, "pre-filter", run.now)
        for t, s in plan.skips
    ]
    state = {
        key: {
            "read": value,
            "written": key in run.overlay.data,
            "would_write": run.overlay.data.get(key),
        }
        for key, value in reads.items()
    }
    return plan.targets, _combo_whys(run, combo, plan.targets, summary), skips, state


def _slot_report(
    run: _Run, index: int, slot: Slot, warnings: list[str]
) -> dict[str, Any]:
    resolved = slot.resolved
    targets, whys, skipped, state = _plan_slot(run, slot, warnings)
    auto = state.pop("auto_decision", None)
    refused = state.pop("refusal", None)
    limit = run.table.settings.max_attempts_per_request
    kept = []
    for target, why in zip(targets, whys, strict=True):
        found = None
        if isinstance(target, Target):
            found = _dispatch_skip(run, target)
        if found is not None and isinstance(target, Target):
            reason, wait, detail = found
            skipped.append(
                _skipped(target, reason, wait, "dispatch", run.now, detail or None)
            )
            continue
        run.kept.add(target.key)
        run.position += 1
        note = why if run.position <= limit else f"{why}; beyond {limit} attempts"
        kept.append({"position": run.position, "target": target.key, "why": note})
    combo = resolved.combo
    return {
        "slot": index,
        "model": slot.entry.model,
        "param": slot.entry.param,
        "source": "failover_defaults"
        if slot.entry.param.startswith("failover_defaults")
        else "request",
        "route": resolved.route,
        "resolved": resolved.resolved_name,
        "strategy": auto["strategy"]
        if auto is not None
        else (combo.strategy.value if combo is not None else None),
        "auto": auto,
        "refusal": refused,
        "allow_list": _allow_list(run.key, slot),
        "targets": kept,
        "skipped": skipped,
        "state": state,
    }


def _chain(
    table: RoutingTable,
    key: KeyPolicy,
    request: ChatRequest,
    warnings: list[str],
    report: dict[str, Any],
) -> list[Slot]:
    entries = request.entry_specs()
    if not request.explicit_chain:  # the chain as sent first (spec 05 §2.1)
        entries = with_defaults(table, key, entries, warnings)
    # spec 05 §2.1: a smart alias is replaced by its tier target before resolution
    # (classified here without a session: no pin is read, written or counted)
    entries, tier = smart_routes.apply(
        table, entries, request.body, {}, None, key=key, observe=False
    )
    if tier is not None:
        report["smart"] = {
            "alias": tier.alias,
            "tier": tier.tier,
            "source": tier.source,
            "score": tier.score,
            "signals": list(tier.signals),
            "target": tier.target,
            "mode": tier.mode,
        }
    return build_chain(table, key, entries, explicit=True, warnings=warnings)


def explain(
    table: RoutingTable,
    model: str | None,
    *,
    key_name: str | None = None,
    body: bytes | None = None,
    now: float | None = None,
) -> dict[str, Any]:
    """The JSON-able report for one sample request; raises ``UnknownKey``."""
    now = time.time() if now is None else now
    key = _find_key(table, key_name)
    report: dict[str, Any] = {
        "dry_run": True,
        "note": DRY_RUN_NOTE,
        "table_version": table.version,
        "request": {"model": model, "key": key_name},
        "status": 200,
        "error": None,
        "warnings": [],
        "slots": [],
    }
    warnings: list[str] = []
    try:
        refused = _key_refusal(key, now)
        if refused is not None:
            raise refused
        request = parse_chat_request(_body_bytes(model, body))
        report["request"]["chain"] = [
            {"model": e.model, "param": e.param} for e in request.entries
        ]
        chain = _chain(table, key, request, warnings, report)
    except (RequestError, ChainError) as exc:
        report["error"] = _refusal(exc)
        report["status"] = exc.status
        return report
    with _dry_run_store() as overlay:
        run = _Run(table=table, key=key, request=request, now=now, overlay=overlay)
        report["slots"] = [
            _slot_report(run, index, slot, warnings) for index, slot in enumerate(chain)
        ]
    report["warnings"] = warnings
    return report
