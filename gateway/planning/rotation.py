"""Rotation positions of a combo whose targets expand over connections (spec 03 §4.1,
§5.4).

With ``connectionAwareExpansion`` every unpinned model target becomes one candidate
per connection *before* ordering, so ``round-robin`` rotates over those candidates,
not over the configured targets: a combo of ``[pa/m1, pb/m2]`` where ``pa`` has two
connections rotates over three positions.  Positions follow the configured order,
and inside one target the fixed connection order (priority, then name), so they stay
put while health or a request's cache key changes which candidates survive and how
their connections are tried.
"""

from __future__ import annotations

import dataclasses

from gateway.kernel.types import ComboInfo, ComboTargetInfo, RoutingTable
from gateway.planning.strategies.base import Candidate


def _slots_of(table: RoutingTable, target: ComboTargetInfo) -> list[tuple[str, str]]:
    """``(candidate key, connection name or "")`` of each position of one target."""
    if target.ref is not None:
        inner = table.combos.get(target.ref.lower())
        return [(f"combo:{inner.name if inner else target.ref}", "")]
    slug, _, model_id = (target.model or "").partition("/")
    provider = table.providers.get(slug.lower())
    model = provider.models.get(model_id) if provider is not None else None
    if provider is None or model is None:
        return [(target.key, "")]
    if target.connection is not None:
        return [(f"{model.key}@{target.connection}", target.connection)]
    connections = sorted(
        (c for c in provider.connections if provider.serves(model, c)),
        key=lambda c: (c.priority, c.name),
    )
    return [(f"{model.key}@{c.name}", c.name) for c in connections] or [
        (target.key, "")
    ]


def expanded_positions(
    table: RoutingTable, combo: ComboInfo, survivors: tuple[Candidate, ...]
) -> tuple[tuple[str, ...], tuple[Candidate, ...]]:
    """The expanded position list and the survivors renumbered into it."""
    keys: list[str] = []
    position: dict[tuple[int, str], int] = {}
    for index, target in enumerate(combo.targets):
        for key, connection in _slots_of(table, target):
            position[(index, connection)] = len(keys)
            keys.append(key)
    renumbered = []
    for candidate in survivors:
        name = candidate.connection.name if candidate.connection is not None else ""
        found = position.get((candidate.index, name))
        if found is None:
            found = position.get((candidate.index, ""), candidate.index)
        renumbered.append(dataclasses.replace(candidate, index=found))
    return tuple(keys), tuple(renumbered)
