"""Per-key rate limits and budgets (spec 08 §6): reserve at admission, reconcile at end.

``admit_request()`` runs after the chain is built and before any upstream call, and
only for a key with ``rpm``, ``tpm`` or ``budget_usd`` (``applies()``): other keys pay
nothing.  It builds a ``Demand`` (``E``, ``C``, the budget period; arithmetic in
``gateway.kernel.limits``) and asks the ``Limiter``:

1. With ``REDIS_URL``, one Lua script (``gateway.limits.shared``) checks ``rpm`` →
   ``tpm`` → budget and, only when all pass, counts the request, adds ``E`` to the
   current token bucket and adds the reservation; expired reservations go in the
   same step.  A Redis error or timeout makes that one operation use the in-process
   limiter (counted as a shared-state fallback) against this worker's share of each
   limit (the limit over ``WEB_CONCURRENCY``, so the workers together stay within
   it), and Redis is skipped for 1 s, doubling up to 5 s (spec 08 §3.3).
2. Without Redis, ``LocalLimits`` (``gateway.limits.store``) runs the same algorithm
   in process.
3. A missing ``spent`` is seeded from the ``RequestLog`` sum of the key and period
   before the first admission (``SpentSeeds``).

An admitted request carries a ``Ticket`` on ``RunRecord.limits``; the front door calls
it once the request has ended, whatever the outcome (``gateway.pipeline.handle`` calls
it itself when the request dies before a record was made). It moves ``actual tokens −
E`` into the admission minute's bucket, drops the reservation and adds
``RunRecord.cost`` to ``spent``. Calling it is synchronous and idempotent; the Redis
round trip runs as a background task, after the response.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from django.conf import settings

from gateway import drain
from gateway.kernel import limits as math_
from gateway.kernel.chain import Slot
from gateway.kernel.exchange import RequestError
from gateway.kernel.limits import PriceCeiling
from gateway.kernel.types import KeyPolicy, RoutingTable
from gateway.limits.store import (
    Demand,
    LocalLimits,
    Refusal,
    SharedUnavailable,
    SpentSeeds,
)
from gateway.pipeline.context import ChatContext
from gateway.pipeline.report import refusal
from gateway.pipeline.result import Failure
from telemetry import metrics

if TYPE_CHECKING:
    from gateway.pipeline.record import RunRecord

logger = logging.getLogger("omniroute.limits")

#: spec 08 §3.3: skip Redis for 1 s after a failure, doubling up to 5 s
BACKOFF_START_SECONDS = 1.0
BACKOFF_MAX_SECONDS = 5.0
#: how often tickets that were never reconciled are forgotten (after 15 min)
SWEEP_EVERY_MS = 60_000


# --- the facade ----------------------------------------------------------------------


class SharedLimits(Protocol):
    async def warm(self) -> None: ...
    async def admit(self, demand: Demand) -> Refusal | None: ...
    async def reconcile(self, demand: Demand, tokens_delta: int, cost: int) -> None: ...
    async def aclose(self) -> None: ...


@dataclass(slots=True, eq=False)
class Ticket:
    """An admitted request's reservation; ``ticket(run)`` reconciles it once."""

    demand: Demand
    limiter: Limiter
    shared: bool
    #: the request's record, for a reconcile at shutdown (usage seen so far)
    run: RunRecord | None = None
    settled: bool = False

    def __call__(self, run: RunRecord) -> None:
        if self.settled:
            return
        self.settled = True
        self.limiter.open.discard(self)
        demand = self.demand
        delta = 0
        if demand.tpm is not None:
            actual = (run.prompt_tokens or 0) + (run.completion_tokens or 0)
            delta = actual - demand.tokens
        cost = math_.usd_to_micro(run.cost) if demand.budget is not None else 0
        self.limiter.reconcile(self, delta, cost)

    def release(self) -> None:
        """Settle a request that never ran: no tokens used, nothing spent (the
        request itself still counts against ``rpm``)."""
        if self.settled:
            return
        self.settled = True
        self.limiter.open.discard(self)
        tokens = -self.demand.tokens if self.demand.tpm is not None else 0
        self.limiter.reconcile(self, tokens, 0)


class Limiter:
    """Redis when configured (with the local fallback), else in process."""

    def __init__(
        self,
        *,
        local: LocalLimits,
        shared: SharedLimits | None = None,
        clock: Callable[[], float] = time.time,
        monotonic: Callable[[], float] = time.monotonic,
        workers: int = 1,
    ) -> None:
        self.local = local
        #: worker processes sharing the limits: a fallback admits against 1/workers
        self.workers = workers
        self.shared = shared
        self.clock = clock
        self.monotonic = monotonic
        self._skip_until = 0.0
        self._backoff = BACKOFF_START_SECONDS
        self._tasks: set[asyncio.Task[None]] = set()
        #: admitted, not yet reconciled
        self.open: set[Ticket] = set()
        self._next_sweep_ms = 0
        self._ceilings: dict[str, PriceCeiling] = {}
        self._ceiling_table: RoutingTable | None = None

    async def admit(self, demand: Demand) -> Ticket | Refusal:
        if self.shared is not None and self.monotonic() < self._skip_until:
            count_fallback("limits_admit")  # backed off: no Redis latency at all
        elif self.shared is not None:
            try:
                refused = await self.shared.admit(demand)
            except SharedUnavailable as exc:
                self._failed("limits_admit", exc)
            else:
                self._backoff = BACKOFF_START_SECONDS
                return refused or Ticket(demand, self, shared=True)
        if self.shared is not None:  # Redis is away: this worker's share only
            demand = demand.share(self.workers)
        refused = await self.local.admit(demand)
        return refused or Ticket(demand, self, shared=False)

    def track(self, ticket: Ticket, run: RunRecord) -> None:
        ticket.run = run
        run.limits = ticket
        self.open.add(ticket)
        if ticket.demand.now_ms >= self._next_sweep_ms:
            # A request that ended without reaching the front door's hook (it never
            # does normally) must not stay here for ever: its reservation has
            # expired anyway after 15 min.
            oldest = ticket.demand.now_ms - math_.RESERVATION_TTL_SECONDS * 1000
            self.open = {t for t in self.open if t.demand.now_ms > oldest}
            self._next_sweep_ms = ticket.demand.now_ms + SWEEP_EVERY_MS

    def reconcile(self, ticket: Ticket, tokens_delta: int, cost: int) -> None:
        if not ticket.shared or self.shared is None:
            self.local.reconcile(ticket.demand, tokens_delta, cost)
            return
        task = asyncio.get_running_loop().create_task(
            self._reconcile_shared(self.shared, ticket.demand, tokens_delta, cost)
        )
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _reconcile_shared(
        self, shared: SharedLimits, demand: Demand, tokens_delta: int, cost: int
    ) -> None:
        try:
            await shared.reconcile(demand, tokens_delta, cost)
        except SharedUnavailable as exc:  # the reservation expires by itself
            self._failed("limits_reconcile", exc)

    async def drain(self) -> None:
        """Wait for the reconciliations in flight (tests, shutdown)."""
        while self._tasks:
            await asyncio.wait(set(self._tasks))

    async def shutdown(self) -> None:
        """Spec 08 §4 step 5: reconcile every open reservation with the usage seen
        so far, wait for the Redis round trips, close the client."""
        for ticket in list(self.open):
            if ticket.run is not None:
                ticket(ticket.run)
        await self.drain()
        if self.shared is not None:
            await self.shared.aclose()

    def _failed(self, op: str, exc: BaseException) -> None:
        count_fallback(op)
        now = self.monotonic()
        if now >= self._skip_until:
            logger.warning(
                "redis: %s failed (%s); limits held in process for %.0f s",
                op,
                exc,
                self._backoff,
            )
            self._skip_until = now + self._backoff
            self._backoff = min(self._backoff * 2, BACKOFF_MAX_SECONDS)

    def demand(
        self,
        table: RoutingTable,
        key: KeyPolicy,
        request_id: uuid.UUID,
        body: dict[str, Any],
        chain: Iterable[Slot],
    ) -> Demand:
        now = self.clock()
        prompt = reserve = 0
        if key.tpm is not None or key.budget_usd is not None:
            prompt = math_.prompt_estimate(body)
            reserve = math_.completion_reserve(
                body, settings.OMNIROUTE_RESERVE_COMPLETION_TOKENS
            )
        demand = Demand(
            key_id=key.id,
            request_id=request_id.hex,
            now_ms=int(now * 1000),
            rpm=key.rpm,
            tpm=key.tpm,
            tokens=math_.token_estimate(prompt, reserve, key.tpm) if key.tpm else 0,
        )
        if key.budget_usd is None:
            return demand
        prices = self.ceiling(table, chain)
        return Demand(
            key_id=demand.key_id,
            request_id=demand.request_id,
            now_ms=demand.now_ms,
            rpm=demand.rpm,
            tpm=demand.tpm,
            tokens=demand.tokens,
            budget=math_.budget_micro_usd(key.budget_usd),
            cost=math_.cost_estimate_micro_usd(prompt, reserve, prices),
            period=math_.budget_period(key.budget_period, now),
        )

    def ceiling(self, table: RoutingTable, chain: Iterable[Slot]) -> PriceCeiling:
        """The highest prices over the chain's candidates, cached per table."""
        if self._ceiling_table is not table:
            self._ceiling_table, self._ceilings = table, {}
        total = PriceCeiling()
        for slot in chain:
            identity = slot.resolved.identity
            found = self._ceilings.get(identity)
            if found is None:
                found = PriceCeiling.over(math_.candidate_models(table, slot.resolved))
                self._ceilings[identity] = found
            total = total | found
        return total


def count_fallback(op: str) -> None:
    """``omniroute_shared_state_fallbacks_total{op}`` (spec 08 §3.3)."""
    metrics.bounded(metrics.SHARED_STATE_FALLBACKS, op).inc()


# --- the process limiter and the request hook ----------------------------------------

_LIMITER: list[Limiter] = []


def limiter() -> Limiter:
    """This process's limiter, built from settings on first use."""
    if not _LIMITER:
        seeds = SpentSeeds()
        shared = None
        if settings.REDIS_URL:
            from gateway.limits.shared import RedisLimits

            shared = RedisLimits(
                settings.REDIS_URL,
                timeout_s=settings.OMNIROUTE_REDIS_TIMEOUT_MS / 1000,
                seeds=seeds,
            )
        gate = Limiter(
            local=LocalLimits(seeds), shared=shared, workers=settings.OMNIROUTE_WORKERS
        )
        drain.on_shutdown(gate.shutdown)
        _LIMITER.append(gate)
    return _LIMITER[0]


async def warm() -> None:
    """Connect the shared limits before traffic (lifespan start-up; no-op without
    Redis), so a cold worker's first burst does not time out opening connections."""
    shared = limiter().shared
    if shared is not None:
        await shared.warm()


def _release_abandoned(admission: asyncio.Future[Ticket | Refusal]) -> None:
    if admission.cancelled():
        return
    exc = admission.exception()
    if exc is not None:  # nobody awaits it any more: say so rather than drop it
        logger.error("abandoned admission failed", exc_info=exc)
        return
    verdict = admission.result()
    if isinstance(verdict, Ticket):
        verdict.release()


def applies(key: KeyPolicy) -> bool:
    """Whether the key has any limit at all (the others skip this module)."""
    return key.rpm is not None or key.tpm is not None or key.budget_usd is not None


async def admit_request(
    ctx: ChatContext,
    key: KeyPolicy,
    body: dict[str, Any],
    chain: list[Slot],
    run: RunRecord,
) -> Failure | None:
    """Admit the request (``run.limits`` set) or answer its 429 / 402 refusal."""
    gate = limiter()
    admission = asyncio.ensure_future(
        gate.admit(gate.demand(ctx.table, key, ctx.request_id, body, chain))
    )
    try:
        verdict = await asyncio.shield(admission)
    except asyncio.CancelledError:
        # The client left while the admission script ran: a reservation it made
        # is handed back as soon as it lands, not 15 min later.
        admission.add_done_callback(_release_abandoned)
        raise
    if isinstance(verdict, Ticket):
        gate.track(verdict, run)
        return None
    exc = RequestError(
        verdict.status, verdict.code, verdict.message, error_type=verdict.error_type
    )
    failure = refusal(ctx, exc, run)
    failure.retry_after_s = verdict.retry_after_s
    return failure


__all__ = [
    "Demand",
    "Limiter",
    "LocalLimits",
    "Refusal",
    "SpentSeeds",
    "Ticket",
    "admit_request",
    "applies",
    "limiter",
]
