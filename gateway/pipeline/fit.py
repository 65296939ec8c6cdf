"""What a surface allows before any call (spec 09 §2.6, §5.2), over the built chain.

* An embeddings request names its model itself: ``auto`` and its variants, smart
  aliases and combos of a non-ordering strategy (``fusion``, ``pipeline``,
  ``chaos``...) are ``unsupported_for_endpoint`` (400, ``param`` the entry), since
  vectors of different models are not interchangeable.
* ``X-OmniRoute-Strict: true`` turns a drop of what translation cannot carry into a
  400 ``unsupported_parameter`` naming the first path, unless every entry is a model
  whose upstream speaks the client's own wire (a passthrough carries everything);
  so does an element some candidate's dialect cannot carry (``carry_of``: a field
  its upstream has no counterpart for, Bedrock's image URLs; named in the client's
  terms); on the embeddings surface, a field some candidate's embeddings request
  leaves out (``embeddings_unsent``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from gateway.dialects import (
    carry_of,
    dialect_for,
    dialect_of,
    embeddings_unsent,
    odd_elements,
)
from gateway.dialects.carry import Odd
from gateway.kernel.chain import Slot, plan_targets
from gateway.kernel.exchange import Carried, ChatRequest, RequestError
from gateway.kernel.resolve import RouteKind
from gateway.kernel.types import RoutingTable, Target
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


def carries(target: Target, carried: Carried) -> bool:
    """``target``'s model takes ``carried``: it is known to have the capability, or
    its capabilities are unknown, the client sent the field on its own wire, and the
    dialect takes the field as it is (``reasoning_effort``); a field bound to
    dialects (``Carried.dialects``): the target's dialect is one of them."""
    if carried.dialects is not None:
        dialect = dialect_of(target)
        return f"{dialect.kind}/{dialect.wire}" in carried.dialects
    capabilities = target.model.capabilities
    if capabilities is not None:
        return carried.capability in capabilities
    return carried.own and dialect_of(target).reasoning_effort


def _left_out(
    table: RoutingTable, request: ChatRequest, chain: Sequence[Slot]
) -> str | None:
    """The first ``Carried`` field some translated candidate would leave out, else
    the first element of the body some candidate's dialect cannot carry."""
    targets = [t for slot in chain for t in plan_targets(table, slot, [])]
    for carried in request.conditional:
        if not carried.path or (
            not carried.nested and carried.field not in request.body
        ):
            continue
        for target in targets:
            through = (
                request.original is not None
                and request.surface in dialect_of(target).surfaces
            )
            if not through and not carries(target, carried):
                return carried.path
    odd: tuple[Odd, ...] | None = None
    for target in targets:
        dialect = dialect_of(target)
        if request.original is not None and request.surface in dialect.surfaces:
            continue
        carry = carry_of(dialect)
        if carry is None:
            continue
        if odd is None:
            odd = odd_elements(request.body)
        left = carry(request.body, odd)
        if left:
            return request.client_path(left[0])
    return None


def _strict(headers: Mapping[str, str]) -> bool:
    return headers.get("x-omniroute-strict", "").strip().lower() == "true"


def _cannot_carry(path: str) -> RequestError:
    return RequestError(
        400,
        "unsupported_parameter",
        f"'{path}' cannot be carried to this request's upstream "
        "(X-OmniRoute-Strict: true)",
        param=path,
    )


def embeddings_strict_refusal(
    table: RoutingTable,
    request: ChatRequest,
    chain: Sequence[Slot],
    headers: Mapping[str, str],
) -> RequestError | None:
    """Under ``X-OmniRoute-Strict: true``, an embeddings field some candidate's
    request would leave out (``embeddings_unsent``: Cohere's ``dimensions`` on
    Bedrock) is a 400 naming it, before any call."""
    if not _strict(headers):
        return None
    for slot in chain:
        for target in plan_targets(table, slot, []):
            left = embeddings_unsent(
                dialect_of(target), target.model.upstream_id, request.body
            )
            if left:
                return _cannot_carry(left[0])
    return None


def strict_refusal(
    table: RoutingTable,
    request: ChatRequest,
    chain: Sequence[Slot],
    headers: Mapping[str, str],
) -> RequestError | None:
    if not _strict(headers):
        return None
    path: str | None = None
    if request.dropped and not (
        request.original is not None and _carried(table, chain, request.surface)
    ):
        path = request.dropped[0]
    if path is None:
        path = _left_out(table, request, chain)
    if path is None:
        return None
    return _cannot_carry(path)
