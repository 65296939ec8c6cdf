"""The health mirror (spec 08 §3.2): health state read from memory, shared by Redis.

Keys starting ``breaker:``, ``cooldown:``, ``auth:`` or ``lock:`` (the health state
of spec 03 §8.1–8.4) are *mirrored*: every worker reads them from a process-local
copy, so ``skip_reason`` never waits on the network.  Every other key goes straight
to the ``RedisStore``.

* **Write.** A write is one Lua script that stores the value, bumps the counter
  ``health:seq``, records the key in the set ``health:keys`` and publishes
  ``<epoch> <seq> {"k", "t", "v"}`` on the channel ``state``.  Publishing inside the
  atomic step makes messages arrive in commit order.  The writer then applies its
  own result to its mirror at once.
* **Update** is a compare-and-set loop: ``fn`` runs on the mirror's value and the
  script writes only if Redis still holds exactly that value; otherwise it answers
  the current one and ``fn`` runs again on it.  One round trip while the mirror is
  current, so no update is lost and a breaker outcome costs one call, not three.
* **Apply.** A value reaches the mirror only when its ``seq`` is above the key's last
  one, so a late message never overwrites a newer value.  While a key has outcomes
  written behind (``update_behind``) that Redis has not confirmed, the mirror keeps
  the worker's own optimistic value and Redis's newest value is held back until the
  last of them is confirmed, so the worker never sees its own outcomes undone.
* **Resync.** Every 5 s, and on every (re)subscription or recovery, one script returns
  the whole health state with the current ``seq`` S, atomically: keys last applied at
  or below S are replaced, and mirrored keys missing from Redis are dropped.
* **Epoch.** The first write into an empty Redis sets ``health:epoch`` to a random
  token; a new token (Redis restarted or flushed) resets every ``seq``.
* **Fail open.** While Redis is unreachable mirrored keys are read and written in the
  mirror alone, which is then the worker's local state (``omniroute:`` counters go to
  the same local store); the first resync after recovery replaces them with Redis's
  state, never the reverse.

Staleness is bounded by the pub/sub latency, and by the 5 s resync if a message is
lost.  Scripts name keys outside ``KEYS``: this needs a standalone Redis, not Cluster.
"""

from __future__ import annotations

import logging
import secrets
import threading
from collections import deque
from collections.abc import Callable, Iterable
from typing import Any, TypeVar

import orjson

from providers.redis_store import Client, RedisLink, RedisStore, ttl_ms
from providers.state_codec import decode, encode, revive
from providers.state_store import UNREAD, LocalStore

T = TypeVar("T")
logger = logging.getLogger(__name__)
MAX_BEHIND = 10_000  # queued outcomes; past it one stays in this worker's mirror
MIRRORED_PREFIXES = ("breaker:", "cooldown:", "auth:", "lock:")
RESYNC_SECONDS = 5.0  # spec 08 §3.2
STATE_CHANNEL = "state"
SEQ_KEY = "health:seq"
INDEX_KEY = "health:keys"
EPOCH_KEY = "health:epoch"

# KEYS: key, seq, index, epoch.  ARGV: short key, value ('' = delete), ttl ms
# ('0' = none), channel, epoch candidate, message body, expected value ('' = absent)
# or nothing for an unconditional write.
# -> {1, epoch, seq} written; {0, current} not the expected value; {2} unchanged.
WRITE_SCRIPT = """
if ARGV[7] then
  local current = redis.call('GET', KEYS[1])
  if (current or '') ~= ARGV[7] then
    return {0, current}
  end
  if ARGV[2] == ARGV[7] and ARGV[3] == '0'
      and (ARGV[2] == '' or redis.call('PTTL', KEYS[1]) == -1) then
    return {2}
  end
end
local epoch = redis.call('GET', KEYS[4])
if not epoch then
  epoch = ARGV[5]
  redis.call('SET', KEYS[4], epoch)
end
local seq = redis.call('INCR', KEYS[2])
if ARGV[2] == '' then
  redis.call('DEL', KEYS[1])
  redis.call('SREM', KEYS[3], ARGV[1])
else
  if ARGV[3] == '0' then
    redis.call('SET', KEYS[1], ARGV[2])
  else
    redis.call('SET', KEYS[1], ARGV[2], 'PX', ARGV[3])
  end
  redis.call('SADD', KEYS[3], ARGV[1])
end
redis.call('PUBLISH', ARGV[4], epoch .. ' ' .. seq .. ' ' .. ARGV[6])
return {1, epoch, seq}
"""
WRITTEN, CHANGED_MEANWHILE, UNCHANGED = 1, 0, 2

# KEYS: seq, index, epoch.  ARGV: namespace.  -> epoch, seq, (key, value, pttl)*
SNAPSHOT_SCRIPT = """
local out = {redis.call('GET', KEYS[3]) or '', redis.call('GET', KEYS[1]) or '0'}
for _, k in ipairs(redis.call('SMEMBERS', KEYS[2])) do
  local full = ARGV[1] .. k
  local v = redis.call('GET', full)
  if v then
    out[#out + 1] = k
    out[#out + 1] = v
    out[#out + 1] = redis.call('PTTL', full)
  else
    redis.call('SREM', KEYS[2], k)
  end
end
return out
"""


def is_mirrored(key: str) -> bool:
    return key.startswith(MIRRORED_PREFIXES)


def _message(key: str, encoded: bytes | None, ttl: int) -> bytes:
    """``{"k": key, "t": ttl ms or null, "v": value}`` with the value's JSON inline."""
    return b"".join(
        (
            b'{"k":',
            orjson.dumps(key),
            b',"t":',
            str(ttl).encode() if ttl else b"null",
            b',"v":',
            encoded if encoded is not None else b"null",
            b"}",
        )
    )


class _Discard:
    """A pipeline stand-in that drops what is queued (the local path)."""

    def __getattr__(self, name: str) -> Callable[..., None]:
        return lambda *args, **kwargs: None


def _seconds(ttl: int | None) -> float | None:
    return None if ttl is None or ttl < 0 else ttl / 1000


class MirroredStore:
    """``StateStore``: health keys from the mirror, the rest from Redis."""

    def __init__(self, link: RedisLink, *, resync_s: float = RESYNC_SECONDS) -> None:
        self.link = link
        self.mirror = LocalStore()
        self.remote = RedisStore(link, fallback=self.mirror)
        self._resync_s = resync_s
        self._lock = threading.Lock()
        self._seqs: dict[str, int] = {}  # key -> seq of the value in the mirror
        self._epoch = ""
        self._token = secrets.token_hex(8)
        self._started = False
        #: outcomes applied to the mirror, waiting for the writer thread
        self._behind: deque[tuple[str, Callable[[Any], Any], float | None, Any]] = (
            deque()
        )
        self._drained = threading.Condition(self._lock)
        self._wake = threading.Event()
        self._writer: threading.Thread | None = None
        #: key -> queued or in-flight write-behind outcomes not yet confirmed
        self._unconfirmed: dict[str, int] = {}
        #: key -> the newest (epoch, seq, value, ttl) Redis sent meanwhile
        self._held: dict[str, tuple[str, int, Any, float | None]] = {}

    # ------------------------------------------------------------- reading

    def get(self, key: str) -> Any:
        if not self._started:
            self.start()
        if is_mirrored(key):
            return self.mirror.get(key)
        return self.remote.get(key)

    def get_many(self, keys: Iterable[str]) -> list[Any]:
        if not self._started:
            self.start()
        wanted = list(keys)
        values = self.mirror.get_many(wanted)
        remote = [k for k in wanted if not is_mirrored(k)]
        if not remote:
            return values
        fetched = iter(self.remote.get_many(remote))
        return [
            v if is_mirrored(k) else next(fetched)
            for k, v in zip(wanted, values, strict=True)
        ]

    def get_many_along(
        self,
        keys: Iterable[str],
        queue: Callable[[Any], tuple[Callable[[Any], T], Callable[[], T]]],
    ) -> tuple[list[Any], T]:
        """``get_many`` and one more read in the same round trip: ``queue(pipe)``
        adds its command to the pipeline and answers ``(parse(reply), local())``;
        with Redis unreachable both parts are read locally."""
        if not self._started:
            self.start()
        wanted = list(keys)
        values = self.mirror.get_many(wanted)
        remote = [k for k in wanted if not is_mirrored(k)]
        fulls = [self.link.key(k) for k in remote]
        parts: list[Any] = []

        def read(client: Client) -> tuple[list[Any], T]:
            with client.pipeline(transaction=False) as pipe:
                if fulls:
                    pipe.mget(fulls)
                parts[:] = [queue(pipe)]
                replies = pipe.execute()
            fetched = [decode(raw) for raw in replies[0]] if fulls else []
            return fetched, parts[0][0](replies[-1])

        def local() -> tuple[list[Any], T]:
            extra = parts[0][1] if parts else queue(_Discard())[1]
            return self.mirror.get_many(remote), extra()

        fetched, extra = self.link.call("get_many", read, local)
        found = iter(fetched)
        merged = [
            v if is_mirrored(k) else next(found)
            for k, v in zip(wanted, values, strict=True)
        ]
        return merged, extra

    def keys(self, prefix: str) -> list[str]:
        if not self._started:
            self.start()
        if is_mirrored(prefix):
            return self.mirror.keys(prefix)
        found = [k for k in self.remote.keys(prefix) if not is_mirrored(k)]
        if any(p.startswith(prefix) for p in MIRRORED_PREFIXES):
            found += [k for k in self.mirror.keys(prefix) if is_mirrored(k)]
        return found

    # ------------------------------------------------------------- writing

    def set(self, key: str, value: Any, ttl_s: float | None) -> None:
        if not is_mirrored(key):
            self.remote.set(key, value, ttl_s)
            return
        encoded = None if value is None else encode(value)
        self.link.call(
            "set",
            lambda c: self._written(
                key, value, ttl_s, c.eval(*self._script(key, encoded, ttl_s))[1:]
            ),
            lambda: self._local(key, lambda _: value, ttl_s),
        )

    def delete(self, key: str) -> None:
        if not is_mirrored(key):
            self.remote.delete(key)
            return
        self.link.call(
            "delete",
            lambda c: self._written(
                key, None, None, c.eval(*self._script(key, None, None))[1:]
            ),
            lambda: self._local(key, lambda _: None, None),
        )

    def incr(self, key: str, delta: int, ttl_s: float | None) -> int:
        if not is_mirrored(key):
            return self.remote.incr(key, delta, ttl_s)
        return int(self.update(key, lambda old: (old or 0) + delta, ttl_s))

    def update(
        self,
        key: str,
        fn: Callable[[Any], Any],
        ttl_s: float | None,
        *,
        known: Any = UNREAD,  # mirrored keys are read from the mirror anyway
    ) -> Any:
        if not is_mirrored(key):
            return self.remote.update(key, fn, ttl_s, known=known)
        return self.link.call(
            "update",
            lambda c: self._compare_and_set(c, key, fn, ttl_s),
            lambda: self._local(key, fn, ttl_s),
        )

    def _compare_and_set(
        self,
        client: Client,
        key: str,
        fn: Callable[[Any], Any],
        ttl_s: float | None,
        start: Any = UNREAD,
    ) -> Any:
        current = self.mirror.get(key) if start is UNREAD else start
        expected = b"" if current is None else encode(current)
        while True:
            value = fn(current)
            encoded = None if value is None else encode(value)
            reply = client.eval(*self._script(key, encoded, ttl_s), expected)
            if reply[0] == WRITTEN:
                self._written(key, value, ttl_s, reply[1:])
                return value
            if reply[0] == UNCHANGED:
                return value
            expected = reply[1] or b""  # another worker wrote: run fn on its value
            current = decode(reply[1])

    # ------------------------------------------------------------- write-behind

    def update_behind(
        self, key: str, fn: Callable[[Any], Any], ttl_s: float | None
    ) -> Any:
        """``update`` for a call's outcome (spec 03 §8.8: writes after a call never
        delay the response): ``fn`` runs on the mirror now and its value is
        answered at once; a writer thread then applies the same ``fn`` to Redis by
        compare-and-set (from the value it ran on, so one round trip unless another
        worker wrote meanwhile) and the mirror takes Redis's result.  Not for a
        claim, whose caller needs Redis's answer.  While Redis is backed off this is
        ``update`` (local)."""
        if not is_mirrored(key) or not self.link.is_up():
            return self.update(key, fn, ttl_s)
        if not self._started:
            self.start()
        with self._lock:
            before = self.mirror.get(key)
            value = fn(before)
            if value is None or (ttl_s is not None and ttl_s <= 0):
                self.mirror.delete(key)
            else:
                self.mirror.set(key, value, ttl_s)
            if len(self._behind) >= MAX_BEHIND:
                self.link.observer.fallback("update_behind")  # stays local
                return value
            self._behind.append((key, fn, ttl_s, before))
            self._unconfirmed[key] = self._unconfirmed.get(key, 0) + 1
            writer = self._writer
        if writer is None or not writer.is_alive():
            self._start_writer()
        self._wake.set()
        return value

    def _start_writer(self) -> None:
        with self._lock:
            if self._writer is not None and self._writer.is_alive():
                return
            self._writer = threading.Thread(
                target=self._write_behind, name="omniroute-health-writer", daemon=True
            )
            self._writer.start()

    def _write_behind(self) -> None:
        while True:
            self._wake.wait()
            self._wake.clear()
            self.send_behind()

    def send_behind(self) -> None:
        """Apply the queued outcomes to Redis (the writer thread); never raises."""
        while True:
            with self._lock:
                if not self._behind:
                    self._drained.notify_all()
                    return
                key, fn, ttl_s, before = self._behind.popleft()
            try:
                self._send_one(key, fn, ttl_s, before)
            except Exception:
                logger.exception("health mirror: a queued write failed")

    def _send_one(
        self, key: str, fn: Callable[[Any], Any], ttl_s: float | None, before: Any
    ) -> None:
        sent = False

        def remote(client: Client) -> Any:
            nonlocal sent
            value = self._compare_and_set(client, key, fn, ttl_s, before)
            sent = True
            return value

        # a failure leaves the value in the mirror: this worker's local state meanwhile
        try:
            self.link.call("update", remote, lambda: None)
        finally:
            self._confirmed(key, sent)

    def _confirmed(self, key: str, sent: bool) -> None:
        """One queued outcome of ``key`` is in Redis (or failed to get there).

        Until the last one is, the mirror keeps this worker's optimistic value (every
        queued outcome applied) and what Redis sends for the key is held back: the
        newest of it then replaces the mirror, since Redis applied the same outcomes
        by compare-and-set on top of other workers' writes.  After a failure the
        local value stays, and the next resync settles the key.
        """
        with self._lock:
            left = self._unconfirmed.get(key, 1) - 1
            if left > 0:
                self._unconfirmed[key] = left
                return
            self._unconfirmed.pop(key, None)
            held = self._held.pop(key, None)
            if held is not None and sent:
                epoch, seq, value, ttl_s = held
                self._store(key, value, ttl_s, epoch, seq)

    def flush_behind(self, timeout_s: float = 5.0) -> bool:
        """Wait until the queued outcomes are in Redis (shutdown, tests)."""
        self._wake.set()
        if self._writer is None or not self._writer.is_alive():
            self.send_behind()
            return True
        with self._drained:
            return self._drained.wait_for(lambda: not self._behind, timeout_s)

    def _script(
        self, key: str, encoded: bytes | None, ttl_s: float | None
    ) -> tuple[Any, ...]:
        gone = encoded is None or (ttl_s is not None and ttl_s <= 0)
        ttl = 0 if gone or ttl_s is None else ttl_ms(ttl_s)
        link = self.link
        return (
            WRITE_SCRIPT,
            4,
            link.key(key),
            link.key(SEQ_KEY),
            link.key(INDEX_KEY),
            link.key(EPOCH_KEY),
            key,
            b"" if gone else encoded,
            ttl,
            link.channel(STATE_CHANNEL),
            self._token,
            _message(key, None if gone else encoded, ttl),
        )

    def _written(self, key: str, value: Any, ttl_s: float | None, reply: Any) -> None:
        epoch, seq = reply
        self._apply(key, value, ttl_s, epoch.decode(), int(seq))

    def _local(self, key: str, fn: Callable[[Any], Any], ttl_s: float | None) -> Any:
        """Redis is away: the mirror is the worker's state (resync replaces it)."""
        with self._lock:
            self._seqs.pop(key, None)
        return self.mirror.update(key, fn, ttl_s)

    # ------------------------------------------------------------- mirroring

    def _apply(
        self, key: str, value: Any, ttl_s: float | None, epoch: str, seq: int
    ) -> None:
        with self._lock:
            if self._unconfirmed.get(key):
                self._hold(key, value, ttl_s, epoch, seq)
            else:
                self._store(key, value, ttl_s, epoch, seq)

    def _hold(
        self, key: str, value: Any, ttl_s: float | None, epoch: str, seq: int
    ) -> None:
        """Keep Redis's newest value of a key with unconfirmed outcomes (lock held)."""
        held = self._held.get(key)
        if held is None or held[0] != epoch or seq > held[1]:
            self._held[key] = (epoch, seq, value, ttl_s)

    def _store(
        self, key: str, value: Any, ttl_s: float | None, epoch: str, seq: int
    ) -> None:
        """Put a value from Redis into the mirror if it is newer (lock held)."""
        if epoch != self._epoch:
            self._epoch = epoch
            self._seqs.clear()  # Redis restarted or was flushed
        if seq <= self._seqs.get(key, -1):
            return
        self._seqs[key] = seq
        if value is None or (ttl_s is not None and ttl_s <= 0):
            self.mirror.delete(key)
        else:
            self.mirror.set(key, value, ttl_s)

    def on_message(self, data: bytes) -> None:
        epoch, seq, body = data.split(b" ", 2)
        message = orjson.loads(body)
        value = revive(message["v"])
        ttl_s = _seconds(message["t"])
        self._apply(message["k"], value, ttl_s, epoch.decode(), int(seq))

    def resync(self) -> None:
        """Replace the mirror with Redis's health state (no-op while it is away)."""
        link = self.link

        def remote(client: Client) -> list[Any]:
            keys = (link.key(SEQ_KEY), link.key(INDEX_KEY), link.key(EPOCH_KEY))
            return list(client.eval(SNAPSHOT_SCRIPT, 3, *keys, link.namespace))

        reply = link.call("resync", remote, list)
        if not reply:
            return
        epoch, seq = reply[0].decode(), int(reply[1])
        entries = {
            reply[i].decode(): (decode(reply[i + 1]), _seconds(int(reply[i + 2])))
            for i in range(2, len(reply), 3)
        }
        self._replace(epoch, seq, entries)

    def _replace(
        self, epoch: str, seq: int, entries: dict[str, tuple[Any, float | None]]
    ) -> None:
        with self._lock:
            if epoch != self._epoch:  # "" = nothing written since Redis started
                self._epoch = epoch
                self._seqs.clear()
            for key, (value, ttl_s) in entries.items():
                if self._unconfirmed.get(key):
                    self._hold(key, value, ttl_s, epoch, seq)
                elif self._seqs.get(key, -1) < seq:
                    self._seqs[key] = seq
                    self.mirror.set(key, value, ttl_s)
            for prefix in MIRRORED_PREFIXES:
                for key in self.mirror.keys(prefix):
                    if key in entries:
                        continue
                    if self._unconfirmed.get(key):
                        self._hold(key, None, None, epoch, seq)
                    elif self._seqs.get(key, -1) < seq:
                        self.mirror.delete(key)
            stale = [k for k, s in self._seqs.items() if k not in entries and s < seq]
            for key in stale:
                del self._seqs[key]

    # ------------------------------------------------------------- lifecycle

    def start(self) -> None:
        """Load the mirror and follow ``state`` (on first use; idempotent)."""
        with self._lock:
            if self._started:
                return
            self._started = True
        self.resync()
        subscriber = self.link.subscriber
        subscriber.listen(
            self.link.channel(STATE_CHANNEL), self.on_message, on_connect=self.resync
        )
        subscriber.every(self._resync_s, self.resync)
        self.link.on_recovery(subscriber.hurry)
