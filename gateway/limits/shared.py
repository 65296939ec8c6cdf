"""Per-key limits shared by every worker through Redis (spec 08 §3.1, §6).

Keys (``<id>`` is the API key id, ``<minute>`` minutes since the epoch, ``<start>``
the period's first day, ``YYYY-MM-DD``):

* ``omniroute:rl:<id>:req:<minute>``, ``omniroute:rl:<id>:tok:<minute>``: integers,
  TTL 120 s (a bucket is read in its minute and the next one).
* ``omniroute:budget:<id>:<start>:spent``: integer micro-USD; ``…:resv``: sorted set
  of reservations ``<request id>:<micro-USD>`` scored by expiry (unix ms).  Both
  expire two days after the period ends.  ``…:seed`` is the short seeding lock.

Admission is ONE script (check rpm → tpm → budget; commit only when all pass; drop
expired reservations), so concurrent requests on any number of workers are decided
one after another.  A worker's admissions go through ``AdmitBatcher``: one thread
with its own connection sends every admission waiting at that moment in one
pipelined round trip, under a socket timeout that measures Redis alone, never the
event loop (a busy loop made the 50 ms per-call timeout fire on a Redis that answered
in 0.15 ms, and a burst was then admitted from fresh per-process counters).
The time comes from the calling worker (``now_ms``), so the
maths is the one of ``gateway.kernel.limits``; workers' clocks are assumed to agree
(NTP).  A missing ``spent`` makes the script answer "seed me": the worker takes the
seeding lock, reads the database sum (``SpentSeeds``), writes it with ``SET NX`` and
admits again; other workers wait for it briefly.  Reconciliation never creates
``spent`` or a token bucket: a key that is gone is rebuilt from the database.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import queue
import threading
import uuid
from dataclasses import dataclass
from typing import Any

import redis as redis_sync
from redis.asyncio import BlockingConnectionPool, Redis
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff
from redis.exceptions import RedisError

from gateway.kernel import limits as math_
from gateway.limits.store import (
    BUDGET_REFUSAL,
    Demand,
    Refusal,
    SeedUnavailable,
    SharedUnavailable,
    SpentSeeds,
    rate_refusal,
)

PREFIX = "omniroute"
#: how long the seeding lock is held at most, and how long others wait for it
SEED_LOCK_MS = 2000
SEED_WAIT_SECONDS = 0.02
SEED_ROUNDS = 50
#: connections per worker to Redis for admissions; a burst beyond waits for one
POOL_CONNECTIONS = 16
WARM_TIMEOUT_S = 2.0
logger = logging.getLogger("omniroute.limits")

ADMITTED, RATE_LIMITED, OVER_BUDGET, NEEDS_SEED = 0, 1, 2, 3

# KEYS: req:<minute> req:<minute-1> tok:<minute> tok:<minute-1> spent resv
# ARGV: now_ms rpm tpm E budget C member expires_ms budget_expire_at window_ttl
# rpm/tpm 0 = none; budget -1 = none.  Integer arithmetic as in engine/limits.py.
ADMIT_LUA = """
local now = tonumber(ARGV[1])
local rpm, tpm = tonumber(ARGV[2]), tonumber(ARGV[3])
local need, budget, cost = tonumber(ARGV[4]), tonumber(ARGV[5]), tonumber(ARGV[6])
local rest = 60000 - (now % 60000)
local function read(key) return tonumber(redis.call('GET', key) or '0') end
local rc, rp, tc, tp = 0, 0, 0, 0
local limited = false
if rpm > 0 then
  rc, rp = read(KEYS[1]), read(KEYS[2])
  if rc * 60000 + rp * rest + 60000 > rpm * 60000 then limited = true end
end
if tpm > 0 then
  tc, tp = read(KEYS[3]), read(KEYS[4])
  if tc * 60000 + tp * rest + need * 60000 > tpm * 60000 then limited = true end
end
if limited then return {1, rc, rp, tc, tp} end
if budget >= 0 then
  local spent = redis.call('GET', KEYS[5])
  if not spent then return {3} end
  redis.call('ZREMRANGEBYSCORE', KEYS[6], '-inf', now)
  local held = 0
  for _, member in ipairs(redis.call('ZRANGE', KEYS[6], 0, -1)) do
    held = held + tonumber(string.match(member, ':(%d+)$'))
  end
  local committed = tonumber(spent) + held
  if committed >= budget or committed + cost > budget then return {2} end
  redis.call('ZADD', KEYS[6], ARGV[8], ARGV[7])
  redis.call('EXPIREAT', KEYS[6], ARGV[9])
end
if rpm > 0 then
  redis.call('INCR', KEYS[1])
  redis.call('EXPIRE', KEYS[1], ARGV[10])
end
if tpm > 0 then
  redis.call('INCRBY', KEYS[3], need)
  redis.call('EXPIRE', KEYS[3], ARGV[10])
end
return {0}
"""

# KEYS: tok:<admission minute> spent resv ; ARGV: tokens_delta member cost
RECONCILE_LUA = """
local delta, cost = tonumber(ARGV[1]), tonumber(ARGV[3])
if delta ~= 0 and redis.call('EXISTS', KEYS[1]) == 1 then
  if redis.call('INCRBY', KEYS[1], delta) < 0 then
    redis.call('SET', KEYS[1], 0, 'KEEPTTL')
  end
end
if ARGV[2] ~= '' then redis.call('ZREM', KEYS[3], ARGV[2]) end
if cost > 0 and redis.call('EXISTS', KEYS[2]) == 1 then
  redis.call('INCRBY', KEYS[2], cost)
end
return 0
"""


def window_key(key_id: int, kind: str, minute: int) -> str:
    return f"{PREFIX}:rl:{key_id}:{kind}:{minute}"


def budget_key(key_id: int, label: str, part: str) -> str:
    return f"{PREFIX}:budget:{key_id}:{label}:{part}"


def _budget_keys(demand: Demand) -> tuple[str, str]:
    if demand.period is None:  # never touched by the scripts: budget is -1
        return (f"{PREFIX}:budget:none", f"{PREFIX}:budget:none")
    label = demand.period.label
    return budget_key(demand.key_id, label, "spent"), budget_key(
        demand.key_id, label, "resv"
    )


#: admissions sent in one pipelined round trip at most
BATCH_ADMISSIONS = 256
#: how long the loop waits for the batcher beyond the Redis timeout (a thread that
#: stopped answering): far beyond any loop lag, far below a request's patience
BATCHER_GRACE_S = 5.0


@dataclass(slots=True)
class _Admission:
    keys: list[str]
    args: list[Any]
    loop: asyncio.AbstractEventLoop
    future: asyncio.Future[list[int]]
    #: ``admit`` or ``reconcile``
    script: str = "admit"


class AdmitBatcher:
    """The admission and reconciliation scripts run from a thread of their own,
    batched: every call waiting when the thread is free goes in one pipeline (one
    round trip, executed in order, each script atomic), on a synchronous connection
    whose socket timeout is the Redis timeout.  A failed round trip fails every call
    of it with ``SharedUnavailable`` (an admission then falls back, spec 08
    §3.3)."""

    def __init__(self, url: str, timeout_s: float) -> None:
        self.url = url
        self.timeout_s = timeout_s
        self._queue: queue.SimpleQueue[_Admission | None] = queue.SimpleQueue()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self._client: redis_sync.Redis | None = None
        self._scripts: dict[str, Any] = {}

    def _ensure(self) -> None:
        if self._thread is not None and self._thread.is_alive():
            return
        with self._lock:
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(
                    target=self._run, name="omniroute-limits-admit", daemon=True
                )
                self._thread.start()

    async def submit(
        self, keys: list[str], args: list[Any], script: str = "admit"
    ) -> list[int]:
        self._ensure()
        loop = asyncio.get_running_loop()
        future: asyncio.Future[list[int]] = loop.create_future()
        self._queue.put(_Admission(keys, args, loop, future, script))
        try:
            async with asyncio.timeout(self.timeout_s + BATCHER_GRACE_S):
                return await asyncio.shield(future)
        except TimeoutError as exc:
            raise SharedUnavailable("admission batcher stalled") from exc

    def warm(self) -> None:
        """Connect and load the script (a thread's blocking call, at start-up)."""
        client = self._connect()
        client.ping()
        client.script_load(ADMIT_LUA)
        client.script_load(RECONCILE_LUA)

    def close(self) -> None:
        if self._thread is not None and self._thread.is_alive():
            self._queue.put(None)
        if self._client is not None:
            self._client.close()
            self._client = None

    def client(self) -> redis_sync.Redis:
        """The synchronous client (thread-safe: a connection pool), for a thread."""
        with self._lock:
            return self._connect()

    def _connect(self) -> redis_sync.Redis:
        if self._client is None:
            self._client = redis_sync.Redis.from_url(
                self.url,
                socket_timeout=self.timeout_s,
                socket_connect_timeout=self.timeout_s,
                retry_on_timeout=False,
            )
            self._scripts = {
                "admit": self._client.register_script(ADMIT_LUA),
                "reconcile": self._client.register_script(RECONCILE_LUA),
            }
        return self._client

    def _run(self) -> None:
        while True:
            first = self._queue.get()
            if first is None:
                return
            batch = [first]
            while len(batch) < BATCH_ADMISSIONS:
                try:
                    item = self._queue.get_nowait()
                except queue.Empty:
                    break
                if item is None:
                    self._queue.put(None)  # stop after this batch
                    break
                batch.append(item)
            self._send(batch)

    def _send(self, batch: list[_Admission]) -> None:
        try:
            client = self._connect()
            pipe = client.pipeline(transaction=False)
            for item in batch:
                self._scripts[item.script](keys=item.keys, args=item.args, client=pipe)
            replies: list[Any] = pipe.execute(raise_on_error=False)
        except (redis_sync.RedisError, OSError) as exc:
            if self._client is not None:  # a broken connection: a new one next time
                self._client.close()
                self._client = None
            failure = SharedUnavailable(type(exc).__name__)
            for item in batch:
                _resolve(item, failure)
            return
        for item, reply in zip(batch, replies, strict=True):
            if isinstance(reply, Exception):
                _resolve(item, SharedUnavailable(type(reply).__name__))
            else:
                values = reply if isinstance(reply, list) else [reply]
                _resolve(item, [int(x) for x in values if isinstance(x, int | bytes)])


def _resolve(item: _Admission, outcome: list[int] | BaseException) -> None:
    def settle() -> None:
        if item.future.done():
            return
        if isinstance(outcome, BaseException):
            item.future.set_exception(outcome)
        else:
            item.future.set_result(outcome)

    with contextlib.suppress(RuntimeError):  # a closed loop: nobody waits any more
        item.loop.call_soon_threadsafe(settle)


class RedisLimits:
    """Admission and reconciliation scripts on one Redis; one client per loop for
    reconciliation and seeding, one batching thread for admissions."""

    def __init__(self, url: str, *, timeout_s: float, seeds: SpentSeeds) -> None:
        self.url = url
        self.timeout_s = timeout_s
        self.seeds = seeds
        self._client: tuple[asyncio.AbstractEventLoop, Redis, Any, Any] | None = None
        self.batcher = AdmitBatcher(url, timeout_s)

    def _connect(self) -> tuple[Redis, Any, Any]:
        loop = asyncio.get_running_loop()
        if self._client is None or self._client[0] is not loop:
            # A bounded pool a burst waits on rather than opening a connection per
            # concurrent request: a connect inside the per-call timeout is what
            # failed a cold worker's first burst over to in-process limits.
            pool = BlockingConnectionPool.from_url(
                self.url,
                max_connections=POOL_CONNECTIONS,
                timeout=self.timeout_s,
                socket_timeout=self.timeout_s,
                socket_connect_timeout=self.timeout_s,
                retry=Retry(NoBackoff(), 0),  # a failure falls back at once (§3.3)
            )
            client = Redis(connection_pool=pool)
            self._client = (
                loop,
                client,
                client.register_script(ADMIT_LUA),
                client.register_script(RECONCILE_LUA),
            )
        return self._client[1], self._client[2], self._client[3]

    async def warm(self) -> None:
        """Open the pool's connections and load both scripts before traffic (at
        start-up, with a start-up's patience); a failure is only logged."""
        client, _, _ = self._connect()
        try:
            async with asyncio.timeout(WARM_TIMEOUT_S):
                await asyncio.gather(*(client.ping() for _ in range(POOL_CONNECTIONS)))
                await client.script_load(ADMIT_LUA)
                await client.script_load(RECONCILE_LUA)
                await asyncio.to_thread(self.batcher.warm)
        except (RedisError, OSError, TimeoutError, redis_sync.RedisError) as exc:
            logger.warning("limits: Redis not warmed at start-up (%s)", exc)

    async def admit(self, demand: Demand) -> Refusal | None:
        """Admit or refuse; ``SharedUnavailable`` when Redis failed or timed out."""
        try:
            return await self._admit(demand)
        except (RedisError, redis_sync.RedisError, OSError, TimeoutError) as exc:
            raise SharedUnavailable(type(exc).__name__) from exc

    async def reconcile(self, demand: Demand, tokens_delta: int, cost: int) -> None:
        try:
            await self._reconcile(demand, tokens_delta, cost)
        except (RedisError, redis_sync.RedisError, OSError, TimeoutError) as exc:
            raise SharedUnavailable(type(exc).__name__) from exc

    async def _admit(self, demand: Demand) -> Refusal | None:
        client, script, _ = self._connect()
        for _ in range(SEED_ROUNDS):
            reply = await self._run_admit(script, demand)
            if reply[0] != NEEDS_SEED:
                return _verdict(demand, reply)
            try:
                await self._seed(client, demand, wait=True)
            except SeedUnavailable:
                demand = demand.without_budget()
        await self._seed(client, demand, wait=False)
        return _verdict(demand, await self._run_admit(script, demand))

    async def _run_admit(self, script: Any, demand: Demand) -> list[int]:
        minute = demand.minute
        spent, resv = _budget_keys(demand)
        keys = [
            window_key(demand.key_id, "req", minute),
            window_key(demand.key_id, "req", minute - 1),
            window_key(demand.key_id, "tok", minute),
            window_key(demand.key_id, "tok", minute - 1),
            spent,
            resv,
        ]
        args = [
            demand.now_ms,
            demand.rpm or 0,
            demand.tpm or 0,
            demand.tokens,
            demand.budget if demand.budget is not None else -1,
            demand.cost,
            demand.member,
            demand.now_ms + math_.RESERVATION_TTL_SECONDS * 1000,
            demand.period.expire_at if demand.period is not None else 0,
            math_.WINDOW_TTL_SECONDS,
        ]
        return await self.batcher.submit(keys, args)

    async def _seed(self, client: Redis, demand: Demand, *, wait: bool) -> None:
        """Write ``spent`` from the database unless another worker is doing it.
        The Redis calls run on the batcher's synchronous connection in a thread, so
        their timeout measures Redis, not this loop (a burst seeds under load)."""
        if demand.period is None:
            return
        spent, _ = _budget_keys(demand)
        lock = budget_key(demand.key_id, demand.period.label, "seed")
        token = uuid.uuid4().hex
        sync = self.batcher.client()
        held = await asyncio.to_thread(sync.set, lock, token, nx=True, px=SEED_LOCK_MS)
        if not held and wait:
            await asyncio.sleep(SEED_WAIT_SECONDS)
            return
        try:
            value = await self.seeds.get(demand.key_id, demand.period)
            await asyncio.to_thread(
                sync.set, spent, value, nx=True, exat=demand.period.expire_at
            )
        finally:
            if held:
                await asyncio.to_thread(sync.delete, lock)

    async def _reconcile(self, demand: Demand, tokens_delta: int, cost: int) -> None:
        """Through the batcher too: a busy loop must not fail it (a failed
        reconciliation also backs admissions off to the local limits)."""
        spent, resv = _budget_keys(demand)
        keys = [window_key(demand.key_id, "tok", demand.minute), spent, resv]
        member = demand.member if demand.budget is not None else ""
        await self.batcher.submit(keys, [tokens_delta, member, cost], "reconcile")

    async def aclose(self) -> None:
        self.batcher.close()
        if self._client is not None:
            client, self._client = self._client[1], None
            await client.aclose()


def _verdict(demand: Demand, reply: list[int]) -> Refusal | None:
    if reply[0] == ADMITTED:
        return None
    if reply[0] == RATE_LIMITED:
        return rate_refusal(demand, (reply[1], reply[2]), (reply[3], reply[4]))
    if reply[0] == OVER_BUDGET:
        return BUDGET_REFUSAL
    raise SharedUnavailable("spent stayed unseeded")


__all__ = ["RedisLimits", "budget_key", "window_key"]
