"""One request end to end, wire-neutral: its chain, its limits, the slot loop.

``handle(raw, parser, ctx, key)`` parses the body with the client wire's parser,
builds the chain (spec 02 §2-§4: the entries or the key's ``failover_defaults``, smart
aliases replaced by their tier target, spec 05 §2.1), admits the request against the
key's limits (08 §6) and runs the slot loop (``gateway.pipeline.loop``).  It returns a
``Result`` that only the wire turns into bytes; every answer of a smart alias carries
the tier headers (05 §2.4).  Every attempt and the request itself are handed to
``ctx.record`` when the request ends, also when the client went away.

``chain_entries`` is the part before resolution, shared with ``explain_route``.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Protocol

from gateway.kernel.chain import ChainError, EntrySpec, build_chain, with_defaults
from gateway.kernel.exchange import ChatRequest, RequestError
from gateway.kernel.resolve import ModelNotFound, UnknownAutoVariant, resolve
from gateway.kernel.types import KeyPolicy, RoutingTable
from gateway.limits import admission as limits
from gateway.pipeline import fit, tiers
from gateway.pipeline.context import ChatContext
from gateway.pipeline.loop import run_chain
from gateway.pipeline.record import RunRecord
from gateway.pipeline.report import refusal
from gateway.pipeline.result import Answer, Failure, Result, Streamed
from gateway.pipeline.run import Run
from gateway.pipeline.sessions import request_session, session_key
from gateway.pipeline.tiers import TierOutcome

logger = logging.getLogger("omniroute.gateway")


class Parser(Protocol):
    """A client wire's reading of its body (``gateway.inbound``)."""

    def parse(self, raw: bytes, headers: Mapping[str, str]) -> ChatRequest:
        """The canonical request; raises ``RequestError`` naming the field."""
        ...

    def model_sent(self, raw: bytes) -> str:
        """The model a body that failed validation names, for its log row."""
        ...


@dataclass(slots=True, kw_only=True)
class Entries:
    """The chain entries as they will be resolved, and what choosing them found."""

    entries: tuple[EntrySpec, ...]
    #: ``S`` of spec 03 §3 (None: no session)
    session_key: str | None
    tier: TierOutcome | None
    warnings: list[str]


def chain_entries(
    table: RoutingTable,
    key: KeyPolicy,
    request: ChatRequest,
    headers: Mapping[str, str],
    rec: RunRecord,
    *,
    observe: bool = True,
) -> Entries:
    """The session, the entries (``failover_defaults`` filled in) with every smart
    alias replaced by its tier target (spec 05 §2.1).  ``observe``: derive a session,
    count and pin the tier (explain_route classifies without one, recording
    nothing)."""
    session = request_session(headers, request, key) if observe else None
    if session is not None:
        rec.session_id, rec.session_source = session.id, session.source
    scoped = session_key(key, session)
    warnings: list[str] = []
    # the chain is built first (a smart alias as sent), then every alias entry is
    # replaced by its tier target, then resolved
    sent = request.entry_specs()
    if not request.explicit_chain:
        sent = with_defaults(table, key, sent, warnings)
    entries, tier = tiers.apply(
        table, sent, request.body, headers, scoped, key=key, observe=observe
    )
    if tier is not None:
        rec.smart(tier)
    return Entries(entries=entries, session_key=scoped, tier=tier, warnings=warnings)


async def handle(
    raw: bytes, parser: Parser, ctx: ChatContext, key: KeyPolicy
) -> Result:
    rec = ctx.start_run(key)
    entries: tuple[EntrySpec, ...] = ()
    try:
        request = parser.parse(raw, ctx.headers)
        rec.stream = request.stream
        rec.dropped = request.dropped
        ctx.streaming(request.stream)
        rec.requested_model = request.entries[0].model
        chosen = chain_entries(ctx.table, key, request, ctx.headers, rec)
        entries = chosen.entries
        chain = build_chain(
            ctx.table, key, entries, explicit=True, warnings=chosen.warnings
        )
    except (RequestError, ChainError) as exc:
        if not rec.requested_model:
            rec.requested_model = parser.model_sent(raw)
        if exc.code == "model_not_allowed":  # resolved, then refused: not unresolved
            rec.route = "chain" if len(entries) > 1 else _route_of(ctx, entries[0])
        return _with_tier(refusal(ctx, exc, rec), rec)
    # spec 06 §1.1: a request refused after resolution (limits) logs its route
    rec.route = "chain" if len(chain) > 1 else chain[0].resolved.route
    if request.operation == "embeddings":
        unfit = fit.embeddings_refusal(
            chain, chosen.tier is not None
        ) or fit.embeddings_strict_refusal(ctx.table, request, chain, ctx.headers)
    else:
        unfit = fit.strict_refusal(ctx.table, request, chain, ctx.headers)
    if unfit is not None:
        return _with_tier(refusal(ctx, unfit, rec), rec)
    for warning in chosen.warnings:
        logger.warning("failover defaults: %s", warning)
    if limits.applies(key):  # spec 08 §6: before any upstream call
        refused = await limits.admit_request(ctx, key, request.body, chain, rec)
        if refused is not None:
            return _with_tier(refused, rec)
    run = Run(
        ctx=ctx,
        key=key,
        request=request,
        chain=chain,
        rec=rec,
        session_key=chosen.session_key,
    )
    try:
        return _with_dropped(_with_tier(await run_chain(run), rec), request, rec)
    except BaseException:
        if rec.limits is not None:  # ended before a record reached the front door
            rec.limits(rec)
        raise


def _route_of(ctx: ChatContext, entry: EntrySpec) -> str:
    try:
        return resolve(ctx.table, entry.model).route
    except (UnknownAutoVariant, ModelNotFound):
        return "unresolved"


def _with_dropped(result: Result, request: ChatRequest, rec: RunRecord) -> Result:
    """Spec 09 §2.6: what the wire's translation (and the serving attempt, for a
    field its model cannot take) left out, named on the answer it shaped (a
    passthrough carried everything)."""
    passthrough = (isinstance(result, Answer) and result.raw is not None) or (
        isinstance(result, Streamed) and result.passthrough
    )
    if passthrough or isinstance(result, Failure):
        return result
    served = result.served if isinstance(result, Streamed) else rec.served
    paths = rec.dropped_for(served) if served is not None else request.dropped
    if paths:
        result.headers.append((b"x-omniroute-dropped", ",".join(paths).encode()))
    return result


def _with_tier(result: Result, rec: RunRecord) -> Result:
    """Spec 05 §2.4: the tier headers on every answer of a smart alias."""
    if rec.tier_outcome is not None:
        result.headers.extend(rec.tier_outcome.headers())
    return result
