"""The contract every ordering strategy implements (spec 03 §4.3, §5).

A strategy orders the *survivors* of a combo (targets left after the health filters
of §4.2) for one request.  It is pure: everything it may read arrives in an
``OrderInput`` — the survivors with their runtime facts, the configured key list, the
combo ``config``, request keys, the clock, a seeded RNG and the strategy's own state
record — and everything it wants to remember leaves in the returned ``Ordering``:

* ``state_before``: the record to write *before* dispatch (round-robin's ``next``, a
  strict-random deck, a reset band counter), applied atomically by the caller's
  state store;
* ``on_success(state, served_key)``: the record to write after a success (sticky
  counters, pins, holders).

Invariants: the result is a permutation of the survivors; an empty input gives an
empty ordering; a single survivor is returned as is (state updates still apply);
sorts are stable, so ties keep declared order unless the strategy says otherwise.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from gateway.kernel.types import ConnectionInfo, ModelInfo
from gateway.planning.strategies.traits import Traits


@dataclass(frozen=True, slots=True, kw_only=True)
class Quota:
    """A connection's quota snapshot (spec 03 §8.5); None fields are unknown."""

    remaining: float | None = None  # 0..1
    resets_at: float | None = None  # unix seconds
    window_s: float | None = None
    exhausted: bool = False


@dataclass(frozen=True, slots=True, kw_only=True)
class Stats:
    """Target stats of the last 10 minutes (spec 03 §8.7)."""

    in_flight: int = 0
    calls: int = 0
    successes: int = 0
    failures: int = 0
    success_latency_ms_sum: float = 0.0


@dataclass(frozen=True, slots=True, kw_only=True)
class Candidate:
    """One unit a strategy orders: a model target (maybe expanded) or a combo-ref."""

    key: str  # "<provider>/<model>@<connection|*>" or "combo:<name>"
    index: int  # position in the configured list (stable across health changes)
    weight: float | None = None  # absent = None (counts as 0, adaptive as 1)
    model: ModelInfo | None = None  # None for a combo-ref
    connection: ConnectionInfo | None = None  # None for unpinned/unexpanded or refs
    stats: Stats = field(default_factory=Stats)
    quota: Quota = field(default_factory=Quota)
    half_open: bool = False

    @property
    def is_ref(self) -> bool:
        return self.key.startswith("combo:")


@dataclass(frozen=True, slots=True, kw_only=True)
class OrderInput:
    survivors: tuple[Candidate, ...]  # declared order
    configured: tuple[str, ...]  # every configured key, declared order
    config: Mapping[str, Any]
    r_in: int  # prompt tokens estimate (spec 03 §3)
    max_out: int | None  # max_completion_tokens or max_tokens
    cache_key: str | None  # K (spec 03 §3)
    session_key: str | None  # S (spec 03 §3)
    now: float
    rng: random.Random
    state: Any = None  # this strategy's record, read before planning
    defaults: Mapping[str, Any] = field(default_factory=dict)  # gateway settings used


@dataclass(frozen=True, slots=True, kw_only=True)
class Ordering:
    order: tuple[Candidate, ...]
    #: new state record to store before dispatch; None leaves it unchanged.  The
    #: caller writes it by compare-and-set on the record it read and orders again
    #: when another request changed it meanwhile: atomic across workers.
    state_before: Any = None
    #: (state, served key) -> new state after a successful call; None = nothing to do
    on_success: Callable[[Any, str], Any] | None = None
    #: (state, failed key) -> new state after a failed call; None = nothing to do
    on_failure: Callable[[Any, str], Any] | None = None


class Spec(Protocol):
    """Any strategy: its canonical name and what it declares about itself."""

    @property
    def name(self) -> str: ...

    @property
    def traits(self) -> Traits: ...


class Strategy(Spec, Protocol):
    """An ordering strategy."""

    def order(self, given: OrderInput) -> Ordering: ...
