"""The checks made right before a call (spec 02 §7, 03 §4.2): whether a target is
skipped, and the report item of a skip.

Shared by the attempt loop (``gateway.pipeline.handle``, ``gateway.slots.chaos``) and
the composite
runner (``gateway.slots.composite``): a target already attempted in this request, on a
connection that failed to connect, too small for the request, lacking a capability it
needs, or cooling (breaker, cooldown, auth disable, model lock, at
``max_concurrency``) is skipped.  ``needed`` and ``wanted`` are called only when the
model's window or capabilities are known, so a caller can compute them lazily.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable
from typing import Any

from gateway.dialects import dialect_of
from gateway.kernel.facts import DIALECT_NEEDS, Need, needed_tokens, needs
from gateway.kernel.failover import Item
from gateway.kernel.types import Target
from gateway.pipeline.health import conn_key
from providers.health import Skip, board

#: needs met by a dialect that speaks that client wire, not by the model
SURFACE_NEEDS = frozenset({"completions"})
#: needs met (or not) by the dialect, whatever the model declares
MODEL_BLIND = SURFACE_NEEDS | DIALECT_NEEDS


def unmet_param(target: Target, wanted: Callable[[], Iterable[Need]]) -> str | None:
    """The request field of the first capability the model is known to lack (for
    embeddings, also a dialect without them: spec 09 §5.2; for a client wire's
    surface, a dialect that does not speak it: 09 §6)."""
    capabilities = target.model.capabilities
    dialect = dialect_of(target)
    for need in wanted():
        if need.capability == "embeddings" and not dialect.embeddings:
            return need.param
        if need.capability in SURFACE_NEEDS and need.capability not in dialect.surfaces:
            return need.param
        if need.capability == "token_ids" and not dialect.embeddings_token_ids:
            return need.param
    if capabilities is None:
        return None
    for need in wanted():
        if need.capability not in capabilities and need.capability not in MODEL_BLIND:
            return need.param
    return None


def pre_call_skip(
    target: Target,
    *,
    repeat: bool,
    failed_connections: Collection[str],
    too_large: Collection[str],
    needed: Callable[[], int],
    wanted: Callable[[], Iterable[Need]],
    now: float,
    forced: bool = False,
) -> Skip | None:
    """Why ``target`` is not called now, or None to call it.

    ``repeat``: the target was attempted in this request already.  ``forced``: a
    strategy chose it although cooling (``adaptive``, spec 05 §3.1), so only the
    request-shaped checks apply.
    """
    connection = conn_key(target)
    window = target.model.context_window
    if repeat:
        return Skip("already_attempted", None)
    if connection in failed_connections:
        return Skip("connection_failed", None)
    if target.model_key in too_large or (window is not None and window < needed()):
        return Skip("context_too_large", None)
    unmet = unmet_param(target, wanted)
    if unmet is not None:
        return Skip("capability_mismatch", None, unmet)
    if forced:
        return None
    return board.skip_reason(
        connection, target.model.model_id, target.connection.max_concurrency, now
    )


def skip_item(target: Target, slot: int, skip: Skip) -> Item:
    """The report item of a skipped target (spec 02 §10)."""
    return Item(
        model=target.model_key,
        slot=slot,
        via=target.via,
        status="skipped",
        reason=skip.reason,
        calls=0,
        connection=target.connection.name,
        retry_after_s=skip.retry_after_s,
        unmet_param=skip.unmet_param,
    )


def skip_detail(skip: Skip, target: Target, body: dict[str, Any]) -> str:
    """Why, in words, for explain_route ("" when the reason says it all)."""
    if skip.reason == "already_attempted":
        return "tried in an earlier slot"
    if skip.reason == "context_too_large":
        return f"window {target.model.context_window} < {needed_tokens(body)}"
    if skip.reason == "capability_mismatch":
        lacking = [n.capability for n in needs(body) if n.param == skip.unmet_param]
        return f"lacks {lacking[0]}" if lacking else ""
    return ""
