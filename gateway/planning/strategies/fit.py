"""cost-, context- and cache-optimized: fit the target to the request (spec 03 §5.9,
§5.10, §5.15).

* ``cost-optimized``: expected cost ``(input_cost·R_in + output_cost·E_out) / 1e6``
  (catalog prices are USD per million tokens), ``E_out`` = the request's
  ``max_completion_tokens``/``max_tokens`` or 256; ascending.  A target without both
  prices, and every combo-ref, comes after all priced targets in declared order.
* ``context-optimized``: best fit, not biggest, for the need ``R = R_in + max_out``:
  known windows ``W ≥ 1.25·R`` by W ascending (small, cheap models first), then
  ``R ≤ W < 1.25·R`` by W descending, then unknown windows in declared order.  A
  window below R never survives the filters; were one to reach here it goes last.
* ``cache-optimized``: rendezvous hashing on the cache key K, so one conversation
  keeps the connection holding its prompt cache, and adding or removing a
  connection moves only the conversations that hashed to it.  No K: declared order.
"""

from __future__ import annotations

from gateway.kernel.rendezvous import rendezvous_score
from gateway.planning.strategies.base import Candidate, Ordering, OrderInput
from gateway.planning.strategies.inputs import sort_known_first
from gateway.planning.strategies.traits import Traits

DEFAULT_EXPECTED_OUTPUT_TOKENS = 256  # spec 03 §5.9
TOKENS_PER_PRICE_UNIT = 1_000_000  # catalog prices are per million tokens
#: W/R at or above which a window is "comfortable" (spec 03 §5.10), as 5/4
COMFORT_NUMERATOR, COMFORT_DENOMINATOR = 5, 4


def expected_cost_usd(
    candidate: Candidate, r_in: int, max_out: int | None
) -> float | None:
    """The request's expected cost on ``candidate``; None when a price is unknown."""
    model = candidate.model
    if candidate.is_ref or model is None:
        return None
    if model.input_cost is None or model.output_cost is None:
        return None
    expected_out = max_out or DEFAULT_EXPECTED_OUTPUT_TOKENS
    return (
        model.input_cost * r_in + model.output_cost * expected_out
    ) / TOKENS_PER_PRICE_UNIT


class CostOptimized:
    name = "cost-optimized"
    traits = Traits(
        summary="the cheapest target for this request's tokens",
    )

    def order(self, given: OrderInput) -> Ordering:
        return Ordering(
            order=sort_known_first(
                given.survivors,
                lambda c: expected_cost_usd(c, given.r_in, given.max_out),
            )
        )


def _window(candidate: Candidate) -> int | None:
    if candidate.is_ref or candidate.model is None:
        return None
    return candidate.model.context_window


class ContextOptimized:
    name = "context-optimized"
    traits = Traits(
        summary="the smallest context window that fits the request",
        aliases=("context",),
    )

    def order(self, given: OrderInput) -> Ordering:
        need = given.r_in + (given.max_out or 0)
        roomy: list[tuple[int, Candidate]] = []
        snug: list[tuple[int, Candidate]] = []
        short: list[tuple[int, Candidate]] = []
        unknown: list[Candidate] = []
        for candidate in given.survivors:
            window = _window(candidate)
            if window is None:
                unknown.append(candidate)
            elif window * COMFORT_DENOMINATOR >= need * COMFORT_NUMERATOR:
                roomy.append((window, candidate))
            elif window >= need:
                snug.append((-window, candidate))
            else:
                short.append((-window, candidate))
        bands = (sorted(band, key=lambda pair: pair[0]) for band in (roomy, snug))
        fitted = [candidate for band in bands for _, candidate in band]
        too_small = [c for _, c in sorted(short, key=lambda pair: pair[0])]
        return Ordering(order=(*fitted, *unknown, *too_small))


class CacheOptimized:
    name = "cache-optimized"
    traits = Traits(
        summary="keep a conversation on one target so its prompt cache stays warm",
        expands=True,
    )

    def order(self, given: OrderInput) -> Ordering:
        cache_key = given.cache_key
        if cache_key is None:
            return Ordering(order=given.survivors)
        ranked = sorted(
            given.survivors,
            key=lambda c: (-rendezvous_score(cache_key, c.key), c.key),
        )
        return Ordering(order=tuple(ranked))
