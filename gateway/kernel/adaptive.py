"""Adaptive routing (spec 05 §3): peak-EWMA latency, weights, weighted P2C.

Pure: no Django, no I/O.  ``adaptive`` picks one candidate, and after a failover
trigger picks again over the candidates still eligible, with ``D`` and the weights
recomputed (§3.5 step 4).  The caller owns eligibility (§3.1: active, below
``max_concurrency``, request filters) and health (§3.3); this module decides:

1. ``LatencyEstimator`` — per target key ``L`` (ms), the time ``t0`` of its last
   sample and the start times of its attempts in flight (§3.2); ``overdue`` counts
   those running for longer than ``L``, the ``n`` of the comparison.  A sample ``x``
   at ``t``: the first one or a peak (``x ≥ L``) sets ``L = x``; otherwise
   ``w = exp(−(t − t0)/τ)`` and ``L = L·w + x·(1 − w)``; ``t0 = t`` in every case.
   An estimate with no sample for more than 30 s is unknown and counts as the pool
   default ``D``
   (``pool_default``: the lower median of the fresh estimates, else 1 000 ms).
2. ``weights`` (§3.4) — ``w_i = base_i × (L_min / L_i) × (p_min / p_i)^k``, then the
   warm-cache boost, then the floor ``max(w_i, min_weight_fraction × max_j w_j)``.
3. ``select`` (§3.5) — one drawable candidate is chosen without a draw; otherwise
   ``draw_pair`` draws ``a`` then ``b`` by weight and the lower
   ``load = L × (n + 1) × (p / p_min)^k`` wins, ``n`` the attempts in flight past
   ``L`` (amended: a target's normal concurrency is not queueing; ties: higher
   weight, then ``a``);
   with probability ``trickle_fraction`` (a third draw) ``b`` is served without the
   comparison (``trickle``), so a target that lost once is re-measured; a ``b``
   sampled within the last τ is compared as usual (amended: the trickle is for
   re-measuring, and each trickled request on a dear target costs its price).
4. ``all_cooling_choice`` (§3.1) — when every eligible candidate is cooling, the one
   whose cooling ends soonest.

``choose`` is one pick (pool default, weights, selection); ``plan_order`` repeats it
over the candidates not yet picked to list a whole attempt order (the first pick
``single`` or ``p2c``, every later one ``failover``).

In the gateway the combo planner (``gateway.planning.affinity``) reads each eligible
candidate's estimate and in-flight count once (``observe``) and draws the whole
attempt order up front with ``plan_order``: a failure during the request does not
reorder the picks after it.  It also calls ``all_cooling_choice`` when every
eligible candidate cools, and ``pool_default`` for the
``omniroute_routing_latency_estimate_ms`` gauge.  The estimator is one per process
(``providers.latency``), fed by every attempt (``gateway.pipeline.health``: ``started``,
``finished``, ``sample``, ``error_sample``) and cleared per connection by "Reset
health state" (``forget``).

Invariants: a candidate of weight 0 (standby) is never drawn while one of positive
weight is in the set; ``rng.random()`` is called exactly twice per draw (three times
with a positive ``trickle_fraction``) and never when there is a single drawable
candidate; in-flight counts never go below 0; the
estimator only ever reads the time it is given.
"""

from __future__ import annotations

import bisect
import math
import random
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from types import MappingProxyType

TAU_S = 10.0  # spec 05 §3.2: time constant of the peak-EWMA decay
FRESH_S = 30.0  # spec 05 §3.2: 3τ without a sample -> the estimate is unknown
DEFAULT_LATENCY_MS = 1000.0  # spec 05 §3.2: D when no eligible estimate is fresh
PRICE_FLOOR_USD_PER_MTOK = 0.01  # spec 05 §3.4: p_i = max(price, 0.01)
MAX_MIN_WEIGHT_FRACTION = 0.5  # spec 05 §3.4: min_weight_fraction is 0..0.5
# A measured 0 ms (a coarse clock, an in-process mock) would divide by zero in
# L_min / L_i; one microsecond keeps every real ratio intact.
LATENCY_FLOOR_MS = 0.001

#: objective -> exponent k of the price factor (spec 05 §3.4)
OBJECTIVE_EXPONENTS: Mapping[str, int] = MappingProxyType(
    {"latency": 0, "balanced": 1, "cost": 2}
)

REASON_SINGLE = "single"
REASON_P2C = "p2c"
REASON_FAILOVER = "failover"
REASON_TRICKLE = "trickle"
DEFAULT_TRICKLE_FRACTION = 0.02  # spec 05 §3.5 step 5 (amended)
MAX_TRICKLE_FRACTION = 0.2
_PAIR = 2  # power of *two* choices


# --- latency estimator (§3.2) ------------------------------------------------------


class _Track:
    """One target key's estimator record; ``latency_ms`` None = never sampled.

    ``starts``: the start time of each attempt in flight, oldest first.
    """

    __slots__ = ("latency_ms", "starts", "t0")

    def __init__(self) -> None:
        self.latency_ms: float | None = None
        self.t0 = 0.0
        self.starts: list[float] = []


class LatencyEstimator:
    """Per-node peak-EWMA latency and in-flight counts, keyed by target key.

    One small record per target key ever seen (configured keys only, so the map is
    bounded by the configuration).  Concurrency: no lock.  Every method runs to
    completion without awaiting, so on one asyncio event loop each call is atomic
    with respect to other coroutines; it is *not* meant to be written from several
    threads.  Times are seconds (any monotonic clock, the same for every call);
    samples are milliseconds.
    """

    __slots__ = ("_tracks",)

    def __init__(self) -> None:
        self._tracks: dict[str, _Track] = {}

    def _track(self, key: str) -> _Track:
        track = self._tracks.get(key)
        if track is None:
            track = self._tracks[key] = _Track()
        return track

    def forget(self, provider: str, connection: str) -> None:
        """Drop the estimates of one connection's targets (``provider/…@connection``);
        in-flight counts stay, they track calls still running."""
        for key, track in self._tracks.items():
            if key.startswith(f"{provider}/") and key.endswith(f"@{connection}"):
                track.latency_ms = None
                track.t0 = 0.0

    def started(self, key: str, t: float) -> None:
        """An attempt on ``key`` started on this node at ``t``."""
        bisect.insort(self._track(key).starts, t)

    def finished(self, key: str, started_at: float | None = None) -> None:
        """An attempt on ``key`` ended (any outcome); the count never goes below 0.

        ``started_at`` (the attempt's start, as the caller knows it) removes the
        recorded start nearest to it; None removes the oldest.
        """
        track = self._tracks.get(key)
        if track is None or not track.starts:
            return
        starts = track.starts
        if started_at is None:
            del starts[0]
            return
        i = bisect.bisect_left(starts, started_at)
        if i == len(starts) or (
            i > 0 and started_at - starts[i - 1] <= starts[i] - started_at
        ):
            i -= 1
        del starts[i]

    def sample(self, key: str, x_ms: float, t: float) -> None:
        """Feed one sample of ``x_ms`` taken at ``t`` (§3.2 "Update").

        A first sample or a peak (``x ≥ L``) replaces ``L``; otherwise ``L`` decays
        towards ``x`` by ``w = exp(−(t − t0)/τ)``.  ``t0 = t`` in every case.  A
        sample older than the last one (out-of-order times) decays by ``w = 1`` and
        does not move ``t0`` back, so freshness never shrinks.
        """
        track = self._track(key)
        x = max(x_ms, 0.0)
        current = track.latency_ms
        if current is None or x >= current:
            track.latency_ms = x
        else:
            w = math.exp(-max(t - track.t0, 0.0) / TAU_S)
            track.latency_ms = current * w + x * (1.0 - w)
        track.t0 = max(track.t0, t) if current is not None else t

    def error_sample(self, key: str, duration_ms: float, t: float) -> None:
        """A failure that received an HTTP response: a sample of ``max(duration, L)``.

        Errors can raise ``L``, never lower it (a fast 502 must not make a target look
        fast).  ``L`` here is the stored value even when it is no longer fresh; with
        no ``L`` yet the sample is the duration.  Connection errors and timeouts are
        ordinary ``sample`` calls of their duration; a client cancellation feeds
        nothing.
        """
        current = self._tracks.get(key)
        known = current.latency_ms if current is not None else None
        self.sample(key, duration_ms if known is None else max(duration_ms, known), t)

    def estimate(self, key: str, now: float) -> float | None:
        """``L`` in ms, or None when never sampled or not sampled for more than 30 s."""
        track = self._tracks.get(key)
        if track is None or track.latency_ms is None or now - track.t0 > FRESH_S:
            return None
        return track.latency_ms

    def in_flight(self, key: str) -> int:
        """Attempts on ``key`` started and not yet finished on this node."""
        track = self._tracks.get(key)
        return 0 if track is None else len(track.starts)

    def sampled_within(self, key: str, now: float, seconds: float) -> bool:
        """Whether ``key`` had a sample in the last ``seconds`` before ``now``."""
        track = self._tracks.get(key)
        return (
            track is not None
            and track.latency_ms is not None
            and now - track.t0 <= seconds
        )

    def overdue(self, key: str, now: float) -> int:
        """Attempts on ``key`` in flight for longer than its estimate ``L`` at ``now``
        (§3.5 step 3, amended); with no fresh estimate, every attempt in flight."""
        track = self._tracks.get(key)
        if track is None or not track.starts:
            return 0
        known = self.estimate(key, now)
        if known is None:
            return len(track.starts)
        # starts are sorted: those before now − L have run longer than L
        return bisect.bisect_left(track.starts, now - known / 1000.0)


def pool_default(fresh: Iterable[float]) -> float:
    """``D``: the lower median of the eligible candidates' fresh estimates, else 1 s."""
    ordered = sorted(fresh)
    if not ordered:
        return DEFAULT_LATENCY_MS
    return ordered[(len(ordered) - 1) // 2]


# --- candidates and weights (§3.4) ------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class AdaptiveCandidate:
    """One eligible candidate as ``adaptive`` sees it.

    ``base_weight``: the configured weight, or its share for a target expanded over
    connections; None counts as 1; 0 marks a standby.  ``latency_ms``: the fresh
    estimate, None when unknown (``D`` is used).  ``price``: input + output cost in
    USD per 1M tokens, None when unpriced.  ``index``: declaration order.
    ``in_flight``: the ``n`` of the comparison, the attempts in flight on this node
    for longer than the estimate (``LatencyEstimator.overdue``, as ``observe`` reads
    it).
    """

    key: str
    index: int
    base_weight: float | None = None
    latency_ms: float | None = None
    price: float | None = None
    in_flight: int = 0
    #: sampled within the last τ (``observe``): the trickle passes it by (§3.5 step 5)
    recently_sampled: bool = False

    @property
    def base(self) -> float:
        """The base weight with None read as 1 (negative values read as standby)."""
        return 1.0 if self.base_weight is None else max(self.base_weight, 0.0)


def _latency(candidate: AdaptiveCandidate, default_latency: float) -> float:
    known = candidate.latency_ms
    return max(default_latency if known is None else known, LATENCY_FLOOR_MS)


def _prices(cands: Sequence[AdaptiveCandidate]) -> list[float] | None:
    """Each candidate's ``p_i``; None when no candidate has a known price."""
    known = [
        max(c.price, PRICE_FLOOR_USD_PER_MTOK) for c in cands if c.price is not None
    ]
    if not known:
        return None
    highest = max(known)  # an unpriced candidate is charged the pool's highest price
    return [
        highest if c.price is None else max(c.price, PRICE_FLOOR_USD_PER_MTOK)
        for c in cands
    ]


def price_factors(cands: Sequence[AdaptiveCandidate], objective: str) -> list[float]:
    """``(p_i / p_min)^k`` of each candidate (§3.5 step 3); 1 each for ``latency``
    or when no candidate has a known price."""
    exponent = OBJECTIVE_EXPONENTS.get(objective)
    if exponent is None:
        raise ValueError(f"unknown adaptive objective {objective!r}")
    prices = _prices(cands)
    if prices is None or exponent == 0:
        return [1.0] * len(cands)
    cheapest = min(prices)
    return [(price / cheapest) ** exponent for price in prices]


def weights(
    cands: Sequence[AdaptiveCandidate],
    *,
    objective: str,
    min_weight_fraction: float,
    warm_key: str | None,
    warm_weight: float,
    default_latency: float,
) -> list[float]:
    """The §3.4 weight of each candidate, in the order given.

    ``w_i = base_i × (L_min / L_i) × (p_min / p_i)^k`` with ``k`` from ``objective``
    (latency 0, balanced 1, cost 2); ``L_i`` is the estimate or ``default_latency``;
    the price factor is 1 when no candidate has a known price.  Then the candidate
    named ``warm_key`` (the caller passes it only when session affinity is off and
    the session was served within the warm-cache TTL) gets ``w ×= warm_weight``, and
    every non-standby weight is raised to ``min_weight_fraction × max_j w_j``.

    Standby candidates (base 0) stay at 0 while any candidate has a positive base.
    When *only* standby candidates are in the set, each is weighed as if configured
    with weight 1, so a pool of standbys behaves like a pool of weight-1 targets.
    """
    exponent = OBJECTIVE_EXPONENTS.get(objective)
    if exponent is None:
        raise ValueError(f"unknown adaptive objective {objective!r}")
    if not 0.0 <= min_weight_fraction <= MAX_MIN_WEIGHT_FRACTION:
        raise ValueError(f"min_weight_fraction {min_weight_fraction} is not in 0..0.5")
    if not cands:
        return []
    bases = [c.base for c in cands]
    if not any(b > 0 for b in bases):
        bases = [1.0] * len(cands)
    latencies = [_latency(c, default_latency) for c in cands]
    fastest = min(latencies)
    prices = _prices(cands)
    cheapest = min(prices) if prices is not None else 1.0
    raw = []
    for i, candidate in enumerate(cands):
        w = bases[i] * (fastest / latencies[i])
        if prices is not None:
            w *= (cheapest / prices[i]) ** exponent
        if warm_key is not None and candidate.key == warm_key:
            w *= warm_weight
        raw.append(w)
    floor = min_weight_fraction * max(raw)
    return [max(w, floor) if bases[i] > 0 else 0.0 for i, w in enumerate(raw)]


def first_draw_probabilities(weights: Sequence[float]) -> list[float]:
    """P(drawn as ``a``) of each candidate: ``w / Σw`` over the drawable weights."""
    drawable = _drawable(weights)
    total = sum(drawable)
    return [w / total for w in drawable] if total > 0 else []


# --- selection (§3.5) -------------------------------------------------------------


def _drawable(weights: Sequence[float]) -> list[float]:
    """Weights as drawn: non-positive ones never; all non-positive -> 1 each."""
    if any(w > 0 for w in weights):
        return [w if w > 0 else 0.0 for w in weights]
    return [1.0] * len(weights)


def _pick(weights: Sequence[float], u: float, skip: int | None) -> int:
    """The first index (skipping ``skip``) whose cumulative weight exceeds ``u × Σ``."""
    total = sum(w for i, w in enumerate(weights) if i != skip)
    target = u * total
    cumulative = 0.0
    last = -1
    for i, w in enumerate(weights):
        if i == skip or w <= 0:
            continue
        cumulative += w
        last = i
        if cumulative > target:
            return i
    return last  # u × Σ rounded up to Σ: the last drawable index


def draw_pair(weights: Sequence[float], rng: random.Random) -> tuple[int, int]:
    """Indices ``(a, b)`` of two distinct candidates drawn by weight (§3.5 step 2).

    Exactly two calls to ``rng.random()``: ``u1`` picks ``a`` as the first index, in
    the order given (declaration order), whose running sum of weights exceeds
    ``u1 × Σw``; ``u2`` picks ``b`` the same way over the list without ``a``
    (``u2 × Σ_{j≠a} w_j``).  Weights ≤ 0 are never drawn.  Needs at least two
    positive weights.
    """
    if sum(1 for w in weights if w > 0) < _PAIR:
        raise ValueError("a pair draw needs two candidates of positive weight")
    a = _pick(weights, rng.random(), None)
    b = _pick(weights, rng.random(), a)
    return a, b


def load(
    candidate: AdaptiveCandidate, default_latency: float, price_factor: float = 1.0
) -> float:
    """``L × (n + 1) × (p / p_min)^k``: the estimate (or ``D``) times the attempts it
    would queue, times its price relative to the cheapest (``price_factor``)."""
    queued = _latency(candidate, default_latency) * (max(candidate.in_flight, 0) + 1)
    return queued * price_factor


def better(
    a: AdaptiveCandidate,
    b: AdaptiveCandidate,
    *,
    weight_a: float,
    weight_b: float,
    default_latency: float,
    factor_a: float = 1.0,
    factor_b: float = 1.0,
) -> AdaptiveCandidate:
    """The winner of a drawn pair: lower load; ties to the higher weight, then ``a``."""
    load_a = load(a, default_latency, factor_a)
    load_b = load(b, default_latency, factor_b)
    if load_b < load_a or (load_b == load_a and weight_b > weight_a):
        return b
    return a


def select(
    cands: Sequence[AdaptiveCandidate],
    weights: Sequence[float],
    rng: random.Random,
    *,
    default_latency: float | None = None,
    objective: str = "latency",
    trickle_fraction: float = 0.0,
) -> tuple[AdaptiveCandidate, str]:
    """One candidate and its reason, ``"single"``, ``"p2c"`` or ``"trickle"`` (§3.5
    steps 1–3 and 5).

    With a single drawable candidate (one candidate, or one of positive weight
    beside standbys) it is chosen without touching ``rng``.  Otherwise
    ``draw_pair`` draws ``a`` and ``b``; with a positive ``trickle_fraction`` a
    third draw below it serves ``b`` outright (unless ``b`` was sampled within the
    last τ), else ``better`` compares the loads,
    priced by ``objective``.  ``default_latency`` is ``D`` for unknown estimates;
    None computes it from ``cands`` (the lower median of their known estimates).
    """
    if not 0.0 <= trickle_fraction <= MAX_TRICKLE_FRACTION:
        raise ValueError(f"trickle_fraction {trickle_fraction} is not in 0..0.2")
    if not cands or len(cands) != len(weights):
        raise ValueError("select needs one weight per candidate, and a candidate")
    drawable = _drawable(weights)
    positive = [i for i, w in enumerate(drawable) if w > 0]
    if len(positive) == 1:
        return cands[positive[0]], REASON_SINGLE
    if default_latency is None:
        default_latency = _default_of(cands)
    a, b = draw_pair(drawable, rng)
    if (
        trickle_fraction > 0
        and rng.random() < trickle_fraction
        and not cands[b].recently_sampled
    ):
        return cands[b], REASON_TRICKLE
    factors = price_factors(cands, objective)
    winner = better(
        cands[a],
        cands[b],
        weight_a=drawable[a],
        weight_b=drawable[b],
        default_latency=default_latency,
        factor_a=factors[a],
        factor_b=factors[b],
    )
    return winner, REASON_P2C


def all_cooling_choice(
    cands_with_cooling_end: Sequence[tuple[AdaptiveCandidate, float]],
) -> AdaptiveCandidate:
    """When every eligible candidate is cooling: the one whose cooling ends soonest.

    Ties go to the higher configured weight (None counts 1), then declaration order.
    The caller counts ``omniroute_routing_all_cooling_total`` and, on an OPEN
    breaker, makes this call the half-open probe (§3.1).
    """
    if not cands_with_cooling_end:
        raise ValueError("no cooling candidate to choose from")
    chosen, _ = min(
        cands_with_cooling_end,
        key=lambda pair: (pair[1], -pair[0].base, pair[0].index),
    )
    return chosen


# --- one pick, and the whole order ------------------------------------------------


def _default_of(cands: Sequence[AdaptiveCandidate]) -> float:
    return pool_default(c.latency_ms for c in cands if c.latency_ms is not None)


def observe(
    cands: Iterable[AdaptiveCandidate], estimator: LatencyEstimator, now: float
) -> list[AdaptiveCandidate]:
    """The candidates with ``latency_ms`` and ``in_flight`` read from ``estimator``:
    ``in_flight`` is the attempts running past the estimate (``overdue``, §3.5 step 3
    amended), the ones that show a target falling behind before its samples do."""
    return [
        replace(
            c,
            latency_ms=estimator.estimate(c.key, now),
            in_flight=estimator.overdue(c.key, now),
            recently_sampled=estimator.sampled_within(c.key, now, TAU_S),
        )
        for c in cands
    ]


def choose(
    cands: Sequence[AdaptiveCandidate],
    *,
    objective: str,
    min_weight_fraction: float,
    warm_key: str | None,
    warm_weight: float,
    rng: random.Random,
    trickle_fraction: float = 0.0,
) -> tuple[AdaptiveCandidate, str]:
    """One pick over the eligible, non-cooling ``cands``: ``D``, weights, ``select``.

    ``D`` is recomputed over ``cands`` each time, since after a failure the pool of
    eligible candidates (and so its median) is smaller.
    """
    default_latency = _default_of(cands)
    computed = weights(
        cands,
        objective=objective,
        min_weight_fraction=min_weight_fraction,
        warm_key=warm_key,
        warm_weight=warm_weight,
        default_latency=default_latency,
    )
    return select(
        cands,
        computed,
        rng,
        default_latency=default_latency,
        objective=objective,
        trickle_fraction=trickle_fraction,
    )


def plan_order(  # noqa: PLR0913
    cands: Sequence[AdaptiveCandidate],
    *,
    estimator: LatencyEstimator | None,
    now: float,
    objective: str,
    min_weight_fraction: float,
    warm_key: str | None,
    warm_weight: float,
    rng: random.Random,
    trickle_fraction: float = 0.0,
) -> list[tuple[AdaptiveCandidate, str]]:
    """A full attempt order: ``choose`` repeated over the candidates not yet picked.

    The first pick's reason is ``"single"``, ``"p2c"`` or ``"trickle"``, every later
    one ``"failover"`` (drawn without the trickle: it is for a first pick).
    Estimates and in-flight counts come from ``estimator`` at ``now`` (None: the
    candidates' own fields).  This equals calling ``choose`` lazily after each
    failure, with the same ``rng``, as long as nothing is observed between the
    picks; in the gateway the failed attempt's sample does land in between, which
    is why it picks lazily and this order serves explain-route and tests.
    """
    remaining = observe(cands, estimator, now) if estimator is not None else [*cands]
    order: list[tuple[AdaptiveCandidate, str]] = []
    while remaining:
        chosen, reason = choose(
            remaining,
            objective=objective,
            min_weight_fraction=min_weight_fraction,
            warm_key=warm_key,
            warm_weight=warm_weight,
            rng=rng,
            trickle_fraction=trickle_fraction if not order else 0.0,
        )
        order.append((chosen, reason if not order else REASON_FAILOVER))
        remaining = [c for c in remaining if c is not chosen]
    return order
