"""Bandit exploration and the attempt order (spec 04 §4 step 7, §7).

``explore(eligible, primary, rate, rng, whole_list=...)``:

1. The RNG is consulted only when ``rate > 0`` and there are at least 2 eligible
   candidates; otherwise the primary stands and no draw is made.
2. ``u1 = rng.random()``; explore if and only if ``u1 < rate``.
3. If exploring, ``u2 = rng.random()`` picks ``alternatives[floor(u2·len)]``, the
   alternatives being the eligible list in rank order without the primary, or the
   whole list (``whole_list``, the ``score`` strategy).

Whether exploration applies at all (incident mode, an LKGP hit, Nadir, chaos, a
custom strategy, the ``cheapest`` budget fallback) is the caller's decision: it calls
``explore`` only when it does.  Candidates are told apart by key.

``attempt_order(eligible, first, max_attempts)``: ``first``, then the rest of the
eligible list in rank order, cut to ``max_attempts`` (at least one attempt).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from gateway.auto.engine.types import Scored


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
    index = min(int(rng.random() * len(alternatives)), len(alternatives) - 1)
    return alternatives[index], True


def attempt_order(
    eligible: Sequence[Scored], first: Scored, max_attempts: int
) -> list[Scored]:
    """``first``, then the other eligible candidates in rank order, cut to
    ``max_attempts`` (never below one)."""
    rest = [scored for scored in eligible if scored.key != first.key]
    return [first, *rest][: max(1, max_attempts)]
