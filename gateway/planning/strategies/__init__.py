"""Ordering strategies (spec 03 §5): one module per family, one registry.

``REGISTRY`` maps each of the 17 ordering strategy names to an object whose
``order(OrderInput) -> Ordering`` ranks a combo's survivors for one request (the
contract is in ``base``).  ``auto``, ``adaptive``, ``fusion`` and ``pipeline`` are
not ordering strategies and live elsewhere.

Every strategy is pure: chance comes from ``given.rng``, time from ``given.now``, and
memory from ``given.state`` in and ``state_before``/``on_success`` out, as plain
JSON-able values a shared store can hold.
"""

from collections.abc import Mapping
from types import MappingProxyType

from gateway.planning.strategies.base import (
    Candidate,
    Ordering,
    OrderInput,
    Quota,
    Stats,
    Strategy,
)
from gateway.planning.strategies.fit import (
    CacheOptimized,
    ContextOptimized,
    CostOptimized,
    rendezvous_order,
    rendezvous_score,
)
from gateway.planning.strategies.load import LeastUsed, PowerOfTwoChoices
from gateway.planning.strategies.memory import ContextRelay, LastKnownGood
from gateway.planning.strategies.quota import Headroom, ResetAware, ResetWindow
from gateway.planning.strategies.rotation import RoundRobin
from gateway.planning.strategies.simple import FillFirst, Priority, Random, StrictRandom
from gateway.planning.strategies.weighted import QuotaWeighted, Weighted

_ALL: tuple[Strategy, ...] = (
    Priority(),
    FillFirst(),
    Weighted(),
    RoundRobin(),
    Random(),
    StrictRandom(),
    PowerOfTwoChoices(),
    LeastUsed(),
    CostOptimized(),
    ContextOptimized(),
    CacheOptimized(),
    ResetAware(),
    ResetWindow(),
    Headroom(),
    QuotaWeighted(),
    LastKnownGood(),
    ContextRelay(),
)

#: strategy name (spec 03 §5, canonical) -> its ordering
REGISTRY: Mapping[str, Strategy] = MappingProxyType({s.name: s for s in _ALL})

__all__ = [
    "REGISTRY",
    "Candidate",
    "OrderInput",
    "Ordering",
    "Quota",
    "Stats",
    "Strategy",
    "rendezvous_order",
    "rendezvous_score",
]
