"""Combo strategies (spec 03 §5, 04, 05 §3): one module per family, one registry line
each; every strategy declares its own ``Traits``.

``SPECS`` holds all 21 strategies under their canonical names, and is the only list
of them: the combo model's choices, the validators, the admin, the planner and its
batched reads derive what they need from it (``names``, ``canonical``,
``config_users``).  ``REGISTRY`` is its ordering part: each of the 17 ordering
strategies' ``order(OrderInput) -> Ordering`` ranks a combo's survivors for one
request (the contract is in ``base``).  ``adaptive``, ``auto``, ``fusion`` and
``pipeline`` are declared in ``special`` and run elsewhere.

Every ordering strategy is pure: chance comes from ``given.rng``, time from
``given.now``, and memory from ``given.state`` in and ``state_before``/``on_success``
out, as plain JSON-able values a shared store can hold.
"""

from collections.abc import Callable, Mapping
from types import MappingProxyType

from gateway.planning.strategies.base import (
    Candidate,
    Ordering,
    OrderInput,
    Quota,
    Spec,
    Stats,
    Strategy,
)
from gateway.planning.strategies.fit import (
    CacheOptimized,
    ContextOptimized,
    CostOptimized,
)
from gateway.planning.strategies.load import LeastUsed, PowerOfTwoChoices
from gateway.planning.strategies.memory import ContextRelay, LastKnownGood
from gateway.planning.strategies.quota import Headroom, ResetAware, ResetWindow
from gateway.planning.strategies.rotation import RoundRobin
from gateway.planning.strategies.simple import FillFirst, Priority, Random, StrictRandom
from gateway.planning.strategies.special import DECLARED
from gateway.planning.strategies.traits import Family, Traits
from gateway.planning.strategies.weighted import QuotaWeighted, Weighted

_ORDERING: tuple[Strategy, ...] = (
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

#: every strategy (spec 03 §5, canonical name) -> its declaration
_ALL: tuple[Spec, ...] = (*_ORDERING, *DECLARED)
SPECS: Mapping[str, Spec] = MappingProxyType({s.name: s for s in _ALL})

#: ordering strategy name -> its ordering
REGISTRY: Mapping[str, Strategy] = MappingProxyType({s.name: s for s in _ORDERING})

#: a name accepted on input -> the canonical name it is stored as (spec 03 §2.1)
ALIASES: Mapping[str, str] = MappingProxyType(
    {alias: s.name for s in SPECS.values() for alias in s.traits.aliases}
)


def traits(name: str) -> Traits:
    """The traits of a canonical strategy name (a priority combo's when unknown)."""
    spec = SPECS.get(name)
    return spec.traits if spec is not None else SPECS["priority"].traits


def names(test: Callable[[Traits], bool]) -> frozenset[str]:
    """The canonical names of the strategies whose traits pass ``test``."""
    return frozenset(name for name, spec in SPECS.items() if test(spec.traits))


def canonical(value: str) -> str | None:
    """The canonical name of a strategy given as sent (case and spaces ignored,
    aliases accepted), or None."""
    lowered = value.strip().lower()
    found = ALIASES.get(lowered, lowered)
    return found if found in SPECS else None


def config_users() -> dict[str, frozenset[str]]:
    """``config`` key -> the strategies that read it."""
    users: dict[str, set[str]] = {}
    for name, spec in SPECS.items():
        for key in spec.traits.config_keys:
            users.setdefault(key.name, set()).add(name)
    return {key: frozenset(found) for key, found in users.items()}


ORDERING = names(lambda t: t.family is Family.ORDERING)
COMPOSITE = names(lambda t: t.family is Family.COMPOSITE)
PIN_CAPABLE = names(lambda t: t.pin_capable)

__all__ = [
    "ALIASES",
    "COMPOSITE",
    "ORDERING",
    "PIN_CAPABLE",
    "REGISTRY",
    "SPECS",
    "Candidate",
    "Family",
    "OrderInput",
    "Ordering",
    "Quota",
    "Spec",
    "Stats",
    "Strategy",
    "Traits",
    "canonical",
    "config_users",
    "names",
    "traits",
]
