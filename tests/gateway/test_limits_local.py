"""Per-key limits in process (spec 08 §6): exact admission, reconcile, expiry, seeding.

Every test drives a ``Limiter`` with an in-process store and an injected clock; the
database seeding test alone reads real ``RequestLog`` rows.
"""

from __future__ import annotations

import asyncio
import threading
import time
import uuid
from datetime import UTC, datetime, timedelta
from decimal import Decimal

import pytest
from django.db import connections

from gateway.kernel.limits import budget_period, minute_of
from gateway.kernel.types import KeyPolicy
from gateway.limits.admission import Limiter, Ticket, applies
from gateway.limits.store import (
    Demand,
    LocalLimits,
    Refusal,
    SpentSeeds,
    read_spent_micro,
)
from gateway.pipeline.record import RunRecord
from tests.engine.conftest import build_table

NOW = datetime(2026, 3, 18, 12, 0, 15, tzinfo=UTC).timestamp()  # 15 s into a minute
PERIOD = budget_period("month", NOW)


class Clock:
    def __init__(self, now: float = NOW) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def seeds_returning(micro: int, reads: list[int] | None = None) -> SpentSeeds:
    def read(key_id: int, period) -> int:
        if reads is not None:
            reads.append(key_id)
        time.sleep(0.02)  # a real DB read: every concurrent admission waits on it
        return micro

    return SpentSeeds(read=read)


def make_limiter(seed_micro: int = 0, reads: list[int] | None = None) -> Limiter:
    return Limiter(local=LocalLimits(seeds_returning(seed_micro, reads)), clock=Clock())


def demand(**fields) -> Demand:
    fields.setdefault("key_id", 7)
    fields.setdefault("request_id", uuid.uuid4().hex)
    fields.setdefault("now_ms", int(NOW * 1000))
    if fields.get("budget") is not None:
        fields.setdefault("period", PERIOD)
    return Demand(**fields)


async def admit_concurrently(gate: Limiter, count: int, **fields) -> list:
    return await asyncio.gather(*(gate.admit(demand(**fields)) for _ in range(count)))


def admitted(verdicts) -> int:
    return sum(isinstance(v, Ticket) for v in verdicts)


def record(prompt: int = 0, completion: int = 0, cost: str | None = None) -> RunRecord:
    run = RunRecord.start(uuid.uuid4(), "/v1/chat/completions", KEY, 1, NOW, 0.0)
    run.prompt_tokens, run.completion_tokens = prompt, completion
    run.cost = Decimal(cost) if cost is not None else None
    return run


KEY = KeyPolicy(id=7, name="k", prefix="sk-omni-k")


# --- exact admission under concurrency -----------------------------------------------


async def test_fifty_concurrent_requests_against_rpm_10_admit_exactly_10():
    verdicts = await admit_concurrently(make_limiter(), 50, rpm=10)
    assert admitted(verdicts) == 10
    refused = [v for v in verdicts if isinstance(v, Refusal)]
    assert {(r.status, r.code, r.error_type) for r in refused} == {
        (429, "key_rate_limited", "rate_limit_error")
    }
    # 10 in this minute, none before: the window frees up once the minute has slid
    # to where 10 × (60 − s)/60 ≤ 9, i.e. 6 s into the next minute (45 s + 6 s)
    assert {r.retry_after_s for r in refused} == {51}


async def test_fifty_concurrent_requests_against_tpm_1000_with_e_300_admit_exactly_3():
    verdicts = await admit_concurrently(make_limiter(), 50, tpm=1000, tokens=300)
    assert admitted(verdicts) == 3


async def test_budget_is_never_exceeded_by_concurrent_reservations():
    reads: list[int] = []
    gate = make_limiter(seed_micro=100, reads=reads)
    verdicts = await admit_concurrently(gate, 50, budget=1000, cost=300)
    # 100 spent + 3 × 300 reserved = 1000; a fourth would make it 1300
    assert admitted(verdicts) == 3
    refused = [v for v in verdicts if isinstance(v, Refusal)]
    assert {(r.status, r.code, r.error_type) for r in refused} == {
        (402, "budget_exceeded", "budget_error")
    }
    assert all(r.retry_after_s is None for r in refused)
    assert reads == [7]  # one database read for all fifty first admissions


async def test_checks_run_in_order_rpm_then_tpm_then_budget():
    gate = make_limiter(seed_micro=10_000)
    # over budget and over tpm: the rate limit answers first
    refused = await gate.admit(demand(rpm=5, tpm=100, tokens=200, budget=1, cost=5))
    assert isinstance(refused, Refusal)
    assert refused.status == 429
    refused = await gate.admit(demand(rpm=5, budget=1, cost=5))
    assert isinstance(refused, Refusal)
    assert refused.status == 402


async def test_a_refused_request_counts_nowhere():
    gate = make_limiter(seed_micro=0)
    for _ in range(5):
        refused = await gate.admit(demand(rpm=10, tpm=1000, tokens=100, budget=0))
        assert isinstance(refused, Refusal)
    assert admitted(await admit_concurrently(gate, 20, rpm=10)) == 10


async def test_retry_after_covers_both_windows():
    gate = make_limiter()
    first = await gate.admit(demand(rpm=10, tpm=1000, tokens=1000))
    assert isinstance(first, Ticket)
    refused = await gate.admit(demand(rpm=10, tpm=1000, tokens=1000))
    assert isinstance(refused, Refusal)
    # tpm: the 1000 tokens of this minute must have slid out completely: 45 s to
    # the boundary, then the whole next minute
    assert refused.retry_after_s == 105


async def test_a_window_admits_again_as_the_minute_slides():
    gate = make_limiter()
    now_ms = int(NOW * 1000)
    assert admitted(await admit_concurrently(gate, 3, rpm=2, now_ms=now_ms)) == 2
    refused = await gate.admit(demand(rpm=2, now_ms=now_ms))
    assert isinstance(refused, Refusal)
    later = now_ms + refused.retry_after_s * 1000
    assert isinstance(await gate.admit(demand(rpm=2, now_ms=later - 1000)), Refusal)
    assert isinstance(await gate.admit(demand(rpm=2, now_ms=later)), Ticket)


# --- reconcile ------------------------------------------------------------------------


async def test_reconcile_moves_actual_minus_estimate_into_the_admission_minute():
    gate = make_limiter()
    ticket = await gate.admit(demand(tpm=1000, tokens=600))
    assert isinstance(ticket, Ticket)
    assert isinstance(await gate.admit(demand(tpm=1000, tokens=600)), Refusal)
    ticket(record(prompt=50, completion=50))  # 100 used instead of 600
    assert admitted(await admit_concurrently(gate, 5, tpm=1000, tokens=300)) == 3
    assert gate.local._keys[7].tok[minute_of(int(NOW * 1000))] == 1000


async def test_reconcile_floors_the_bucket_at_zero():
    gate = make_limiter()
    ticket = await gate.admit(demand(tpm=1000, tokens=300))
    assert isinstance(ticket, Ticket)
    gate.local._keys[7].tok[minute_of(int(NOW * 1000))] = 100  # the bucket was aged
    ticket(record(prompt=0, completion=0))
    assert gate.local._keys[7].tok[minute_of(int(NOW * 1000))] == 0


async def test_reconcile_releases_the_reservation_and_adds_the_billed_cost():
    gate = make_limiter(seed_micro=100)
    ticket = await gate.admit(demand(budget=1000, cost=800))
    assert isinstance(ticket, Ticket)
    assert isinstance(await gate.admit(demand(budget=1000, cost=200)), Refusal)
    ticket(record(cost="0.000250"))  # billed 250 micro-USD of the 800 reserved
    state = gate.local._keys[7]
    assert (state.spent, state.reservations) == (350, {})
    assert isinstance(await gate.admit(demand(budget=1000, cost=650)), Ticket)
    assert isinstance(await gate.admit(demand(budget=1000, cost=1)), Refusal)


async def test_a_ticket_reconciles_once():
    gate = make_limiter(seed_micro=0)
    ticket = await gate.admit(demand(budget=1000, cost=10))
    assert isinstance(ticket, Ticket)
    run = record(cost="0.000100")
    gate.track(ticket, run)
    assert run.limits is ticket
    assert gate.open == {ticket}
    ticket(run)
    ticket(run)
    assert gate.local._keys[7].spent == 100
    assert gate.open == set()


async def test_shutdown_reconciles_open_reservations_with_usage_so_far():
    gate = make_limiter(seed_micro=0)
    ticket = await gate.admit(demand(budget=1000, cost=500))
    assert isinstance(ticket, Ticket)
    run = record(cost="0.000040")
    gate.track(ticket, run)
    await gate.shutdown()
    assert (gate.local._keys[7].spent, gate.local._keys[7].reservations) == (40, {})


async def test_an_expired_reservation_no_longer_counts():
    gate = make_limiter(seed_micro=0)
    now_ms = int(NOW * 1000)
    crashed = await gate.admit(demand(budget=1000, cost=600, now_ms=now_ms))
    assert isinstance(crashed, Ticket)  # ... and never reconciled
    fourteen = now_ms + 14 * 60_000
    assert isinstance(
        await gate.admit(demand(budget=1000, cost=600, now_ms=fourteen)), Refusal
    )
    fifteen = now_ms + 15 * 60_000
    assert isinstance(
        await gate.admit(demand(budget=1000, cost=600, now_ms=fifteen)), Ticket
    )


# --- seeding and periods --------------------------------------------------------------


async def test_a_new_period_is_seeded_again():
    reads: list[int] = []
    gate = make_limiter(seed_micro=900, reads=reads)
    assert isinstance(await gate.admit(demand(budget=1000, cost=200)), Refusal)
    next_month = budget_period("month", PERIOD.end.timestamp())
    ticket = await gate.admit(
        demand(
            budget=1000,
            cost=200,
            period=next_month,
            now_ms=int(next_month.start.timestamp() * 1000),
        )
    )
    # the seed of the new month is 900 as well (the fake reads the same sum)
    assert isinstance(ticket, Refusal)
    assert len(reads) == 2


async def test_a_failed_seed_skips_only_the_budget_check():
    def broken(key_id: int, period) -> int:
        raise ConnectionError("database away")

    gate = Limiter(local=LocalLimits(SpentSeeds(read=broken)), clock=Clock())
    verdicts = await admit_concurrently(gate, 5, rpm=3, budget=0, cost=10)
    assert admitted(verdicts) == 3  # rpm still holds; the budget is not known


def test_keys_without_limits_skip_the_limiter():
    assert not applies(KEY)
    assert applies(KeyPolicy(id=1, name="a", prefix="p", rpm=1))
    assert applies(KeyPolicy(id=1, name="a", prefix="p", tpm=1))
    assert applies(KeyPolicy(id=1, name="a", prefix="p", budget_usd=0))


async def test_demand_estimates_tokens_and_cost_over_the_chain(settings):
    settings.OMNIROUTE_RESERVE_COMPLETION_TOKENS = 100
    from gateway.kernel.chain import EntrySpec, build_chain

    table = build_table(
        {
            "pa": {"models": [{"model_id": "m1", "input_cost": 1.0, "output_cost": 2}]},
            "pb": {"models": [{"model_id": "m2", "input_cost": 3.0, "output_cost": 1}]},
        }
    )
    key = KeyPolicy(
        id=3, name="k", prefix="p", tpm=50, budget_usd=0.5, budget_period="day"
    )
    chain = build_chain(
        table,
        key,
        (EntrySpec(model="pa/m1", param="model"), EntrySpec(model="pb/m2", param="x")),
        explicit=True,
        warnings=[],
    )
    gate = make_limiter()
    body = {"messages": [{"role": "user", "content": "hi"}]}  # R_in 9
    found = gate.demand(table, key, uuid.UUID(int=5), body, chain)
    assert (found.tokens, found.cost, found.budget) == (50, 9 * 3 + 100 * 2, 500_000)
    assert found.period == budget_period("day", NOW)
    assert found.member == f"{uuid.UUID(int=5).hex}:227"
    bare = gate.demand(
        table,
        KeyPolicy(id=3, name="k", prefix="p", rpm=1),
        uuid.UUID(int=6),
        body,
        chain,
    )
    assert (bare.tokens, bare.cost, bare.budget, bare.period) == (0, 0, None, None)


# --- seeding from the request log -----------------------------------------------------


def _log(key_id: int, created: datetime, cost: str | None) -> None:
    from telemetry.models import RequestLog

    RequestLog.objects.create(
        created_at=created,
        api_key_id=key_id,
        endpoint="/v1/chat/completions",
        status="success" if cost else "refused",
        http_status=200 if cost else 429,
        cost_usd=Decimal(cost) if cost else None,
    )


@pytest.mark.django_db(transaction=True)
async def test_spent_is_seeded_from_the_request_log_sum_of_the_period():
    from asgiref.sync import sync_to_async

    start = PERIOD.start

    def rows() -> None:
        try:
            _log(41, start + timedelta(days=2), "0.0012345")
            _log(41, start + timedelta(days=5), "0.5")
            _log(41, start + timedelta(days=5), None)  # refused: no cost
            _log(41, start - timedelta(seconds=1), "9")  # the previous month
            _log(42, start + timedelta(days=1), "9")  # another key
        finally:
            connections.close_all()  # an open one would block the DB teardown

    await sync_to_async(rows)()
    seeds = SpentSeeds()
    assert await seeds.get(41, PERIOD) == 501_235  # 0.5012345 USD
    assert await seeds.get(43, PERIOD) == 0
    gate = Limiter(local=LocalLimits(seeds), clock=Clock())
    verdict = await gate.admit(demand(key_id=41, budget=501_235 + 100, cost=100))
    assert isinstance(verdict, Ticket)
    assert isinstance(
        await gate.admit(demand(key_id=41, budget=501_335, cost=1)), Refusal
    )


@pytest.mark.django_db
def test_read_spent_micro_is_zero_without_rows():
    assert read_spent_micro(99, PERIOD) == 0


def test_the_local_store_is_safe_across_threads():
    gate = make_limiter()
    results: list[object] = []

    def worker() -> None:
        results.extend(asyncio.run(admit_concurrently(gate, 10, rpm=10, key_id=8)))

    threads = [threading.Thread(target=worker) for _ in range(5)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert admitted(results) == 10


async def test_tickets_never_reconciled_are_forgotten_after_fifteen_minutes():
    gate = make_limiter()
    t0 = int(NOW * 1000)
    lost = await gate.admit(demand(rpm=100, now_ms=t0))
    assert isinstance(lost, Ticket)
    gate.track(lost, record())
    later = await gate.admit(demand(rpm=100, now_ms=t0 + 16 * 60_000))
    assert isinstance(later, Ticket)
    gate.track(later, record())
    assert gate.open == {later}


# --- the hook in the pipeline ---------------------------------------------------------

BODY = b'{"model": "pa/m1", "messages": [{"role": "user", "content": "hi"}]}'


def _context(records: list):
    from gateway.pipeline.context import ChatContext

    return ChatContext(
        endpoint="/v1/chat/completions",
        headers={},
        table=build_table({"pa": ["m1"]}),
        record=records.append,
    )


async def test_a_request_that_dies_before_its_record_is_still_reconciled(monkeypatch):
    from gateway.inbound.base import serve
    from gateway.inbound.chat import WIRE
    from gateway.limits import admission as limits
    from gateway.pipeline import handle

    async def cancelled(run):
        raise asyncio.CancelledError

    monkeypatch.setattr(handle, "run_chain", cancelled)
    key = KeyPolicy(id=424_242, name="k", prefix="p", rpm=5, tpm=10_000)
    records: list = []
    with pytest.raises(asyncio.CancelledError):
        await serve(WIRE, BODY, _context(records), key)
    gate = limits.limiter()
    assert records == []  # no record reached the front door ...
    assert not [t for t in gate.open if t.demand.key_id == 424_242]
    state = gate.local._keys[424_242]
    # ... yet the request's E left the token bucket again (it stays counted in rpm)
    assert list(state.tok.values()) == [0]
    assert list(state.req.values()) == [1]


async def test_a_key_without_limits_never_reaches_the_limiter(monkeypatch):
    from gateway.inbound.base import serve
    from gateway.inbound.chat import WIRE
    from gateway.limits import admission as limits
    from gateway.pipeline import handle
    from gateway.pipeline.result import Answer

    async def must_not_run(*args, **kwargs):
        raise AssertionError("the limiter was called")

    async def served(run):
        return Answer(completion={}, report={})

    monkeypatch.setattr(limits, "admit_request", must_not_run)
    monkeypatch.setattr(handle, "run_chain", served)
    reply = await serve(WIRE, BODY, _context([]), KEY)
    assert reply.status == 200


async def test_a_client_gone_during_admission_gets_its_reservation_back(monkeypatch):
    from gateway.inbound.base import serve
    from gateway.inbound.chat import WIRE
    from gateway.limits import admission as limits

    gate = limits.limiter()
    entered, finish = asyncio.Event(), asyncio.Event()
    real_admit = gate.admit

    async def slow_admit(given):
        entered.set()
        await finish.wait()  # the admission script still running in Redis
        return await real_admit(given)

    monkeypatch.setattr(gate, "admit", slow_admit)
    key = KeyPolicy(id=434_343, name="k", prefix="p", rpm=5, tpm=10_000, budget_usd=1)
    request = asyncio.ensure_future(serve(WIRE, BODY, _context([]), key))
    await entered.wait()
    request.cancel()  # the client disconnects ...
    with pytest.raises(asyncio.CancelledError):
        await request
    finish.set()  # ... and the admission lands afterwards
    for _ in range(10):
        await asyncio.sleep(0)
    await gate.drain()

    state = gate.local._keys[434_343]
    assert list(state.req.values()) == [1]  # the request counts in rpm
    assert list(state.tok.values()) == [0]  # its token estimate is handed back
    assert state.reservations == {}  # and so is its budget reservation
    assert not [t for t in gate.open if t.demand.key_id == 434_343]
