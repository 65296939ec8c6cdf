"""weighted and quota-weighted: a proportional draw (spec 03 §5.3, §5.14).

``weighted_pick`` is the one draw: ``r = U[0,1)·Σw`` and the first index whose running
sum exceeds ``r``; so a zero weight is never drawn while any weight is positive, and
``Σw = 0`` falls back to a uniform pick.  The fallback order is weight descending
(stable, ties declared), and the drawn primary is never repeated in it.

* ``weighted`` uses the configured weights (absent = 0).  With ``stickyWeightedLimit``
  L > 1 its state ``{"key": str | None, "count": int}`` pins the last successful
  target: a pin that survives the filters with ``count < L`` is primary without a
  draw.  A success by the pin counts +1, by another target T re-pins T with count 1;
  reaching L clears the pin, so the next request draws again.  A pin that is
  filtered out is cleared before dispatch.  There is no failure hook: a failed pin is
  replaced by whichever fallback succeeds.
* ``quota-weighted`` (per connection) weighs ``max(r, 0.01) / (1 + in_flight)`` with
  unknown ``r`` = 0.5; exhausted connections go last, declared among them.  With a
  session key S its state is the session's pin (the served key): a pin naming a
  surviving, non-exhausted target is primary, and every success rewrites it.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from functools import partial
from typing import Any

from gateway.planning.strategies.base import Candidate, Ordering, OrderInput
from gateway.planning.strategies.inputs import (
    NOTHING,
    find,
    first_then,
    is_exhausted,
    option_number,
    remaining,
    str_or_none,
)
from gateway.planning.strategies.traits import Traits, integer

STICKY_WEIGHTED_LIMIT = 1  # spec 03 §2.2: 1 = no stickiness
QUOTA_FLOOR = 0.01  # spec 03 §5.14: an almost-empty connection keeps a small chance
UNKNOWN_REMAINING = 0.5  # spec 03 §5.14
#: the weighted record once the pin is cleared (never None: None means "no write")
NO_PIN: dict[str, Any] = {"key": None, "count": 0}


def weighted_pick(weights: Sequence[float], rng: random.Random) -> int:
    """An index drawn in proportion to ``weights`` (negatives count as 0).

    All zero -> uniform.  A zero weight is never drawn while any weight is positive.
    """
    if len(weights) == 1:
        return 0
    clipped = [max(weight, 0.0) for weight in weights]
    total = sum(clipped)
    if total <= 0:
        return rng.randrange(len(clipped))
    point = rng.random() * total
    running = 0.0
    for index, weight in enumerate(clipped):
        running += weight
        if running > point:
            return index
    # Float rounding can leave ``point`` a hair above the final running sum.
    return max(index for index, weight in enumerate(clipped) if weight > 0)


def _weight(candidate: Candidate) -> float:
    return max(candidate.weight or 0.0, 0.0)


def _read_pin(state: Any) -> tuple[str, int] | None:
    if not isinstance(state, dict):
        return None
    key, count = state.get("key"), state.get("count")
    if (
        not isinstance(key, str)
        or isinstance(count, bool)
        or not isinstance(count, int)
    ):
        return None
    return key, count


def _count_success(limit: int, state: Any, served: str) -> dict[str, Any]:
    pin = _read_pin(state)
    count = pin[1] + 1 if pin is not None and pin[0] == served else 1
    if count >= limit:
        return dict(NO_PIN)
    return {"key": served, "count": count}


def _clear_failed_pin(state: Any, failed: str) -> Any:
    """Spec 03 §5.3: a failed pin is cleared (any other failure changes nothing)."""
    pin = _read_pin(state)
    return dict(NO_PIN) if pin is not None and pin[0] == failed else state


class Weighted:
    name = "weighted"
    traits = Traits(
        summary="spread requests in proportion to each target's weight",
        pin_capable=True,
        record="wsticky",
        config=(integer("stickyWeightedLimit", 1, 1000),),
    )

    def order(self, given: OrderInput) -> Ordering:
        survivors = given.survivors
        if not survivors:
            return NOTHING
        by_weight = sorted(survivors, key=lambda c: -_weight(c))
        limit = int(option_number(given, "stickyWeightedLimit", STICKY_WEIGHTED_LIMIT))
        if limit <= 1:
            drawn = survivors[weighted_pick([_weight(c) for c in survivors], given.rng)]
            return Ordering(order=first_then(drawn, by_weight))

        pin = _read_pin(given.state)
        pinned = find(survivors, pin[0]) if pin is not None and pin[1] < limit else None
        state_before = None
        if pinned is None:
            if pin is not None:
                state_before = dict(NO_PIN)  # filtered (or spent): cleared
            pinned = survivors[
                weighted_pick([_weight(c) for c in survivors], given.rng)
            ]
        return Ordering(
            order=first_then(pinned, by_weight),
            state_before=state_before,
            on_success=partial(_count_success, limit),
            on_failure=_clear_failed_pin,
        )


def quota_weight(candidate: Candidate) -> float:
    """``max(r, 0.01) / (1 + in_flight)``; a ref's load and quota are unknown."""
    left = remaining(candidate)
    share = max(UNKNOWN_REMAINING if left is None else left, QUOTA_FLOOR)
    in_flight = 0 if candidate.is_ref else max(candidate.stats.in_flight, 0)
    return share / (1 + in_flight)


def _pin_served(_state: Any, served: str) -> str:
    return served


class QuotaWeighted:
    name = "quota-weighted"
    traits = Traits(
        summary="spread requests in proportion to remaining quota",
        expands=True,
        reads_stats=True,
        record="qpin",
        session_record=True,
    )

    def order(self, given: OrderInput) -> Ordering:
        if not given.survivors:
            return NOTHING
        live = [c for c in given.survivors if not is_exhausted(c)]
        spent = [c for c in given.survivors if is_exhausted(c)]
        on_success = _pin_served if given.session_key is not None else None
        if not live:
            return Ordering(order=tuple(spent), on_success=on_success)

        pin = str_or_none(given.state) if given.session_key is not None else None
        primary = find(live, pin) if pin is not None else None
        if primary is None:
            primary = live[weighted_pick([quota_weight(c) for c in live], given.rng)]
        by_weight = sorted(live, key=lambda c: -quota_weight(c))
        return Ordering(
            order=(*first_then(primary, by_weight), *spent), on_success=on_success
        )
