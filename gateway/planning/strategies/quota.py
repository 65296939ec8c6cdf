"""reset-aware, reset-window and headroom: spend quota where it is cheapest to lose
(spec 03 §5.11-§5.13).  All three order connections (targets are expanded first)
from the quota snapshot of §8.5; a combo-ref's quota is unknown.

* ``reset-aware``: remaining ``r`` (unknown 0.5) and urgency
  ``u = clamp01(1 − (resets_at − now) / window)`` (unknown 0.5, reset already passed
  1) give ``r · (0.5 + 0.5·u)``: quota that resets soon anyway is used first.  Sorted
  descending, exhausted last (declared among them).
* ``reset-window``: ``resets_at`` ascending; unknown or exhausted last, declared.
* Tie band (both): the leading targets within ``tieBand`` of the best score, or within
  ``resetWindowTieBandMs`` of the earliest reset, share the load.  The per-combo
  counter c (state: an int, written as c + 1 before dispatch, one step per request)
  puts band member ``c mod |band|`` first, the band's others next in rank order.
* ``headroom``: remaining descending (unknown 0.5, exhausted 0); no state.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from gateway.planning.strategies.base import Candidate, Ordering, OrderInput
from gateway.planning.strategies.inputs import (
    NOTHING,
    SCORE_EPSILON,
    is_exhausted,
    option_number,
    remaining,
    resets_at,
)
from gateway.planning.strategies.traits import Traits, integer, number

UNKNOWN_REMAINING = 0.5  # spec 03 §5.11, §5.13
UNKNOWN_URGENCY = 0.5  # spec 03 §5.11
RESET_AWARE_TIE_BAND = 0.05  # spec 03 §2.2 `tieBand`
RESET_WINDOW_TIE_BAND_MS = 60_000  # spec 03 §2.2 `resetWindowTieBandMs`


def urgency(candidate: Candidate, now: float) -> float:
    """How soon the quota resets, as a share of its window (1 = resetting now)."""
    at = resets_at(candidate)
    if at is None:
        return UNKNOWN_URGENCY
    if at <= now:
        return 1.0
    window = candidate.quota.window_s
    if window is None or window <= 0:
        return UNKNOWN_URGENCY
    return min(max(1 - (at - now) / window, 0.0), 1.0)


def reset_score(candidate: Candidate, now: float) -> float:
    """``r · (0.5 + 0.5·u)``: .9 left with 1 h of a 5 h window to go -> .81."""
    left = remaining(candidate)
    share = UNKNOWN_REMAINING if left is None else left
    return share * (0.5 + 0.5 * urgency(candidate, now))


def _counter(state: Any) -> int:
    if isinstance(state, int) and not isinstance(state, bool) and state >= 0:
        return state
    return 0


def _rotate_band(
    ranked: Sequence[Candidate], band_size: int, counter: int
) -> tuple[Candidate, ...]:
    """Band member ``counter mod band_size`` first, then the rest in rank order."""
    if band_size <= 1:
        return tuple(ranked)
    lead = ranked[counter % band_size]
    return (lead, *(c for c in ranked if c is not lead))


class ResetAware:
    name = "reset-aware"
    traits = Traits(
        summary="spend quota that resets soon first",
        expands=True,
        record="tie",
        config=(number("tieBand", 0, 0.5),),
    )

    def order(self, given: OrderInput) -> Ordering:
        if not given.survivors:
            return NOTHING
        tie_band = option_number(given, "tieBand", RESET_AWARE_TIE_BAND)
        scored = [
            (reset_score(c, given.now), c)
            for c in given.survivors
            if not is_exhausted(c)
        ]
        scored.sort(key=lambda pair: -pair[0])
        best = scored[0][0] if scored else 0.0
        band_size = sum(1 for s, _ in scored if best - s <= tie_band + SCORE_EPSILON)
        counter = _counter(given.state)
        ranked = _rotate_band([c for _, c in scored], band_size, counter)
        spent = [c for c in given.survivors if is_exhausted(c)]
        return Ordering(order=(*ranked, *spent), state_before=counter + 1)


class ResetWindow:
    name = "reset-window"
    traits = Traits(
        summary="the target whose quota window resets earliest",
        expands=True,
        record="tie",
        config=(integer("resetWindowTieBandMs", 0, 3_600_000),),
    )

    def order(self, given: OrderInput) -> Ordering:
        if not given.survivors:
            return NOTHING
        band_seconds = (
            option_number(given, "resetWindowTieBandMs", RESET_WINDOW_TIE_BAND_MS)
            / 1000
        )
        timed: list[tuple[float, Candidate]] = []
        untimed: list[Candidate] = []
        for candidate in given.survivors:
            at = resets_at(candidate)
            if at is None or is_exhausted(candidate):
                untimed.append(candidate)
            else:
                timed.append((at, candidate))
        timed.sort(key=lambda pair: pair[0])
        earliest = timed[0][0] if timed else 0.0
        band_size = sum(1 for at, _ in timed if at - earliest <= band_seconds)
        counter = _counter(given.state)
        ranked = _rotate_band([c for _, c in timed], band_size, counter)
        return Ordering(order=(*ranked, *untimed), state_before=counter + 1)


def headroom(candidate: Candidate) -> float:
    if is_exhausted(candidate):
        return 0.0
    left = remaining(candidate)
    return UNKNOWN_REMAINING if left is None else left


class Headroom:
    name = "headroom"
    traits = Traits(summary="the target with the most quota left", expands=True)

    def order(self, given: OrderInput) -> Ordering:
        return Ordering(
            order=tuple(sorted(given.survivors, key=lambda c: -headroom(c)))
        )
