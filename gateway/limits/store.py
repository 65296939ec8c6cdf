"""Per-key limits: the request's demand, the refusals and the in-process store.

``Demand`` is what one request asks of its key (spec 08 §6: one request, ``E``
tokens, a reservation of ``C`` micro-USD in a budget period).  ``LocalLimits`` decides
it in process, with the same integer maths as ``gateway.kernel.limits`` and the Redis
script (``gateway.limits.shared``).  ``SpentSeeds`` reads a period's spend from
``RequestLog`` when a store does not know it yet: one read per key and period at a
time, off the event loop, reused for a few seconds; a failed read makes that
admission skip the budget check rather than wait on a database that is away.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from django.db import close_old_connections
from django.db.models import Sum

from gateway.kernel import limits as math_
from gateway.kernel.limits import Period
from telemetry.models import RequestLog

logger = logging.getLogger("omniroute.limits")

#: a seeded (or failed) DB read is reused this long by concurrent first admissions
SEED_CACHE_SECONDS = 5.0
#: rounds of "seed, then admit again" before one admission skips the budget
SEED_ROUNDS_LOCAL = 3


@dataclass(frozen=True, slots=True, kw_only=True)
class Demand:
    """What one request asks of its key; amounts in requests, tokens, micro-USD."""

    key_id: int
    request_id: str
    now_ms: int
    rpm: int | None = None
    tpm: int | None = None
    #: ``E`` (0 without ``tpm``)
    tokens: int = 0
    #: the budget in micro-USD (None: the key has none)
    budget: int | None = None
    #: ``C`` in micro-USD
    cost: int = 0
    period: Period | None = None

    @property
    def minute(self) -> int:
        return math_.minute_of(self.now_ms)

    @property
    def member(self) -> str:
        """The reservation: request id and ``C`` (the amount the sum reads back)."""
        return f"{self.request_id}:{self.cost}"

    def share(self, workers: int) -> Demand:
        """This demand against one worker's share of every limit (the honest local
        fallback when Redis is away, issue #16): ``workers`` processes together
        admit no more than the key allows (at least 1 of each limit per worker)."""
        if workers <= 1:
            return self

        def part(limit: int | None) -> int | None:
            return None if limit is None else max(1, limit // workers)

        return dataclasses.replace(
            self, rpm=part(self.rpm), tpm=part(self.tpm), budget=part(self.budget)
        )

    def without_budget(self) -> Demand:
        return Demand(
            key_id=self.key_id,
            request_id=self.request_id,
            now_ms=self.now_ms,
            rpm=self.rpm,
            tpm=self.tpm,
            tokens=self.tokens,
        )

    def windows(
        self, req: tuple[int, int], tok: tuple[int, int]
    ) -> tuple[math_.WindowReading, ...]:
        """The configured windows as read at admission, for Retry-After."""
        found = []
        if self.rpm is not None:
            found.append(math_.WindowReading(req[0], req[1], 1, self.rpm))
        if self.tpm is not None:
            found.append(math_.WindowReading(tok[0], tok[1], self.tokens, self.tpm))
        return tuple(found)


@dataclass(frozen=True, slots=True)
class Refusal:
    status: int
    code: str
    message: str
    error_type: str
    retry_after_s: int | None = None


def rate_refusal(demand: Demand, req: tuple[int, int], tok: tuple[int, int]) -> Refusal:
    wait = math_.retry_after_seconds(demand.windows(req, tok), demand.now_ms)
    return Refusal(
        429,
        "key_rate_limited",
        "Rate limit of this API key reached; retry after the Retry-After delay",
        "rate_limit_error",
        wait,
    )


BUDGET_REFUSAL = Refusal(
    402,
    "budget_exceeded",
    "Budget of this API key for the current period is exhausted",
    "budget_error",
)


class NeedsSeed(Exception):
    """The budget's ``spent`` is unknown here; seed it, then admit again."""


class SharedUnavailable(Exception):
    """Redis failed or timed out; this one operation falls back (spec 08 §3.3)."""


class SeedUnavailable(Exception):
    """The database could not give the period's spend (the budget check is skipped)."""


# --- seeding spent from the database -------------------------------------------------


def read_spent_micro(key_id: int, period: Period) -> int:
    """The key's billed cost in the period, from ``RequestLog`` (sync ORM)."""
    try:
        total = RequestLog.objects.filter(
            api_key_id=key_id,
            created_at__gte=period.start,
            created_at__lt=period.end,
        ).aggregate(total=Sum("cost_usd"))["total"]
    finally:
        close_old_connections()
    return math_.usd_to_micro(total)


@dataclass(slots=True)
class SpentSeeds:
    """One DB read per (key, period) at a time, off the loop; reused briefly."""

    read: Callable[[int, Period], int] = read_spent_micro
    cache_seconds: float = SEED_CACHE_SECONDS
    clock: Callable[[], float] = time.monotonic
    _values: dict[tuple[int, str], tuple[int | None, float]] = field(
        default_factory=dict
    )
    _pending: dict[tuple[int, str], asyncio.Task[int | None]] = field(
        default_factory=dict
    )

    async def get(self, key_id: int, period: Period) -> int:
        """Micro-USD spent; raises ``SeedUnavailable`` when the DB failed lately."""
        slot = (key_id, period.label)
        cached = self._values.get(slot)
        if cached is not None and self.clock() - cached[1] < self.cache_seconds:
            return _seeded(cached[0])
        task = self._pending.get(slot)
        if task is None or task.get_loop() is not asyncio.get_running_loop():
            task = asyncio.get_running_loop().create_task(self._load(slot, period))
            self._pending[slot] = task
        return _seeded(await asyncio.shield(task))

    async def _load(self, slot: tuple[int, str], period: Period) -> int | None:
        try:
            value: int | None = await asyncio.to_thread(self.read, slot[0], period)
        except Exception:
            # The gateway keeps serving from its snapshot while the DB is away.
            logger.exception("budget: could not read the spend of key %s", slot[0])
            value = None
        finally:
            self._pending.pop(slot, None)
        self._values[slot] = (value, self.clock())
        return value


def _seeded(value: int | None) -> int:
    if value is None:
        raise SeedUnavailable
    return value


# --- in process ----------------------------------------------------------------------


@dataclass(slots=True)
class _KeyState:
    req: dict[int, int] = field(default_factory=dict)  # minute -> requests
    tok: dict[int, int] = field(default_factory=dict)  # minute -> tokens
    period: str | None = None
    spent: int = 0
    #: reservation member -> (micro-USD, expiry in unix ms)
    reservations: dict[str, tuple[int, int]] = field(default_factory=dict)


class LocalLimits:
    """The spec's algorithm in one process.

    Each admission and reconciliation is one critical section with no ``await``
    inside, under a plain lock: asyncio tasks cannot interleave in it, and neither
    can threads or a second event loop (an ``asyncio.Lock`` would bind to one loop).
    Only seeding awaits, before the section.
    """

    def __init__(self, seeds: SpentSeeds | None = None) -> None:
        self.seeds = seeds or SpentSeeds()
        self._keys: dict[int, _KeyState] = {}
        self._lock = threading.Lock()

    async def admit(self, demand: Demand) -> Refusal | None:
        for _ in range(SEED_ROUNDS_LOCAL):
            try:
                with self._lock:
                    return self._admit_now(demand)
            except NeedsSeed:
                pass
            period = demand.period
            assert period is not None
            try:
                spent = await self.seeds.get(demand.key_id, period)
            except SeedUnavailable:
                demand = demand.without_budget()
                continue
            with self._lock:
                state = self._keys.setdefault(demand.key_id, _KeyState())
                if state.period is None or state.period < period.label:
                    state.period, state.spent = period.label, spent
                    state.reservations.clear()
        with self._lock:  # the period moved on twice meanwhile: skip the budget once
            return self._admit_now(demand.without_budget())

    def _admit_now(self, demand: Demand) -> Refusal | None:
        state = self._keys.setdefault(demand.key_id, _KeyState())
        minute = demand.minute
        for buckets in (state.req, state.tok):
            for old in [m for m in buckets if m < minute - 1]:
                del buckets[old]
        req = (state.req.get(minute, 0), state.req.get(minute - 1, 0))
        tok = (state.tok.get(minute, 0), state.tok.get(minute - 1, 0))
        if (
            demand.rpm is not None
            and not math_.window_admits(*req, 1, demand.rpm, demand.now_ms)
        ) or (
            demand.tpm is not None
            and not math_.window_admits(*tok, demand.tokens, demand.tpm, demand.now_ms)
        ):
            return rate_refusal(demand, req, tok)
        if demand.budget is not None:
            assert demand.period is not None
            if state.period != demand.period.label:
                raise NeedsSeed
            for member, (_, expires) in list(state.reservations.items()):
                if expires <= demand.now_ms:
                    del state.reservations[member]
            held = sum(amount for amount, _ in state.reservations.values())
            if not math_.budget_admits(state.spent, held, demand.cost, demand.budget):
                return BUDGET_REFUSAL
            expires_ms = demand.now_ms + math_.RESERVATION_TTL_SECONDS * 1000
            state.reservations[demand.member] = (demand.cost, expires_ms)
        if demand.rpm is not None:
            state.req[minute] = req[0] + 1
        if demand.tpm is not None:
            state.tok[minute] = tok[0] + demand.tokens
        return None

    def reconcile(self, demand: Demand, tokens_delta: int, cost: int) -> None:
        with self._lock:
            state = self._keys.get(demand.key_id)
            if state is None:
                return
            if demand.tpm is not None and demand.minute in state.tok:
                bucket = state.tok[demand.minute] + tokens_delta
                state.tok[demand.minute] = max(0, bucket)
            period = demand.period
            if demand.budget is not None and period and state.period == period.label:
                state.reservations.pop(demand.member, None)
                state.spent += cost


__all__ = [
    "BUDGET_REFUSAL",
    "Demand",
    "LocalLimits",
    "Refusal",
    "SeedUnavailable",
    "SharedUnavailable",
    "SpentSeeds",
    "rate_refusal",
    "read_spent_micro",
]
