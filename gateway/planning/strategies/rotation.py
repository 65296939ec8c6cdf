"""round-robin: rotation over the configured list (spec 03 §5.4).

Positions are indices into the configured list, so they stay put while health
changes which targets survive.  The batch size L is ``stickyRoundRobinLimit``, else
the gateway's ``sticky_round_robin_limit``, else 3.  State:
``{"next": int, "sticky": {"key": str, "count": int} | None}``.

* L = 1: the request takes ``s = next`` and writes ``next = s + 1 (mod n)`` before
  dispatch, so concurrent requests spread.
* L > 1: start at the sticky target if it survives with ``count < L``, else at
  ``next``; nothing is written before dispatch.  A success at index k counts +1 if k
  is the sticky target, else makes k sticky with count 1; at L, ``next = k + 1`` and
  the sticky target is cleared.  With L = 3 over healthy A, B, C: A A A B B B C C C A.
* Order: from the start index forward, wrapping; filtered targets are simply absent.
"""

from __future__ import annotations

from functools import partial
from typing import Any

from gateway.planning.strategies.base import Candidate, Ordering, OrderInput
from gateway.planning.strategies.inputs import NOTHING, find
from gateway.planning.strategies.traits import Traits, integer

STICKY_ROUND_ROBIN_LIMIT = 3  # spec 03 §2.2 / §9 fallback when nothing is configured


def _limit(given: OrderInput) -> int:
    for value in (
        given.config.get("stickyRoundRobinLimit"),
        given.defaults.get("sticky_round_robin_limit"),
    ):
        if isinstance(value, int) and not isinstance(value, bool):
            return max(value, 1)
    return STICKY_ROUND_ROBIN_LIMIT


def _read(state: Any) -> tuple[int, tuple[str, int] | None]:
    """``(next, (sticky key, count) | None)``; a malformed record reads as fresh."""
    if not isinstance(state, dict):
        return 0, None
    start = state.get("next")
    start = start if isinstance(start, int) and not isinstance(start, bool) else 0
    sticky = state.get("sticky")
    if isinstance(sticky, dict):
        key, count = sticky.get("key"), sticky.get("count")
        if isinstance(key, str) and isinstance(count, int):
            return start, (key, count)
    return start, None


def _record(start: int, sticky: tuple[str, int] | None) -> dict[str, Any]:
    held = None if sticky is None else {"key": sticky[0], "count": sticky[1]}
    return {"next": start, "sticky": held}


def _rotate(
    survivors: tuple[Candidate, ...], start: int, n: int
) -> tuple[Candidate, ...]:
    return tuple(sorted(survivors, key=lambda c: (c.index - start) % n))


def _index_of(given: OrderInput, key: str) -> int | None:
    served = find(given.survivors, key)
    if served is not None:
        return served.index
    return given.configured.index(key) if key in given.configured else None


def _count_success(
    given: OrderInput, limit: int, n: int, state: Any, served: str
) -> Any:
    index = _index_of(given, served)
    if index is None:
        return state  # not one of this combo's targets: nothing to count
    start, sticky = _read(state)
    count = sticky[1] + 1 if sticky is not None and sticky[0] == served else 1
    if count >= limit:
        return _record((index + 1) % n, None)
    return _record(start, (served, count))


class RoundRobin:
    name = "round-robin"
    traits = Traits(
        summary="take turns through the targets, a few requests each",
        pin_capable=True,
        record="rr",
        rotates_expanded=True,
        config=(integer("stickyRoundRobinLimit", 1, 1000),),
    )

    def order(self, given: OrderInput) -> Ordering:
        if not given.survivors:
            return NOTHING
        n = max(len(given.configured), *(c.index + 1 for c in given.survivors))
        limit = _limit(given)
        start, sticky = _read(given.state)
        start %= n
        if limit == 1:
            return Ordering(
                order=_rotate(given.survivors, start, n),
                state_before=_record((start + 1) % n, None),
            )
        if sticky is not None and sticky[1] < limit:
            held = find(given.survivors, sticky[0])
            if held is not None:
                start = held.index
        return Ordering(
            order=_rotate(given.survivors, start, n),
            on_success=partial(_count_success, given, limit, n),
        )
