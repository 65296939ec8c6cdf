"""Router strategies of the auto engine (spec 04 §8): who picks the primary.

``choose(name, pool, ctx)`` receives the eligible list in rank order (§3.6) and
returns a ``Choice``: the primary, the strategy that made the decision (reported as
``omniroute.strategy``), whether exploration may replace it (§7), whether
exploration samples the whole list, and an optional note.

Built-ins:

* ``rules`` — ``pool[0]``;
* ``score`` — highest score, ties by configured order (p95 ignored);
* ``cost`` (``eco``) — lowest ``cost``, ties by rank;
* ``latency`` (``fast``) — lowest ``p95 + error_rate × 1000``, ties by rank;
* ``sla-aware`` (``sla``) — the §8 score/violation order, ties by rank;
* ``lkgp`` — the candidate named by ``ctx.lkgp_record`` if still in the pool;
* ``nadir`` — asks an external service for a model through an injected poster;
* ``chaos`` — the caller fans out (§1.4); as a selector it is ``rules``.

Scores, costs, latencies and violations are compared after rounding to 9 decimals,
the precision the ranking uses (§3.6), so floating-point noise never breaks a tie.
An ``error_rate`` of ``None`` (no data) counts as 0.05 for both ``latency`` and
``sla-aware``.

Custom strategies register with ``register_router_strategy``. Names are exact and
case-sensitive: a registered name matches ``^[a-z][a-z0-9-]{0,39}$``, so ``"Cost"``
is simply unknown. A custom ``select`` may be sync or async; an async call gets
2.5 s. Its result counts only if it is a *member* of the pool in the sense of
``in`` (the same object, or a ``Scored`` equal to one field for field); the pool's
own object is then the primary.

Invariants: ``choose`` never raises for a non-empty pool (an empty pool is a
``ValueError``); the primary is always a member of ``pool``; every fallback is
``rules`` and is explorable; the only data Nadir ever receives is the last user
text, the menu of model ids and ``"source": "omniroute"``.
"""

from __future__ import annotations

import asyncio
import importlib
import inspect
import logging
import math
import re
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType, ModuleType
from typing import Any

from gateway.auto.engine.nadir import NadirPost, ask_nadir, reset_nadir_skips
from gateway.auto.engine.types import RouterContext, Scored

logger = logging.getLogger("omniroute.routing")

RULES = "rules"
BUILTIN_NAMES: tuple[str, ...] = (
    RULES,
    "score",
    "cost",
    "latency",
    "sla-aware",
    "lkgp",
    "nadir",
    "chaos",
)
#: alias -> canonical built-in name (spec 04 §8 table)
ALIASES: Mapping[str, str] = MappingProxyType(
    {"eco": "cost", "fast": "latency", "sla": "sla-aware"}
)
_NAME_RE = re.compile(r"^[a-z][a-z0-9-]{0,39}$")

CUSTOM_TIMEOUT_SECONDS = 2.5  # spec 04 §8: "an async call over 2.5 s"
UNKNOWN_ERROR_RATE = 0.05  # spec 04 §8 latency: "0.05 with no data"
LATENCY_ERROR_PENALTY_MS = 1000.0  # p95 + error_rate × 1000
_DECIMALS = 9  # the ranking's comparison precision (spec 04 §3.6)

SLA_TARGET_P95_MS = 2000.0
SLA_MAX_ERROR_RATE = 0.05
SLA_NOTE = "no candidate met all SLA constraints"
_RATIO_FLOOR = 1e-6
_STD_FLOOR = 0.001  # spec 04 §3.3 floors, for a pool without precomputed factors
_COST_FLOOR = 0.001


class RouterStrategy:
    """A named primary selector: ``select(pool, ctx)`` returns a pool member or None.

    ``select`` may be ``async def``. ``pool`` is the eligible list in rank order (a
    tuple of read-only ``Scored``); ``None`` means "let ``rules`` decide".
    """

    name: str = ""

    def select(
        self, pool: Sequence[Scored], ctx: RouterContext
    ) -> Scored | Awaitable[Scored | None] | None:
        return None  # the base strategy has no opinion: ``rules`` decides


@dataclass(frozen=True, slots=True, kw_only=True)
class Choice:
    """The primary decision: who, by which strategy, and how exploration treats it."""

    primary: Scored
    strategy: str
    explorable: bool
    whole_list: bool = False
    note: str | None = None


# --- the built-in selectors ---------------------------------------------------------


def _clamp01(x: float) -> float:
    if not math.isfinite(x):
        return 0.0
    return min(1.0, max(0.0, x))


def _r(x: float) -> float:
    return round(x, _DECIMALS)


def _error_rate(c: Scored) -> float:
    return UNKNOWN_ERROR_RATE if c.error_rate is None else c.error_rate


def _by_score(pool: Sequence[Scored]) -> Scored:
    ranked = enumerate(pool)
    return min(ranked, key=lambda ic: (-_r(ic[1].score), ic[1].order, ic[0]))[1]


def _by_cost(pool: Sequence[Scored]) -> Scored:
    return min(enumerate(pool), key=lambda ic: (_r(ic[1].cost), ic[0]))[1]


def _latency_ms(c: Scored) -> float:
    return c.p95 + _error_rate(c) * LATENCY_ERROR_PENALTY_MS


def _by_latency(pool: Sequence[Scored]) -> Scored:
    return min(enumerate(pool), key=lambda ic: (_r(_latency_ms(ic[1])), ic[0]))[1]


def _lkgp_hit(pool: Sequence[Scored], ctx: RouterContext) -> Scored | None:
    # The pipeline reads the record only when the session key S exists (§8 lkgp).
    record = ctx.lkgp_record
    if not record:
        return None
    return next((c for c in pool if c.key == record), None)


# --- sla-aware ----------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _SlaParams:
    target_p95_ms: float
    max_error_rate: float
    max_cost: float | None
    hard: bool


def _number(value: object, *, allow_zero: bool) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    x = float(value)
    if not math.isfinite(x) or x < 0 or (x == 0 and not allow_zero):
        return None
    return x


def _sla_params(sla: Mapping[str, Any]) -> _SlaParams:
    t = _number(sla.get("slaTargetP95Ms"), allow_zero=False)
    e = _number(sla.get("slaMaxErrorRate"), allow_zero=True)
    return _SlaParams(
        target_p95_ms=SLA_TARGET_P95_MS if t is None else t,
        max_error_rate=SLA_MAX_ERROR_RATE if e is None else e,
        max_cost=_number(sla.get("slaMaxCostPer1MTokens"), allow_zero=False),
        hard=sla.get("slaHardConstraints") is True,
    )


def _ratio(v: float, x: float) -> float:
    return _clamp01(x / max(v, _RATIO_FLOOR))


def _pool_inv(values: Sequence[float], floor: float) -> list[float]:
    top = max(floor, *values)
    if all(v == values[0] for v in values):
        return [1.0] * len(values)
    return [_clamp01(1 - v / top) for v in values]


def _factor(c: Scored, name: str, fallback: float) -> float:
    value = c.factors.get(name)
    return fallback if value is None else value


_HEALTH_BY_CIRCUIT = MappingProxyType({"closed": 1.0, "half_open": 0.5, "open": 0.0})


def _sla_score(c: Scored, p: _SlaParams, *, stability: float, cost_inv: float) -> float:
    """The §8 sla-aware score of one candidate."""
    health = _factor(c, "health", _HEALTH_BY_CIRCUIT.get(c.circuit, 1.0))
    cost_term = cost_inv if p.max_cost is None else _ratio(c.cost, p.max_cost)
    return (
        0.35 * _ratio(c.p95, p.target_p95_ms)
        + 0.35 * _ratio(_error_rate(c), p.max_error_rate)
        + 0.15 * health
        + 0.10 * cost_term
        + 0.05 * stability
    )


def _sla_violation(c: Scored, p: _SlaParams) -> float:
    """The §8 violation: 0 when every SLA constraint holds."""
    total = max(0.0, c.p95 - p.target_p95_ms) / p.target_p95_ms
    err, e = _error_rate(c), p.max_error_rate
    if err > e:
        total += err if e == 0 else (err - e) / e
    if p.max_cost is not None and c.cost > p.max_cost:
        total += (c.cost - p.max_cost) / p.max_cost
    return total


@dataclass(frozen=True, slots=True)
class SlaRow:
    """One candidate under ``sla-aware``: its §8 score and violation (unrounded)."""

    candidate: Scored
    score: float
    violation: float


def sla_rows(pool: Sequence[Scored], sla: Mapping[str, Any]) -> tuple[SlaRow, ...]:
    """The §8 score and violation of every pool member, in pool order.

    ``sla`` holds the combo's ``sla*`` keys; a missing or invalid value takes its
    default. ``inv(std)`` and ``inv(cost)`` are the pool-relative ``stability`` and
    ``costInv`` factors scoring computed; a candidate without them gets them
    computed over ``pool`` (spec 04 §3.3).
    """
    p = _sla_params(sla)
    std_inv = _pool_inv([c.std for c in pool], _STD_FLOOR)
    cost_inv = _pool_inv([c.cost for c in pool], _COST_FLOOR)
    return tuple(
        SlaRow(
            candidate=c,
            score=_sla_score(
                c,
                p,
                stability=_factor(c, "stability", std_inv[i]),
                cost_inv=_factor(c, "costInv", cost_inv[i]),
            ),
            violation=_sla_violation(c, p),
        )
        for i, c in enumerate(pool)
    )


def _by_sla(
    pool: Sequence[Scored], sla: Mapping[str, Any]
) -> tuple[Scored, str | None]:
    rows = [
        (_r(row.violation), _r(row.score), i)
        for i, row in enumerate(sla_rows(pool, sla))
    ]
    if _sla_params(sla).hard:
        best = min(rows, key=lambda row: (row[0], -row[1], row[2]))
    else:
        best = min(rows, key=lambda row: (-row[1], row[2]))
    note = None if any(row[0] == 0 for row in rows) else SLA_NOTE
    return pool[best[2]], note


# --- registry -----------------------------------------------------------------------


class _Builtin(RouterStrategy):
    """A built-in as a plain selector (for ``get_router_strategy``); ``choose`` adds
    notes, fallbacks and Nadir's poster."""

    def __init__(
        self,
        name: str,
        pick: Callable[[Sequence[Scored], RouterContext], Scored | None],
    ) -> None:
        self.name = name
        self._pick = pick

    def select(self, pool: Sequence[Scored], ctx: RouterContext) -> Scored | None:
        return self._pick(pool, ctx) if pool else None


_BUILTINS: Mapping[str, RouterStrategy] = MappingProxyType(
    {
        RULES: _Builtin(RULES, lambda pool, ctx: pool[0]),
        "score": _Builtin("score", lambda pool, ctx: _by_score(pool)),
        "cost": _Builtin("cost", lambda pool, ctx: _by_cost(pool)),
        "latency": _Builtin("latency", lambda pool, ctx: _by_latency(pool)),
        "sla-aware": _Builtin("sla-aware", lambda pool, ctx: _by_sla(pool, ctx.sla)[0]),
        "lkgp": _Builtin("lkgp", _lkgp_hit),
        # Nadir needs the injected poster that only ``choose`` receives.
        "nadir": _Builtin("nadir", lambda pool, ctx: None),
        "chaos": _Builtin("chaos", lambda pool, ctx: pool[0]),
    }
)

_BY_KEY: Mapping[str, Callable[[Sequence[Scored]], Scored]] = MappingProxyType(
    {"score": _by_score, "cost": _by_cost, "latency": _by_latency}
)

# Filled at startup by ``load_strategy_modules``; read-only afterwards.
_CUSTOM: dict[str, RouterStrategy] = {}


def registered_router_strategy_names() -> list[str]:
    """The custom strategies registered in this process, sorted."""
    return sorted(_CUSTOM)


def canonical_name(name: str) -> str:
    """The canonical name of an alias (eco, fast, sla); any other name unchanged."""
    return ALIASES.get(name, name)


def is_known_strategy(name: str) -> bool:
    """A built-in name, an alias or a registered custom name (exact, case-sensitive)."""
    return name in _BUILTINS or name in ALIASES or name in _CUSTOM


def get_router_strategy(name: str) -> RouterStrategy | None:
    """The strategy registered under ``name`` (aliases resolved), or None."""
    canonical = canonical_name(name)
    return _BUILTINS.get(canonical) or _CUSTOM.get(canonical)


def register_router_strategy(
    strategy: RouterStrategy, *, replace: bool = False
) -> None:
    """Register a custom strategy under ``strategy.name``.

    Raises ``ValueError`` for a malformed name, a built-in name or alias, or a name
    already registered (unless ``replace``); ``TypeError`` without a ``select``.
    """
    name = getattr(strategy, "name", None)
    if not isinstance(name, str) or not _NAME_RE.fullmatch(name):
        raise ValueError(
            f"Invalid router strategy name {name!r}: must match {_NAME_RE.pattern}"
        )
    if name in _BUILTINS or name in ALIASES:
        raise ValueError(f"Router strategy name {name!r} is a built-in name or alias")
    if name in _CUSTOM and not replace:
        raise ValueError(
            f"Router strategy {name!r} is already registered; pass replace=True"
        )
    if not callable(getattr(strategy, "select", None)):
        raise TypeError(f"Router strategy {name!r} has no callable select()")
    _CUSTOM[name] = strategy


def load_strategy_modules(names: Iterable[str] | str) -> tuple[ModuleType, ...]:
    """Import each dotted module path (blank entries skipped); a string is split on
    commas, as ``OMNIROUTE_ROUTER_STRATEGY_MODULES`` is written.

    An import failure raises ``ImportError`` naming the module; any other error of
    the module's own code propagates with a note naming it.
    """
    entries = names.split(",") if isinstance(names, str) else names
    loaded = []
    for entry in entries:
        dotted = entry.strip()
        if not dotted:
            continue
        try:
            loaded.append(importlib.import_module(dotted))
        except ImportError as exc:
            raise ImportError(
                f"Cannot import router strategy module {dotted!r} "
                f"(OMNIROUTE_ROUTER_STRATEGY_MODULES): {exc}"
            ) from exc
        except Exception as exc:
            exc.add_note(f"while importing router strategy module {dotted!r}")
            raise
    return tuple(loaded)


# --- the entry point ----------------------------------------------------------------


def _rules(pool: Sequence[Scored], note: str | None = None) -> Choice:
    return Choice(primary=pool[0], strategy=RULES, explorable=True, note=note)


def _decide_ranked(name: str) -> Callable[[Sequence[Scored], RouterContext], Choice]:
    pick = _BY_KEY[name]

    def decide(pool: Sequence[Scored], ctx: RouterContext) -> Choice:
        return Choice(
            primary=pick(pool),
            strategy=name,
            explorable=True,
            whole_list=name == "score",  # spec 04 §7: score samples the whole list
        )

    return decide


def _decide_sla(pool: Sequence[Scored], ctx: RouterContext) -> Choice:
    primary, note = _by_sla(pool, ctx.sla)
    return Choice(primary=primary, strategy="sla-aware", explorable=True, note=note)


def _decide_lkgp(pool: Sequence[Scored], ctx: RouterContext) -> Choice:
    hit = _lkgp_hit(pool, ctx)
    if hit is None:
        return _rules(pool)
    return Choice(primary=hit, strategy="lkgp", explorable=False)


def _decide_chaos(pool: Sequence[Scored], ctx: RouterContext) -> Choice:
    # The caller runs the fan-out of §1.4; the primary is only what it reports.
    return Choice(primary=pool[0], strategy="chaos", explorable=False)


#: every built-in except nadir, which needs the injected poster
_DECIDERS: Mapping[str, Callable[[Sequence[Scored], RouterContext], Choice]] = (
    MappingProxyType(
        {
            RULES: lambda pool, ctx: _rules(pool),
            "score": _decide_ranked("score"),
            "cost": _decide_ranked("cost"),
            "latency": _decide_ranked("latency"),
            "sla-aware": _decide_sla,
            "lkgp": _decide_lkgp,
            "chaos": _decide_chaos,
        }
    )
)


async def choose(
    name: str,
    pool: Sequence[Scored],
    ctx: RouterContext,
    *,
    nadir_post: NadirPost | None = None,
    custom_timeout_s: float = CUSTOM_TIMEOUT_SECONDS,
) -> Choice:
    """Select the primary of ``pool`` (the eligible list, rank order) with ``name``.

    Never raises for a non-empty pool: an unknown name, a failing custom strategy
    and every Nadir failure fall back to ``rules``. ``custom_timeout_s`` exists
    for tests; production keeps the spec's 2.5 s.
    """
    if not pool:
        raise ValueError("choose() needs a non-empty eligible pool")
    pool = tuple(pool)
    canonical = canonical_name(name)
    decide = _DECIDERS.get(canonical)
    if decide is not None:
        return decide(pool, ctx)
    if canonical == "nadir":
        return await _choose_nadir(pool, ctx, nadir_post)
    custom = _CUSTOM.get(canonical)
    if custom is None:
        logger.warning(
            "Unknown router strategy %r for %s; rules decides", name, ctx.route_id
        )
        return _rules(pool, note=f"unknown router strategy {name!r}")
    return await _choose_custom(custom, pool, ctx, custom_timeout_s)


async def _choose_custom(
    strategy: RouterStrategy,
    pool: tuple[Scored, ...],
    ctx: RouterContext,
    timeout_s: float,
) -> Choice:
    name = strategy.name
    try:
        result: object = strategy.select(pool, ctx)
        if inspect.isawaitable(result):
            result = await asyncio.wait_for(result, timeout=timeout_s)
    except TimeoutError:
        logger.warning(
            "Router strategy %r took over %.1f s on %s; rules decides",
            name,
            timeout_s,
            ctx.route_id,
        )
        return _rules(pool, note=f"router strategy {name!r} timed out")
    except Exception:  # spec 04 §8: any error of a plug-in -> rules
        logger.warning(
            "Router strategy %r failed on %s; rules decides",
            name,
            ctx.route_id,
            exc_info=True,
        )
        return _rules(pool, note=f"router strategy {name!r} failed")
    if result is None:
        return _rules(pool)
    member = _member(pool, result)
    if member is None:
        logger.warning(
            "Router strategy %r returned %s, not a pool member, on %s; rules decides",
            name,
            type(result).__name__,
            ctx.route_id,
        )
        return _rules(pool, note=f"router strategy {name!r} returned a foreign object")
    return Choice(primary=member, strategy=name, explorable=False)


def _member(pool: tuple[Scored, ...], result: object) -> Scored | None:
    if not isinstance(result, Scored):
        return None
    for c in pool:
        if c is result:
            return c
    return next((c for c in pool if c == result), None)


# --- nadir (the service call lives in ``gateway.auto.engine.nadir``)
# --------------------


async def _choose_nadir(
    pool: tuple[Scored, ...], ctx: RouterContext, post: NadirPost | None
) -> Choice:
    answer = await ask_nadir(pool, ctx, post)
    if answer.model is None:
        return _rules(pool, note=answer.note)
    # rules picks among the candidates of that model: the first in rank order
    primary = next(c for c in pool if c.model == answer.model)
    return Choice(primary=primary, strategy="nadir", explorable=False)


__all__ = [
    "ALIASES",
    "BUILTIN_NAMES",
    "Choice",
    "NadirPost",
    "RouterStrategy",
    "SlaRow",
    "canonical_name",
    "choose",
    "get_router_strategy",
    "is_known_strategy",
    "load_strategy_modules",
    "register_router_strategy",
    "reset_nadir_skips",
    "sla_rows",
]
