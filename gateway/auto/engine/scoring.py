"""Scoring and ranking of the candidate pool (spec 04 §3).

``score_pool(cands, weights, req)`` scores every candidate of the pool (the F8 output)
on the 16 factors of §3.2, in one pass, under ``weights`` and under
``DEFAULT_WEIGHTS`` (the DEFAULT score that self-healing reads, §6):

1. Resolve the inputs (§3.1): cost = 0.6·input + 0.4·output (one known price: that
   price; none: 1.0), p95 (unknown: 1500 ms), std (unknown: max(10, 0.1·p95)).
2. Pool-relative factors (§3.3): ``inv(v) = clamp01(1 − v/M)``, ``M = max(floor,
   max v)`` for cost, p95 and std; when every candidate has the same value (a pool of
   one included) the factor is 1.0 for all.
3. The other factors, each through ``clamp01`` (NaN and ±inf -> 0).
4. ``score = clamp01(Σ weight·factor)``; a weight missing from ``weights`` is 0.

Invariants: every factor and both scores are in [0, 1]; output order = input order;
a bad input zeroes only its own factor.  A non-finite cost, p95 or std takes no part
in the pool maximum or in the "all the same" test, and its inv factor is 0.

``rank`` orders by score (rounded to 9 decimals) descending, then p95 ascending, then
configured order.  No randomness: that enters only through exploration (§7).

The inner loop is written flat (no per-factor calls, clamps inlined with a fast
in-range path): scoring 1 000 candidates stays well under 5 ms
(``bench/auto_scoring.py``).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Iterable, Mapping, Sequence

from gateway.auto.engine.types import CandidateInput, RequestFeatures, Scored
from gateway.auto.engine.weights import DEFAULT_WEIGHTS, FACTORS
from gateway.kernel.rendezvous import rendezvous_order

# §3.1 input defaults
UNKNOWN_COST_USD_PER_MTOK = 1.0
UNKNOWN_P95_MS = 1500.0
MIN_STD_MS = 10.0
UNKNOWN_STD_SHARE_OF_P95 = 0.1
DEFAULT_QUOTA_WINDOW_S = 18_000.0
INPUT_COST_SHARE, OUTPUT_COST_SHARE = 0.6, 0.4
# §3.3 floors of M
COST_FLOOR = 0.001
P95_FLOOR_MS = 1.0
STD_FLOOR_MS = 0.001
# §1.3 price classes
CHEAP_MAX_INPUT_COST = 1.00
TOKENS_PER_PRICE_UNIT = 1_000_000
RANK_DECIMALS = 9  # §3.6

NEUTRAL = 0.5
_HEALTH = {"closed": 1.0, "half_open": 0.5, "open": 0.0}  # unknown -> closed
_TIER_PRIORITY = {"ultra": 1.0, "pro": 0.67, "standard": 0.33, "free": 0.0}
_PRICE_SCALE = {"free": 0, "cheap": 1, "premium": 2}
_AFFINITY_BY_DISTANCE = (1.0, 0.7, 0.3)
_SPECIFICITY_LEVEL = {"low": 10, "medium": 35, "high": 75}  # s of §3.2
FREE_MAX_SPECIFICITY = 15  # free fits s <= 15, cheap 15 < s <= 50, premium s > 50
CHEAP_MAX_SPECIFICITY = 50
SPECIFICITY_FIT, SPECIFICITY_MISFIT = 0.9, {"free": 0.2, "cheap": 0.4, "premium": 0.3}


def price_class(input_cost: float | None, output_cost: float | None) -> str:
    """free | cheap | premium | unknown (§1.3)."""
    if input_cost is None or math.isnan(input_cost):
        return "unknown"
    if input_cost == 0 and (output_cost is None or output_cost == 0):
        return "free"
    return "cheap" if input_cost <= CHEAP_MAX_INPUT_COST else "premium"


def _clamp01(value: float) -> float:
    """min(1, max(0, value)) with NaN and ±inf -> 0 (the slow path)."""
    if not math.isfinite(value):
        return 0.0
    return 1.0 if value > 1.0 else (0.0 if value < 0.0 else value)


def _inv_column(values: list[float], floor: float) -> list[float]:
    """``inv(v)`` of §3.3 for one input over the pool."""
    finite = [v for v in values if v - v == 0]  # inf - inf and NaN are NaN
    if not finite:
        return [0.0] * len(values)
    top = max(finite)
    if min(finite) == top:
        return [1.0 if v - v == 0 else 0.0 for v in values]
    scale = 1.0 / max(floor, top)
    column = []
    for v in values:
        f = 1.0 - v * scale
        column.append(f if 0.0 <= f <= 1.0 else _clamp01(f))
    return column


def _specificity_table(req: RequestFeatures) -> dict[str, float]:
    """price class -> specificityMatch for this request (§3.2)."""
    level = _SPECIFICITY_LEVEL.get(req.complexity)
    if not req.complexity_aware or level is None:
        return {}
    if level <= FREE_MAX_SPECIFICITY:
        fitting = "free"
    elif level <= CHEAP_MAX_SPECIFICITY:
        fitting = "cheap"
    else:
        fitting = "premium"
    return {
        cls: SPECIFICITY_FIT if cls == fitting else misfit
        for cls, misfit in SPECIFICITY_MISFIT.items()
    }


def _affinity_table(hint: str | None) -> dict[str, float]:
    """price class -> tierAffinity for the hint (§3.2)."""
    target = _PRICE_SCALE.get(hint or "")
    if target is None:
        return {}
    return {
        cls: _AFFINITY_BY_DISTANCE[abs(target - pos)]
        for cls, pos in _PRICE_SCALE.items()
    }


def _cache_winner(cands: Sequence[CandidateInput], req: RequestFeatures) -> str | None:
    if not req.promptcache_affinity or req.cache_key is None or not cands:
        return None
    return rendezvous_order(req.cache_key, [c.key for c in cands])[0]


#: ``Scored`` fields in the order ``_new_scored`` takes them.
_SCORED_FIELDS = (
    "key",
    "provider",
    "model",
    "connection",
    "order",
    "score",
    "default_score",
    "factors",
    "cost",
    "est_cost_usd",
    "p95",
    "std",
    "error_rate",
    "circuit",
    "capabilities",
    "window",
    "candidate",
)


def _scored_factory() -> Callable[..., Scored]:
    """A ``Scored`` builder taking the values of ``_SCORED_FIELDS`` positionally.

    The frozen dataclass ``__init__`` spends about 1.7 µs per object on
    ``object.__setattr__`` lookups, a third of the 5 ms budget for 1 000 candidates.
    While the fields are exactly ``_SCORED_FIELDS`` (and there is no
    ``__post_init__``), the builder fills the slots through their descriptors,
    which yields an equal object at a third of the cost; otherwise it falls back to
    the constructor, so a field added to ``Scored`` costs speed, never correctness.
    """
    names = tuple(field.name for field in dataclasses.fields(Scored))
    if names != _SCORED_FIELDS or hasattr(Scored, "__post_init__"):
        return lambda *values: Scored(**dict(zip(_SCORED_FIELDS, values, strict=True)))
    (s0, s1, s2, s3, s4, s5, s6, s7, s8, s9, s10, s11, s12, s13, s14, s15, s16) = (
        getattr(Scored, name).__set__ for name in _SCORED_FIELDS
    )
    new = object.__new__

    def build(  # noqa: PLR0913, PLR0917 - mirrors the dataclass fields
        a0: str,
        a1: str,
        a2: str,
        a3: str,
        a4: int,
        a5: float,
        a6: float,
        a7: Mapping[str, float],
        a8: float,
        a9: float,
        a10: float,
        a11: float,
        a12: float | None,
        a13: str,
        a14: frozenset[str] | None,
        a15: int | None,
        a16: CandidateInput,
    ) -> Scored:
        obj: Scored = new(Scored)
        s0(obj, a0)
        s1(obj, a1)
        s2(obj, a2)
        s3(obj, a3)
        s4(obj, a4)
        s5(obj, a5)
        s6(obj, a6)
        s7(obj, a7)
        s8(obj, a8)
        s9(obj, a9)
        s10(obj, a10)
        s11(obj, a11)
        s12(obj, a12)
        s13(obj, a13)
        s14(obj, a14)
        s15(obj, a15)
        s16(obj, a16)
        return obj

    return build


_new_scored = _scored_factory()


def _resolved_inputs(
    cands: Iterable[CandidateInput],
) -> tuple[list[float], list[float], list[float]]:
    """cost, p95 and std of every candidate after the §3.1 defaults."""
    costs: list[float] = []
    p95s: list[float] = []
    stds: list[float] = []
    for c in cands:
        ic = c.input_cost
        oc = c.output_cost
        if ic is None:
            costs.append(UNKNOWN_COST_USD_PER_MTOK if oc is None else oc)
        elif oc is None:
            costs.append(ic)
        else:
            costs.append(INPUT_COST_SHARE * ic + OUTPUT_COST_SHARE * oc)
        p95 = UNKNOWN_P95_MS if c.p95_ms is None else c.p95_ms
        p95s.append(p95)
        std = c.std_ms
        stds.append(
            max(MIN_STD_MS, UNKNOWN_STD_SHARE_OF_P95 * p95) if std is None else std
        )
    return costs, p95s, stds


def score_pool(  # noqa: C901, PLR0912, PLR0915 - one flat loop on purpose (speed)
    cands: Sequence[CandidateInput],
    weights: Mapping[str, float],
    req: RequestFeatures,
) -> list[Scored]:
    """Score every candidate of the pool; the result is in input order."""
    costs, p95s, stds = _resolved_inputs(cands)
    cost_inv = _inv_column(costs, COST_FLOOR)
    latency_inv = _inv_column(p95s, P95_FLOOR_MS)
    stability_inv = _inv_column(stds, STD_FLOOR_MS)

    w = [float(weights.get(name, 0.0)) for name in FACTORS]
    d = [DEFAULT_WEIGHTS[name] for name in FACTORS]
    w0, w1, w2, w3, w4, w5, w6, w7, w8, w9, w10, w11, w12, w13, w14, w15 = w
    d0, d1, d2, d3, d4, d5, d6, d7, d8, d9, d10, d11, d12, d13, d14, d15 = d

    affinity = _affinity_table(req.tier_hint)
    specificity = _specificity_table(req)
    needs_class = bool(affinity or specificity)
    winner = _cache_winner(cands, req)
    need = req.need_tokens
    now = req.now
    est_in = req.est_in
    est_out = req.est_out
    health_of = _HEALTH.get
    priority_of = _TIER_PRIORITY.get
    clamp = _clamp01

    same_weights = w == d
    new_scored = _new_scored

    out: list[Scored] = []
    append = out.append
    for c, cost, p95, std, ci, li, si in zip(
        cands, costs, p95s, stds, cost_inv, latency_inv, stability_inv, strict=True
    ):
        q = c.quota_pct
        if q is None:
            quota = 1.0
        else:
            quota = q / 100.0
            if not 0.0 <= quota <= 1.0:
                quota = clamp(quota)
        health = health_of(c.circuit, 1.0)
        fit = c.fitness
        if fit is None:
            fit = NEUTRAL
        elif not 0.0 <= fit <= 1.0:
            fit = clamp(fit)
        tier_priority = priority_of(c.account_tier, 0.33)
        ic = c.input_cost
        oc = c.output_cost
        if needs_class:
            cls = price_class(ic, oc)
            tier_affinity = affinity.get(cls, NEUTRAL)
            specific = specificity.get(cls, NEUTRAL)
        else:
            tier_affinity = specific = NEUTRAL
        window = c.context_window
        if window is None:
            context = NEUTRAL
        elif window > 0:
            context = 2.0 * (1.0 - need / window)
            if not 0.0 <= context <= 1.0:
                context = clamp(context)
        else:
            context = 0.0  # a window that holds nothing
        limit = c.max_concurrency
        if limit > 0:
            session = 1.0 - c.in_flight / limit
            if not 0.0 <= session <= 1.0:
                session = clamp(session)
        else:
            session = 1.0
        density = (c.n_conn - 1) / 10.0
        if not 0.0 <= density <= 1.0:
            density = clamp(density)
        cache = 1.0 if winner is not None and c.key == winner else 0.0
        resets_at = c.resets_at
        if resets_at is None:
            reset = NEUTRAL
        else:
            left = resets_at - now
            if left <= 0.0:
                reset = 1.0
            else:
                span = c.window_s
                if span is None or not span > 0.0:
                    span = DEFAULT_QUOTA_WINDOW_S
                reset = 1.0 - left / span
                if not 0.0 <= reset <= 1.0:
                    reset = clamp(reset)
        good = c.good_rate
        if good is None:
            quality = NEUTRAL
        elif 0.0 <= good <= 1.0:
            quality = good
        else:
            quality = clamp(good)
        failure = c.failure_rate
        if failure is None:
            reliability = 1.0
        else:
            reliability = 1.0 - failure
            if not 0.0 <= reliability <= 1.0:
                reliability = clamp(reliability)

        score = (
            w0 * quota
            + w1 * health
            + w2 * ci
            + w3 * li
            + w4 * fit
            + w5 * si
            + w6 * tier_priority
            + w7 * tier_affinity
            + w8 * specific
            + w9 * context
            + w10 * session
            + w11 * density
            + w12 * cache
            + w13 * reset
            + w14 * quality
            + w15 * reliability
        )
        if not 0.0 <= score <= 1.0:
            score = clamp(score)
        if same_weights:
            default_score = score
        else:
            default_score = (
                d0 * quota
                + d1 * health
                + d2 * ci
                + d3 * li
                + d4 * fit
                + d5 * si
                + d6 * tier_priority
                + d7 * tier_affinity
                + d8 * specific
                + d9 * context
                + d10 * session
                + d11 * density
                + d12 * cache
                + d13 * reset
                + d14 * quality
                + d15 * reliability
            )
        if not 0.0 <= default_score <= 1.0:
            default_score = clamp(default_score)

        # §5.2: a missing price borrows the other one; with neither, 1.0 each.
        p_in = ic if ic is not None else (oc if oc is not None else 1.0)
        p_out = oc if oc is not None else p_in
        append(
            new_scored(
                c.key,
                c.provider,
                c.model,
                c.connection,
                c.order,
                score,
                default_score,
                {
                    "quota": quota,
                    "health": health,
                    "costInv": ci,
                    "latencyInv": li,
                    "taskFit": fit,
                    "stability": si,
                    "tierPriority": tier_priority,
                    "tierAffinity": tier_affinity,
                    "specificityMatch": specific,
                    "contextAffinity": context,
                    "sessionAvailability": session,
                    "connectionDensity": density,
                    "cacheAffinity": cache,
                    "resetWindowAffinity": reset,
                    "quality": quality,
                    "reliability": reliability,
                },
                cost,
                (est_in * p_in + est_out * p_out) / TOKENS_PER_PRICE_UNIT,
                p95,
                std,
                c.failure_rate,
                c.circuit,
                c.capabilities,
                c.context_window,
                c,
            )
        )
    return out


def _rank_key(scored: Scored) -> tuple[float, float, int]:
    p95 = scored.p95
    return (
        -round(scored.score, RANK_DECIMALS),
        math.inf if math.isnan(p95) else p95,  # NaN sorts last
        scored.order,
    )


def rank(scored: Sequence[Scored]) -> list[Scored]:
    """Score (9 decimals) descending, then p95 ascending, then configured order."""
    return sorted(scored, key=_rank_key)
