"""lkgp and context-relay: put first what served before (spec 03 §5.16, §5.17).

* ``lkgp``: its state is ``{"session": key | None, "combo": key | None}``, the
  ``lkgp:<combo>:<S>`` and ``lkgp:<combo>`` records of §8.6 (written after every
  served call by the caller, for every strategy); the session record wins.  The first
  survivor with the record's model and connection goes first, else the first with
  its model, else the first with its provider; the rest keep declared order.
* ``context-relay``: with a session key S its state is the holder's key
  (``relay:<combo>:<S>``); the holder goes first when it survives, the rest keep
  declared order, and a success makes the served target the holder.  No S ->
  declared order.  The handoff summary of §5.17 runs elsewhere; this is ordering only.

A record holds the served key, which may name a connection (``pa/m1@main``) while
the survivor is the unpinned target (``pa/m1@*``): an unpinned survivor of the
record's model counts as holding it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from gateway.planning.strategies.base import Candidate, Ordering, OrderInput
from gateway.planning.strategies.inputs import (
    candidate_parts,
    first_then,
    str_or_none,
    target_parts,
)
from gateway.planning.strategies.traits import Traits, integer, number


def _lkgp_record(state: Any) -> str | None:
    if isinstance(state, dict):
        return str_or_none(state.get("session")) or str_or_none(state.get("combo"))
    return str_or_none(state)


def _match_levels(record: str) -> tuple[Callable[[Candidate], bool], ...]:
    """Tests from best to weakest: same model and connection, same model, provider."""
    provider, model, connection = target_parts(record)

    def same_target(candidate: Candidate) -> bool:
        parts = candidate_parts(candidate)
        return candidate.key == record or (
            model is not None
            and connection is not None
            and parts[1:] == (model, connection)
        )

    def same_model(candidate: Candidate) -> bool:
        return model is not None and candidate_parts(candidate)[1] == model

    def same_provider(candidate: Candidate) -> bool:
        return provider is not None and candidate_parts(candidate)[0] == provider

    return same_target, same_model, same_provider


def last_good_first(
    survivors: tuple[Candidate, ...], record: str | None
) -> tuple[Candidate, ...]:
    """Survivors with the best match for ``record`` first, the rest declared."""
    if record is None:
        return survivors
    for matches in _match_levels(record):
        hit = next((c for c in survivors if matches(c)), None)
        if hit is not None:
            return first_then(hit, survivors)
    return survivors


class LastKnownGood:
    name = "lkgp"
    traits = Traits(
        summary="the last target that answered well (per session, else per combo)",
        reads_last_good=True,
    )

    def order(self, given: OrderInput) -> Ordering:
        return Ordering(
            order=last_good_first(given.survivors, _lkgp_record(given.state))
        )


def holds(candidate: Candidate, holder: str) -> bool:
    """``candidate`` is the holder, or the unpinned target of the holder's model."""
    if candidate.key == holder:
        return True
    _, model, connection = target_parts(holder)
    _, own_model, own_connection = candidate_parts(candidate)
    return (
        model is not None
        and own_model == model
        and own_connection in (None, connection)
    )


def _make_holder(_state: Any, served: str) -> str:
    return served


class ContextRelay:
    name = "context-relay"
    traits = Traits(
        summary="keep a session on one target; hand its context over on failover",
        record="relay",
        session_record=True,
        relays=True,
        config=(
            number(
                "handoffThreshold", 0, 0.95, exclusive_low=True, exclusive_high=True
            ),
            integer("maxMessagesForSummary", 5, 100),
        ),
    )

    def order(self, given: OrderInput) -> Ordering:
        if given.session_key is None or not given.survivors:
            return Ordering(order=given.survivors)
        holder = str_or_none(given.state)
        held = None
        if holder is not None:
            held = next((c for c in given.survivors if holds(c, holder)), None)
        order = given.survivors if held is None else first_then(held, given.survivors)
        return Ordering(order=order, on_success=_make_holder)
