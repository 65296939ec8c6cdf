"""Bandit exploration and the attempt order (spec 04 §4 step 7, §7).

``explore(eligible, primary, rate, rng, whole_list=...)``:

1. The RNG is consulted only when ``rate > 0`` and there are at least 2 eligible
   candidates; otherwise the primary stands and no draw is made.
2. ``u1 = rng.random()``; explore if and only if ``u1 < rate``.
3. If exploring, ``u2 = rng.random()`` picks ``alternatives[floor(u2·len)]``, the
   alternatives being the eligible list in rank order without the primary, or the
   whole list (``whole_list``, the ``score`` strategy).  Amended (issue #17): under
   cost-first weights (``cost_first``: ``costInv`` is the largest weight, as in the
   cost-saver pack) ``u2`` draws by weight ``(cost_min / cost_i)²`` instead, the
   first alternative in rank order whose running sum exceeds ``u2 × Σ``: a cost-first
   route explores an alternative at twice the price a quarter as often.

Whether exploration applies at all (incident mode, an LKGP hit, Nadir, chaos, a
custom strategy, the ``cheapest`` budget fallback) is the caller's decision: it calls
``explore`` only when it does.  Candidates are told apart by key.

``attempt_order(eligible, first, max_attempts)``: ``first``, then the rest of the
eligible list in rank order, cut to ``max_attempts`` (at least one attempt).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Protocol

from gateway.auto.engine.types import Scored

COST_FLOOR = 0.01  # USD per 1M tokens, as adaptive's price floor (05 §3.4)


class RandomSource(Protocol):
    """What exploration needs from ``random.Random``: a draw in [0, 1)."""

    def random(self) -> float: ...


def explore(
    eligible: Sequence[Scored],
    primary: Scored,
    rate: float,
    rng: RandomSource,
    *,
    whole_list: bool,
    cost_first: bool = False,
) -> tuple[Scored, bool]:
    """The candidate to serve first, and whether this request explored (§7).

    ``explored`` is True whenever ``u1 < rate``, even if the ``whole_list`` draw
    lands on the primary itself.
    """
    if not rate > 0 or len(eligible) < 2:  # noqa: PLR2004 - §7: "at least 2"
        return primary, False
    if not rng.random() < rate:
        return primary, False
    alternatives = (
        list(eligible)
        if whole_list
        else [scored for scored in eligible if scored.key != primary.key]
    )
    if not alternatives:
        return primary, False
    u2 = rng.random()
    if cost_first:
        return _by_price(alternatives, u2), True
    index = min(int(u2 * len(alternatives)), len(alternatives) - 1)
    return alternatives[index], True


def is_cost_first(weights: Mapping[str, float]) -> bool:
    """``costInv`` is the largest weight (ties count): the cost-saver pack, or a
    config that puts price first."""
    cost = weights.get("costInv", 0.0)
    return cost > 0 and all(cost >= w for w in weights.values())


def _by_price(alternatives: Sequence[Scored], u: float) -> Scored:
    """The alternative drawn by ``(cost_min / cost_i)²`` (rank order, cumulative)."""
    floor = min(max(s.cost, COST_FLOOR) for s in alternatives)
    shares = [(floor / max(s.cost, COST_FLOOR)) ** 2 for s in alternatives]
    target = u * sum(shares)
    running = 0.0
    for scored, share in zip(alternatives, shares, strict=True):
        running += share
        if running > target:
            return scored
    return alternatives[-1]


def attempt_order(
    eligible: Sequence[Scored], first: Scored, max_attempts: int
) -> list[Scored]:
    """``first``, then the other eligible candidates in rank order, cut to
    ``max_attempts`` (never below one)."""
    rest = [scored for scored in eligible if scored.key != first.key]
    return [first, *rest][: max(1, max_attempts)]
