"""Client wires: one module per wire, one registry line each.

``REGISTRY`` maps every request path a wire serves to the wire
(``gateway.inbound.base.Wire``); the front door (``gateway.edge.asgi``) serves exactly
these paths and leaves every other one to Django.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

from gateway.inbound import chat, classic, completions, embeddings, messages, responses
from gateway.inbound.base import Wire

_WIRES: tuple[Wire, ...] = (
    chat.WIRE,
    classic.WIRE,
    messages.WIRE,
    messages.COUNT_TOKENS,
    responses.WIRE,
    embeddings.WIRE,
    completions.WIRE,
)

#: request path -> its wire
REGISTRY: Mapping[str, Wire] = MappingProxyType(
    {path: wire for wire in _WIRES for path in wire.paths}
)

__all__ = ["REGISTRY", "Wire"]
