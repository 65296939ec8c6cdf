"""Target stats shared by every worker through Redis (spec 03 §8.7, 08 §3.1-3.2).

``SharedTargetStats`` keeps the in-process ``TargetStats`` exactly as without Redis
(this node's view, and the fallback) and adds the same counts to Redis, so that
``least-used`` and ``p2c`` see every worker's calls.

Keys, under the link's namespace (``omniroute:`` in production):

* ``tstat:<target key>:if`` - in-flight calls, a hash with one field per worker:
  ``<worker token>`` -> ``"<count>|<unix ms>"``, the worker's own exact count when it
  last changed (or was refreshed, every minute while calls run).  Readers add the
  fields written in the last 10 minutes (spec 03 §8.7's safety bound), so a crashed
  worker's calls stop counting 10 minutes later even while other workers keep the
  target busy, and a lost write never drifts the sum: the next one replaces it;
* ``tstat:<target key>:<epoch minute>`` - a hash with ``calls``, ``successes``,
  ``failures`` and ``latency_ms_sum`` (HINCRBY / HINCRBYFLOAT), kept 11 minutes.

Writes never wait on Redis: ``started`` / ``finished`` update the local stats and
add their deltas to a pending batch (coalesced per target and minute, at most
``MAX_PENDING`` entries; past that a write is dropped and counted as a
``target_stats`` fallback).  A daemon thread takes the whole batch whenever there is
one and sends it as one non-transactional pipeline through ``link.call``: an error
backs the link off like any Redis call, and the batch is dropped (never merged
back: the state is soft; in-flight counts are absolute, so the next write repairs
them).

``snapshot_many`` is the shared view: one script reads every target's in-flight hash
(the other workers' fresh fields) and its last 10 minute hashes in one round trip;
this worker adds its own exact in-flight count and its bucket deltas not yet
acknowledged by Redis (so a burst on one worker sees its own calls at once; for the
instant between Redis applying a batch and the writer noting it, that batch's bucket
counts count twice, which errs towards spreading load).  While Redis is down or
backed off it answers the local ``snapshot_many``.  ``snapshot`` stays the local view.
A crashed worker's field stays in the hash (ignored once 10 minutes old) until the key
expires, 10 minutes after the target's last in-flight write.
"""

from __future__ import annotations

import logging
import secrets
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from providers.target_stats_local import (
    WINDOW_MINUTES,
    Minute,
    TargetSnapshot,
    TargetStats,
    minute_of,
    of_connection,
    window_start,
)

if TYPE_CHECKING:
    from providers.redis_store import Client, RedisLink

logger = logging.getLogger(__name__)

OP = "target_stats"  # omniroute_shared_state_fallbacks_total{op}
KEY_PREFIX = "tstat:"
Snapshots = dict[str, "TargetSnapshot"]
IN_FLIGHT_TTL_MS = 10 * 60 * 1000  # spec 03 §8.7: 10 min safety TTL
REFRESH_SECONDS = 60.0  # running calls' counts are written again this often
BUCKET_TTL_MS = (WINDOW_MINUTES + 1) * 60 * 1000  # the window plus the current minute
MAX_PENDING = 10_000  # targets plus (target, minute) buckets awaiting the writer
STOP_TIMEOUT_SECONDS = 5.0
_FIELDS = ("calls", "successes", "failures", "latency_ms_sum")

#: KEYS: per target, its in-flight hash then its ARGV[1] minute hashes.  ARGV[2]:
#: the reader's token (its own field is skipped: it adds its exact count), ARGV[3]:
#: the oldest fresh write (unix ms).
#: -> per target: in_flight, calls, successes, failures, latency_ms_sum (a string:
#: a Lua number in a reply is truncated to an integer)
READ_SCRIPT = """
local width = tonumber(ARGV[1]) + 1
local oldest = tonumber(ARGV[3])
local out = {}
for i = 1, #KEYS, width do
  local in_flight = 0
  local fields = redis.call('HGETALL', KEYS[i])
  for f = 1, #fields, 2 do
    if fields[f] ~= ARGV[2] then
      local sep = string.find(fields[f + 1], '|', 1, true)
      if sep then
        local count = tonumber(string.sub(fields[f + 1], 1, sep - 1)) or 0
        local at = tonumber(string.sub(fields[f + 1], sep + 1)) or 0
        if at >= oldest and count > 0 then
          in_flight = in_flight + count
        end
      end
    end
  end
  local calls, successes, failures, latency = 0, 0, 0, 0
  for j = i + 1, i + width - 1 do
    local f = redis.call('HMGET', KEYS[j], 'calls', 'successes', 'failures',
                         'latency_ms_sum')
    calls = calls + (tonumber(f[1]) or 0)
    successes = successes + (tonumber(f[2]) or 0)
    failures = failures + (tonumber(f[3]) or 0)
    latency = latency + (tonumber(f[4]) or 0)
  end
  out[#out + 1] = math.max(in_flight, 0)
  out[#out + 1] = calls
  out[#out + 1] = successes
  out[#out + 1] = failures
  out[#out + 1] = tostring(latency)
end
return out
"""


@dataclass(slots=True)
class _Batch:
    """What is not yet in Redis: the targets whose in-flight count changed (with
    the time of the change), bucket increments per (target, minute)."""

    in_flight: dict[str, float] = field(default_factory=dict)
    buckets: dict[tuple[str, int], Minute] = field(default_factory=dict)

    def __bool__(self) -> bool:
        return bool(self.in_flight or self.buckets)

    def add_in_flight(self, key: str, now: float) -> bool:
        if key not in self.in_flight and len(self.in_flight) >= MAX_PENDING:
            return False
        self.in_flight[key] = now
        return True

    def bucket(self, key: str, minute: int) -> Minute | None:
        found = self.buckets.get((key, minute))
        if found is None:
            if len(self.buckets) >= MAX_PENDING:
                return None
            found = self.buckets[(key, minute)] = Minute(minute)
        return found

    def totals(self, key: str, oldest: int) -> tuple[int, int, int, float]:
        calls = successes = failures = 0
        latency = 0.0
        for (target, minute), b in self.buckets.items():
            if target == key and minute >= oldest:
                calls += b.calls
                successes += b.successes
                failures += b.failures
                latency += b.latency_ms_sum
        return calls, successes, failures, latency


class SharedTargetStats(TargetStats):
    """``TargetStats`` whose ``snapshot_many`` counts every worker (Redis)."""

    def __init__(self, link: RedisLink) -> None:
        super().__init__()
        self.link = link
        self._pending = _Batch()
        self._sending = _Batch()
        self._idle = threading.Condition(self._lock)  # pending and sending empty
        self._wake = threading.Event()
        self._stopping = False
        self._thread: threading.Thread | None = None
        self._read = link.client.register_script(READ_SCRIPT)
        #: this worker's field in every in-flight hash
        self.token = secrets.token_hex(8)
        self._refreshed_at = time.monotonic()

    # ------------------------------------------------------------- key layout

    def in_flight_key(self, key: str) -> str:
        return self.link.key(f"{KEY_PREFIX}{key}:if")

    def bucket_key(self, key: str, minute: int) -> str:
        return self.link.key(f"{KEY_PREFIX}{key}:{minute}")

    # ------------------------------------------------------------- writes

    def started(self, key: str, now: float) -> None:
        super().started(key, now)
        with self._lock:
            if self._stopping:
                return
            bucket = self._pending.bucket(key, minute_of(now))
            if bucket is not None:
                bucket.calls += 1
            kept = self._pending.add_in_flight(key, now) and bucket is not None
        self._queued(kept)

    def finished(
        self, key: str, now: float, *, success: bool | None, latency_ms: float = 0.0
    ) -> None:
        super().finished(key, now, success=success, latency_ms=latency_ms)
        with self._lock:
            if self._stopping:
                return
            kept = self._pending.add_in_flight(key, now)
            if success is not None:
                bucket = self._pending.bucket(key, minute_of(now))
                if bucket is None:
                    kept = False
                elif success:
                    bucket.successes += 1
                    bucket.latency_ms_sum += latency_ms
                else:
                    bucket.failures += 1
        self._queued(kept)

    def _queued(self, kept: bool) -> None:
        if not kept:
            self.link.observer.fallback(OP)  # the batch is full: this write is lost
        thread = self._thread
        if thread is None or not thread.is_alive():
            self._start_writer()
        self._wake.set()

    def forget(self, provider: str, connection: str) -> None:
        """Also every worker's minute buckets in Redis (admin path, synchronous)."""
        from providers.redis_store import glob_escape

        super().forget(provider, connection)
        with self._lock:  # unsent counts too (a batch in flight may still land)
            buckets = self._pending.buckets
            for target, minute in list(buckets):
                if of_connection(target, provider, connection):
                    del buckets[(target, minute)]
        pattern = self.link.key(
            f"{KEY_PREFIX}{glob_escape(provider)}/*@{glob_escape(connection)}:*"
        )
        suffix = f"@{connection}".encode()

        def remote(client: Client) -> None:
            buckets = [
                raw
                for raw in client.scan_iter(match=pattern, count=1000)
                if not raw.endswith(b":if") and raw.rpartition(b":")[0].endswith(suffix)
            ]
            if buckets:
                client.delete(*buckets)

        self.link.call(OP, remote, lambda: None)

    # ------------------------------------------------------------- reads

    def snapshot_many(
        self, keys: Iterable[str], now: float
    ) -> dict[str, TargetSnapshot]:
        """Every worker's counts, in one round trip; the local view without Redis."""
        wanted = list(dict.fromkeys(keys))
        if not wanted:
            return {}
        fulls = self._read_keys(wanted, now)

        def remote(client: Client) -> dict[str, TargetSnapshot]:
            reply = self._read(keys=fulls, args=self._read_args(now), client=client)
            return self._with_unsent(wanted, reply, now)

        return self.link.call(
            OP, remote, lambda: TargetStats.snapshot_many(self, wanted, now)
        )

    def queue_snapshot(
        self, pipe: Any, keys: Iterable[str], now: float
    ) -> tuple[
        Callable[[Any], dict[str, TargetSnapshot]],
        Callable[[], dict[str, TargetSnapshot]],
    ]:
        """``snapshot_many`` as one command queued in someone else's pipeline (the
        combo planner reads its records along): ``(parse(reply), local())``.  Plain
        EVAL, since a pipeline with a registered script checks SCRIPT EXISTS first,
        one more round trip."""
        wanted = list(dict.fromkeys(keys))
        fulls = self._read_keys(wanted, now)
        pipe.eval(READ_SCRIPT, len(fulls), *fulls, *self._read_args(now))
        return (
            lambda reply: self._with_unsent(wanted, reply, now),
            lambda: TargetStats.snapshot_many(self, wanted, now),
        )

    def _read_args(self, now: float) -> list[Any]:
        oldest_ms = int((now * 1000) - IN_FLIGHT_TTL_MS)
        return [WINDOW_MINUTES, self.token, oldest_ms]

    def _read_keys(self, wanted: list[str], now: float) -> list[str]:
        current = minute_of(now)
        fulls: list[str] = []
        for key in wanted:
            fulls.append(self.in_flight_key(key))
            fulls.extend(
                self.bucket_key(key, current - age) for age in range(WINDOW_MINUTES)
            )
        return fulls

    def _with_unsent(
        self, wanted: list[str], reply: list[Any], now: float
    ) -> dict[str, TargetSnapshot]:
        oldest = window_start(now)
        found: dict[str, TargetSnapshot] = {}
        with self._lock:
            for index, key in enumerate(wanted):
                row = reply[index * 5 : index * 5 + 5]
                totals = [int(row[1]), int(row[2]), int(row[3])]
                latency = float(row[4])
                for batch in (self._pending, self._sending):
                    extra = batch.totals(key, oldest)
                    totals = [a + b for a, b in zip(totals, extra[:3], strict=True)]
                    latency += extra[3]
                mine = self._targets.get(key)
                found[key] = TargetSnapshot(
                    in_flight=max(0, int(row[0])) + (mine.in_flight if mine else 0),
                    calls=totals[0],
                    successes=totals[1],
                    failures=totals[2],
                    success_latency_ms_sum=latency,
                )
        return found

    # ------------------------------------------------------------- the writer

    def _start_writer(self) -> None:
        with self._lock:
            thread = self._thread
            if self._stopping or (thread is not None and thread.is_alive()):
                return
            self._thread = threading.Thread(
                target=self._run, name="omniroute-target-stats-writer", daemon=True
            )
            self._thread.start()

    def _run(self) -> None:
        while not self._stopping:
            self._wake.wait(REFRESH_SECONDS)
            self._wake.clear()
            self._refresh_running()
            self.send_pending()
        self.send_pending()  # what came in before ``stop()``; nothing comes after

    def _refresh_running(self) -> None:
        """Every ``REFRESH_SECONDS``: write the counts of calls still running again,
        so a long call is not taken for a crashed worker's."""
        if time.monotonic() - self._refreshed_at < REFRESH_SECONDS:
            return
        self._refreshed_at = time.monotonic()
        now = time.time()
        with self._lock:
            for key, target in self._targets.items():
                if target.in_flight > 0:
                    self._pending.add_in_flight(key, now)

    def send_pending(self) -> None:
        """Send the pending batch now (the writer thread); never raises."""
        with self._lock:
            batch, self._pending = self._pending, _Batch()
            self._sending = batch
            counts = {
                key: target.in_flight if (target := self._targets.get(key)) else 0
                for key in batch.in_flight
            }
        try:
            if batch:
                self.link.call(OP, lambda c: self._send(c, batch, counts), lambda: None)
        except Exception:
            # Not a Redis error (those fail over inside the call): a bug must not
            # end the writer, and the batch is dropped like any failed write.
            logger.exception("target stats: writing to Redis failed")
        finally:
            with self._lock:
                self._sending = _Batch()
                if not self._pending:
                    self._idle.notify_all()

    def _send(self, client: Client, batch: _Batch, counts: dict[str, int]) -> None:
        with client.pipeline(transaction=False) as pipe:
            for key, at in batch.in_flight.items():
                full = self.in_flight_key(key)
                count = counts.get(key, 0)
                if count > 0:
                    pipe.hset(full, self.token, f"{count}|{int(at * 1000)}")
                    pipe.pexpire(full, IN_FLIGHT_TTL_MS)
                else:
                    pipe.hdel(full, self.token)
            for (key, minute), bucket in batch.buckets.items():
                full = self.bucket_key(key, minute)
                for name in _FIELDS[:3]:
                    count = getattr(bucket, name)
                    if count:
                        pipe.hincrby(full, name, count)
                if bucket.latency_ms_sum:
                    pipe.hincrbyfloat(full, "latency_ms_sum", bucket.latency_ms_sum)
                pipe.pexpire(full, BUCKET_TTL_MS)
            pipe.execute()

    def flush(self, timeout_s: float = STOP_TIMEOUT_SECONDS) -> bool:
        """Wait until every write so far has been sent (or dropped); tests."""
        self._wake.set()
        with self._idle:
            return self._idle.wait_for(
                lambda: not self._pending and not self._sending, timeout_s
            )

    def stop(self, timeout_s: float = STOP_TIMEOUT_SECONDS) -> None:
        """Send what is pending and end the writer (shutdown, after the drain, so
        the in-flight decrements reach Redis).  Later writes stay local only."""
        with self._lock:
            self._stopping = True
            thread = self._thread
        self._wake.set()
        if thread is not None and thread.is_alive():
            thread.join(timeout_s)
        else:
            self.send_pending()
