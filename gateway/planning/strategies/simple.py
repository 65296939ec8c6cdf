"""priority, fill-first, random and strict-random (spec 03 §5.1, §5.2, §5.5, §5.6).

* ``priority``: declared order, always; no cache or session reordering.
* ``fill-first``: declared order, but targets whose quota is exhausted or at/below
  ``fillFirstReservePercent`` go last (declared among them), so each account is used
  up without a failed call to notice it.
* ``random``: a Fisher–Yates shuffle with the injected RNG.
* ``strict-random``: a deck, i.e. a shuffled permutation of the configured keys kept
  in state ``{"keys": [configured keys], "deck": [cards left], "last": key | None}``.
  A request takes (and removes) the first card that survives the filters; the cards
  before it stay.  With no surviving card left a new deck is shuffled whose first
  card differs from the last one taken (n ≥ 2), so no target is primary twice in a
  row across a reshuffle.  A changed key set discards the deck.  The other survivors
  follow in random order.  The new deck is written before dispatch.
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from typing import Any

from gateway.planning.strategies.base import Candidate, Ordering, OrderInput
from gateway.planning.strategies.inputs import (
    NOTHING,
    is_exhausted,
    remaining,
    str_or_none,
)
from gateway.planning.strategies.traits import Traits, number

FILL_FIRST_RESERVE_PERCENT = 0.0  # spec 03 §2.2


class Priority:
    name = "priority"
    traits = Traits(
        summary="failover: the first target in order, the next one when it fails",
        aliases=("failover",),
    )

    def order(self, given: OrderInput) -> Ordering:
        return Ordering(order=given.survivors)


def fill_first_reserve(config: Mapping[str, Any]) -> float:
    """``fillFirstReservePercent`` as a share (0..0.5), default 0."""
    value = config.get("fillFirstReservePercent")
    if isinstance(value, bool) or not isinstance(value, int | float):
        return FILL_FIRST_RESERVE_PERCENT / 100
    return float(value) / 100


def is_drained(candidate: Candidate, reserve: float) -> bool:
    """fill-first's "use it last" test: exhausted, or ``remaining ≤ reserve`` (0..1)."""
    left = remaining(candidate)
    return is_exhausted(candidate) or (left is not None and left <= reserve)


class FillFirst:
    name = "fill-first"
    traits = Traits(
        summary="use the first target until its quota runs low, then the next",
        fills_first=True,
        config=(number("fillFirstReservePercent", 0, 50),),
    )

    def order(self, given: OrderInput) -> Ordering:
        reserve = fill_first_reserve(given.config)
        drained = [c for c in given.survivors if is_drained(c, reserve)]
        fresh = [c for c in given.survivors if not is_drained(c, reserve)]
        return Ordering(order=(*fresh, *drained))


class Random:
    name = "random"
    traits = Traits(summary="a random target each request", pin_capable=True)

    def order(self, given: OrderInput) -> Ordering:
        shuffled = list(given.survivors)
        given.rng.shuffle(shuffled)  # Fisher–Yates
        return Ordering(order=tuple(shuffled))


def _card_of(candidate: Candidate, configured: Sequence[str], cards: set[str]) -> str:
    """The deck card a survivor stands for: its key, or its configured target's key
    when it is one connection of an expanded target."""
    if candidate.key in cards:
        return candidate.key
    if 0 <= candidate.index < len(configured):
        return configured[candidate.index]
    return candidate.key


def _read_deck(state: Any, keys: list[str]) -> tuple[list[str], str | None]:
    """``(cards left, last card taken)``; a deck over another key set is discarded."""
    if not isinstance(state, dict):
        return [], None
    last = str_or_none(state.get("last"))
    stored_keys, deck = state.get("keys"), state.get("deck")
    if (
        not isinstance(stored_keys, list)
        or set(stored_keys) != set(keys)
        or not isinstance(deck, list)
        or not all(isinstance(card, str) and card in keys for card in deck)
    ):
        return [], last
    return list(dict.fromkeys(deck)), last


def new_deck(keys: Sequence[str], last: str | None, rng: random.Random) -> list[str]:
    """A shuffled deck whose first card is not ``last`` (when there are ≥ 2 cards)."""
    deck = list(keys)
    rng.shuffle(deck)
    if len(deck) > 1 and deck[0] == last:
        other = rng.randrange(1, len(deck))
        deck[0], deck[other] = deck[other], deck[0]
    return deck


class StrictRandom:
    name = "strict-random"
    traits = Traits(
        summary="a shuffled deck: every target once per round, in random order",
        pin_capable=True,
        record="deck",
    )

    def order(self, given: OrderInput) -> Ordering:
        if not given.survivors:
            return NOTHING
        keys = list(dict.fromkeys(given.configured))
        deck, last = _read_deck(given.state, keys)
        cards = set(keys)
        by_card: dict[str, Candidate] = {}
        for candidate in given.survivors:
            by_card.setdefault(_card_of(candidate, given.configured, cards), candidate)

        taken = next((card for card in deck if card in by_card), None)
        if taken is None:
            deck = new_deck(keys, last, given.rng)
            taken = next((card for card in deck if card in by_card), None)
        primary = None
        if taken is not None:
            deck.remove(taken)
            primary = by_card[taken]

        rest = [c for c in given.survivors if c is not primary]
        given.rng.shuffle(rest)
        order = tuple(rest) if primary is None else (primary, *rest)
        record = {"keys": keys, "deck": deck, "last": taken or last}
        return Ordering(order=order, state_before=record)
