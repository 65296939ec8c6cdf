"""Explain route: what the gateway would do with one sample request, as a report.

``explain(table, model, key_name=..., body=...)`` runs the pipeline's own code in a dry
run, calling nobody:

1. The body is validated (the chat wire's parser) and the chain built as a request
   builds it (``gateway.pipeline.handle.chain_entries``, then ``build_chain``) with
   the key's allow-list and ``failover_defaults``; a refusal is reported as the
   gateway would answer it (status, code, param, message).
2. Each slot is planned by the pipeline's ``Run.plan_slot`` (a combo's plan with its
   pre-filter skips, a direct model's connections, an auto decision without Nadir
   calls and healing writes), and every target passes ``Run.skip_check``, the check
   the attempt loop makes before a call (already attempted, context window,
   capabilities, connection health).
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
from types import SimpleNamespace
from typing import Any

import orjson

from gateway import jsonload
from gateway.auto.engine.decide import Decision
from gateway.inbound.chat import parse_chat_request
from gateway.kernel.chain import (
    ChainError,
    Slot,
    build_chain,
)
from gateway.kernel.exchange import ChatRequest, RequestError
from gateway.kernel.facts import cache_key
from gateway.kernel.types import (
    ComboInfo,
    CompositeUnit,
    KeyPolicy,
    PlannedUnit,
    RoutingTable,
    Target,
)
from gateway.pipeline.context import ChatContext
from gateway.pipeline.filters import skip_detail
from gateway.pipeline.handle import chain_entries
from gateway.pipeline.run import Run, SlotPlan
from gateway.pipeline.sessions import request_session, session_key
from gateway.pipeline.tiers import TierOutcome
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
    """The strategy candidate each target came from (step 1 of
    ``gateway.planning.combo``)."""
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
    name = combo.strategy
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
    table: RoutingTable, combo: ComboInfo, targets: list[PlannedUnit], summary: str
) -> list[str]:
    labels = _groups(table, combo, targets)
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
            why += f", one {target.combo.strategy} unit (runs as a whole)"
        whys.append(why)
    return whys


def _auto_whys(decision: Decision) -> list[str]:
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
    return whys


def _whys(run: Run, slot: Slot, plan: SlotPlan, state: dict[str, Any]) -> list[str]:
    """Why each unit of the plan sits where it does."""
    if plan.decision is not None:
        return _auto_whys(plan.decision) if plan.refusal is None else []
    combo = slot.resolved.combo
    table = run.ctx.table
    if combo is None:
        by_cache = table.settings.promptcache_affinity
        return [
            _why_direct(t, i + 1, by_cache and cache_key(run.request.body) is not None)
            for i, t in enumerate(plan.units)
            if isinstance(t, Target)
        ]
    summary = _strategy_summary(table, combo, _state_of(combo, state))
    return _combo_whys(table, combo, plan.units, summary)


async def _slot_report(
    run: Run,
    index: int,
    slot: Slot,
    warnings: list[str],
    overlay: _Overlay,
    now: float,
) -> dict[str, Any]:
    """One slot as the attempt loop plans it (``Run.plan_slot``) and checks each of
    its targets before a call (``Run.skip_check``), calling nobody."""
    before = set(overlay.reads)
    plan = await run.plan_slot(slot, index, warnings)
    reads = {k: v for k, v in overlay.reads.items() if k not in before}
    skipped = [
        _skipped(t, s.reason, s.retry_after_s, "pre-filter", now) for t, s in plan.skips
    ]
    limit = run.max_calls
    kept = []
    units = plan.units if plan.refusal is None else []
    whys = _whys(run, slot, plan, reads)
    for target, why in zip(units, whys, strict=True):
        if isinstance(target, Target):
            found = run.skip_check(target, index)
            if found is not None:
                detail = skip_detail(found, target, run.request.body) or None
                wait = found.retry_after_s
                skipped.append(
                    _skipped(target, found.reason, wait, "dispatch", now, detail)
                )
                continue
        run.attempted.add(target.key)  # a dry run's call: later slots see it made
        run.calls += 1
        position = run.calls
        note = why if position <= limit else f"{why}; beyond {limit} attempts"
        kept.append({"position": position, "target": target.key, "why": note})
    decision = plan.decision
    combo = slot.resolved.combo
    refusal = plan.refusal or (decision.refusal if decision is not None else None)
    return {
        "slot": index,
        "model": slot.entry.model,
        "param": slot.entry.param,
        "source": "failover_defaults"
        if slot.entry.param.startswith("failover_defaults")
        else "request",
        "route": slot.resolved.route,
        "resolved": slot.resolved.resolved_name,
        "strategy": decision.strategy
        if decision is not None
        else (combo.strategy if combo is not None else None),
        "auto": decision.record() if decision is not None else None,
        "refusal": None
        if refusal is None
        else {
            "status": refusal.status,
            "code": refusal.code,
            "message": refusal.message,
        },
        "allow_list": _allow_list(run.key, slot),
        "targets": kept,
        "skipped": skipped,
        "state": {
            key: {
                "read": value,
                "written": key in overlay.data,
                "would_write": overlay.data.get(key),
            }
            for key, value in reads.items()
        },
    }


def _smart_report(tier: TierOutcome) -> dict[str, Any]:
    return {
        "alias": tier.alias,
        "tier": tier.tier,
        "source": tier.source,
        "score": tier.score,
        "signals": list(tier.signals),
        "target": tier.target,
        "mode": tier.mode,
    }


def _context(table: RoutingTable) -> ChatContext:
    """A request context with no headers whose record goes nowhere."""
    return ChatContext(
        endpoint="explain", headers={}, table=table, record=lambda rec: None
    )


def _run_of(
    ctx: ChatContext, key: KeyPolicy, request: ChatRequest, chain: list[Slot]
) -> Run:
    """The pipeline's own ``Run`` of this request, marked a dry run (no Nadir call,
    no healing write; nothing is recorded).  Its session comes from the body only."""
    session = request_session({}, request, key)
    return Run(
        ctx=ctx,
        key=key,
        request=request,
        chain=chain,
        rec=ctx.start_run(key),
        session_key=session_key(key, session),
        dry_run=True,
    )


async def _slot_reports(
    run: Run, warnings: list[str], overlay: _Overlay, now: float
) -> list[dict[str, Any]]:
    return [
        await _slot_report(run, index, slot, warnings, overlay, now)
        for index, slot in enumerate(run.chain)
    ]


def shadowing(table: RoutingTable, names: list[str]) -> list[str]:
    """Issue #15: what each requested name hides (a smart alias or a combo named like
    another route), so the operator sees why a request does not go where the name
    suggests."""
    notes = []
    for name in dict.fromkeys(names):
        lowered = name.lower()
        owners = sorted(table.bare_models.get(lowered, ()))
        model = f"{owners[0][0]}/{owners[0][1]}" if owners else None
        if name in table.smart_routes:
            if lowered in table.combos:
                notes.append(
                    f"'{name}' is a smart alias: it shadows the combo "
                    f"'{table.combos[lowered].name}', which this name no longer reaches"
                )
            elif model is not None:
                notes.append(
                    f"'{name}' is a smart alias: it shadows the model {model} "
                    "(ask for it by provider/model)"
                )
        elif lowered in table.combos and model is not None:
            notes.append(
                f"'{name}' is a combo: it shadows the model {model} "
                "(ask for it by provider/model)"
            )
    return notes


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
        report["shadowing"] = shadowing(table, [e.model for e in request.entries])
        # the chain as a request builds it; a smart alias is classified without a
        # session, so no pin is read, written or counted
        ctx = _context(table)
        chosen = chain_entries(
            table, key, request, {}, ctx.start_run(key), observe=False
        )
        warnings = chosen.warnings
        if chosen.tier is not None:
            report["smart"] = _smart_report(chosen.tier)
        chain = build_chain(
            table, key, chosen.entries, explicit=True, warnings=warnings
        )
    except (RequestError, ChainError) as exc:
        report["error"] = _refusal(exc)
        report["status"] = exc.status
        return report
    with _dry_run_store() as overlay:
        run = _run_of(ctx, key, request, chain)
        report["slots"] = asyncio.run(_slot_reports(run, warnings, overlay, now))
    report["warnings"] = warnings
    return report
