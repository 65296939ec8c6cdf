"""What a surface allows before any call (spec 09 §2.6, §5.2), over the built chain.

* An embeddings request names its model itself: ``auto`` and its variants, smart
  aliases and combos of a non-ordering strategy (``fusion``, ``pipeline``,
  ``chaos``...) are ``unsupported_for_endpoint`` (400, ``param`` the entry), since
  vectors of different models are not interchangeable.
* ``X-OmniRoute-Strict: true`` turns a drop of what translation cannot carry into a
  400 ``unsupported_parameter`` naming the first path, unless every entry is a model
  whose upstream speaks the client's own wire (a passthrough carries everything).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from gateway.dialects import dialect_for
from gateway.kernel.chain import Slot
from gateway.kernel.exchange import ChatRequest, RequestError
from gateway.kernel.resolve import RouteKind
from gateway.kernel.types import RoutingTable
from gateway.planning.strategies import ORDERING


def _unsupported(param: str, what: str) -> RequestError:
    return RequestError(
        400,
        "unsupported_for_endpoint",
        f"{what} cannot serve embeddings: name the embedding model (or a chain or an "
        "ordering combo of them); vectors of different models are not interchangeable",
        param=param,
    )


def embeddings_refusal(chain: Sequence[Slot], smart: bool) -> RequestError | None:
    if smart:
        return _unsupported(chain[0].entry.param, "A smart alias")
    for slot in chain:
        resolved = slot.resolved
        if resolved.kind is RouteKind.AUTO:
            return _unsupported(slot.entry.param, f"'{slot.entry.model}' (auto)")
        combo = resolved.combo
        if combo is not None and combo.strategy not in ORDERING:
            return _unsupported(
                slot.entry.param, f"A '{combo.strategy}' combo ('{combo.name}')"
            )
    return None


def _carried(table: RoutingTable, chain: Sequence[Slot], surface: str) -> bool:
    """Every entry is a model whose every provider speaks ``surface`` itself."""
    for slot in chain:
        resolved = slot.resolved
        if resolved.kind is not RouteKind.DIRECT or not resolved.models:
            return False
        for model in resolved.models:
            provider = table.providers.get(model.provider)
            if provider is None:
                return False
            dialect = dialect_for(provider.kind, model.wire or provider.wire)
            if surface not in dialect.surfaces:
                return False
    return True


def strict_refusal(
    table: RoutingTable,
    request: ChatRequest,
    chain: Sequence[Slot],
    headers: Mapping[str, str],
) -> RequestError | None:
    if not request.dropped:
        return None
    if headers.get("x-omniroute-strict", "").strip().lower() != "true":
        return None
    if request.original is not None and _carried(table, chain, request.surface):
        return None
    path = request.dropped[0]
    return RequestError(
        400,
        "unsupported_parameter",
        f"'{path}' cannot be carried to this request's upstream "
        "(X-OmniRoute-Strict: true)",
        param=path,
    )
