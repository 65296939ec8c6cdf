"""What strategies read off an ``OrderInput``: options, candidate facts, key parts.

Three rules hold for every reading here:

* a combo-ref (``combo:<name>``) has no quota, stats or catalog facts of its own, so
  every metric of a ref reads as *unknown* (spec 03 §4.4);
* an unknown value is ``None`` and each strategy states its stand-in (0.5 remaining,
  0.5 urgency, ...);
* a state record comes from a shared store and may be stale or from an older
  release, so readers accept only the exact shape they expect and treat anything
  else as "no record".
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any

from gateway.planning.strategies.base import Candidate, Ordering, OrderInput

#: Scores closer than this are the same score: tie bands compare sums of floats
#: (.81 - .76 is 0.05000000000000004), and an operator's 0.05 means "0.05 inclusive".
SCORE_EPSILON = 1e-9

#: The ordering of an empty pool: nothing to call, nothing to remember.
NOTHING = Ordering(order=())


def option_number(given: OrderInput, key: str, default: float) -> float:
    """A numeric combo ``config`` option (validated on save), else ``default``."""
    value = given.config.get(key)
    if isinstance(value, bool) or not isinstance(value, int | float):
        return default
    return float(value)


def remaining(candidate: Candidate) -> float | None:
    """The connection's remaining quota (0..1), None when unknown or a ref."""
    if candidate.is_ref:
        return None
    return candidate.quota.remaining


def is_exhausted(candidate: Candidate) -> bool:
    """Quota exhausted (spec 03 §8.5); a ref's quota is unknown, never exhausted."""
    return not candidate.is_ref and candidate.quota.exhausted


def resets_at(candidate: Candidate) -> float | None:
    return None if candidate.is_ref else candidate.quota.resets_at


def target_parts(key: str) -> tuple[str | None, str | None, str | None]:
    """``(provider, "provider/model", connection)`` of a target key.

    ``pa/m1@main`` -> ``("pa", "pa/m1", "main")``; an unpinned ``pa/m1@*`` has
    connection None; a combo-ref has no parts at all.  A key always ends with
    ``@<connection>`` or ``@*`` and a connection name has no ``@``, so the key splits
    at its last ``@``: a model id may hold one (Vertex's ``claude-sonnet-4@20250514``).
    """
    if key.startswith("combo:"):
        return None, None, None
    model, _, connection = key.rpartition("@")
    provider = model.partition("/")[0] or None
    return provider, model or None, None if connection in ("", "*") else connection


def candidate_parts(candidate: Candidate) -> tuple[str | None, str | None, str | None]:
    """Like ``target_parts`` but preferring the candidate's catalog records."""
    provider, model, connection = target_parts(candidate.key)
    if candidate.model is not None:
        provider, model = candidate.model.provider, candidate.model.key
    if candidate.connection is not None:
        connection = candidate.connection.name
    return provider, model, connection


def find(candidates: Iterable[Candidate], key: str) -> Candidate | None:
    """The first candidate with exactly ``key``."""
    return next((c for c in candidates if c.key == key), None)


def first_then(first: Candidate, rest: Iterable[Candidate]) -> tuple[Candidate, ...]:
    """``first`` followed by ``rest`` without it (compared by identity)."""
    return (first, *(c for c in rest if c is not first))


def sort_known_first(
    candidates: Sequence[Candidate], metric: Callable[[Candidate], float | None]
) -> tuple[Candidate, ...]:
    """Ascending by ``metric``; unknown (None) after every known, declared order."""
    known: list[tuple[float, Candidate]] = []
    unknown: list[Candidate] = []
    for candidate in candidates:
        value = metric(candidate)
        if value is None:
            unknown.append(candidate)
        else:
            known.append((value, candidate))
    known.sort(key=lambda pair: pair[0])  # stable: ties keep declared order
    return (*(c for _, c in known), *unknown)


def str_or_none(value: Any) -> str | None:
    return value if isinstance(value, str) else None
