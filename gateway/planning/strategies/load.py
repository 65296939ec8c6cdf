"""p2c and least-used: ordering by observed load and health (spec 03 §5.7, §5.8).

Both read the target stats of the last 10 minutes (§8.7); a combo-ref has none of
its own, so its stats are unknown.

* ``p2c``: with ≥ 2 survivors draw two distinct ones uniformly; the second wins only
  with a strictly higher ``p2c_score``.  Winner first, the rest in declared order.
* ``least-used``: in-flight calls ascending, then calls started ascending, then
  declared order; refs (unknown load) after every target with known load.
"""

from __future__ import annotations

import math

from gateway.planning.strategies.base import Candidate, Ordering, OrderInput
from gateway.planning.strategies.inputs import NOTHING, first_then
from gateway.planning.strategies.traits import Traits

P2C_MIN_OUTCOMES = 5  # spec 03 §5.7: fewer outcomes than this -> neutral success rate
P2C_NEUTRAL_SUCCESS_RATE = 0.5
P2C_NO_LATENCY_SCORE = 0.25  # no success in the window, so no latency sample
P2C_LATENCY_OFFSET_MS = 10.0  # keeps log10 positive for sub-millisecond latencies
P2C_HALF_OPEN_PENALTY = 0.25


def p2c_score(candidate: Candidate) -> float:
    """Success rate + ``1 / log10(avg_latency_ms + 10)`` − 0.25 if HALF_OPEN.

    90 % and 990 ms -> 1.2333; no data -> 0.75; no data and HALF_OPEN -> 0.5.
    """
    successes, failures, latency_sum = 0, 0, 0.0
    if not candidate.is_ref:
        stats = candidate.stats
        successes, failures = stats.successes, stats.failures
        latency_sum = stats.success_latency_ms_sum
    outcomes = successes + failures
    rate = successes / outcomes if outcomes >= P2C_MIN_OUTCOMES else None
    score = P2C_NEUTRAL_SUCCESS_RATE if rate is None else rate
    if successes > 0:
        average_ms = max(latency_sum / successes, 0.0)
        score += 1 / math.log10(average_ms + P2C_LATENCY_OFFSET_MS)
    else:
        score += P2C_NO_LATENCY_SCORE
    if candidate.half_open:
        score -= P2C_HALF_OPEN_PENALTY
    return score


class PowerOfTwoChoices:
    name = "p2c"
    traits = Traits(
        summary="draw two targets; the better success rate and latency wins",
        pin_capable=True,
        reads_stats=True,
    )

    def order(self, given: OrderInput) -> Ordering:
        survivors = given.survivors
        if len(survivors) <= 1:
            return Ordering(order=survivors)
        first, second = (
            survivors[i] for i in given.rng.sample(range(len(survivors)), 2)
        )
        winner = second if p2c_score(second) > p2c_score(first) else first
        return Ordering(order=first_then(winner, survivors))


class LeastUsed:
    name = "least-used"
    traits = Traits(
        summary="the target with the fewest requests in flight",
        pin_capable=True,
        reads_stats=True,
        aliases=("usage",),
    )

    def order(self, given: OrderInput) -> Ordering:
        if not given.survivors:
            return NOTHING
        known = [c for c in given.survivors if not c.is_ref]
        known.sort(key=lambda c: (c.stats.in_flight, c.stats.calls))
        refs = [c for c in given.survivors if c.is_ref]
        return Ordering(order=(*known, *refs))
