"""The Redis side of the shared state (spec 08 §3, 03 §8.8): one link, one store.

``RedisLink`` is a worker's connection to Redis: one connection pool whose sockets
time out after ``OMNIROUTE_REDIS_TIMEOUT_MS`` (and never retry inside redis-py), the
pub/sub ``Subscriber``, and the fail-open policy every Redis-backed store goes through:

* ``call(op, remote, local)`` runs ``remote(client)``; a Redis error or timeout runs
  ``local()`` instead, counts ``omniroute_shared_state_fallbacks_total{op}`` and sets
  ``omniroute_redis_up`` to 0 (through ``state_store.observe``: the gateway app
  installs the Prometheus observer, since this app cannot import telemetry).
* After a failure Redis is skipped (every ``call`` goes local at once) for 1 s, then
  2 s, 4 s and 5 s between retries; the first success restores it.  Local writes made
  meanwhile are never merged back: this state is soft and rebuilds from traffic.

``RedisStore`` is the ``StateStore`` over a link: keys are ``<namespace><key>``
(``omniroute:`` in production), values the JSON of ``state_codec``, TTLs native (PX,
millisecond precision), ``incr`` one MULTI, ``keys`` a SCAN, and ``update(key, fn)`` a
compare-and-set loop (a Lua script writes only if the key still holds what ``fn``
saw, else ``fn`` runs again on the value it answers), so two workers never lose an
update (``fn`` must therefore be pure).

The client is the sync one on purpose: the store protocol is sync and its callers
(the planners, the health board) are sync code; a call is one round trip of tens of
microseconds on a local network, bounded by the 50 ms timeout, and the backoff keeps
a dead Redis from costing even that per request.  An async client would mean an
async protocol and every caller awaiting, for no gain at these latencies.
"""

from __future__ import annotations

import logging
import re
import threading
import time
from collections.abc import Callable, Iterable
from typing import Any, Literal, TypeVar

import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

from providers.redis_backoff import BACKOFF_FIRST_SECONDS, BACKOFF_MAX_SECONDS
from providers.redis_pubsub import Subscriber
from providers.state_codec import decode, encode
from providers.state_store import (
    UNREAD,
    LocalStore,
    SharedStateObserver,
    shared_state_observer,
)

logger = logging.getLogger(__name__)

NAMESPACE = "omniroute:"  # spec 08 §3.1: every key and channel
WARNING_EVERY_SECONDS = 60.0  # spec 03 §8.8: one WARNING per 60 s at most
POOL_MAX_CONNECTIONS = 64  # per worker; past it a call fails over like a timeout
CONFIG_CHANNEL = "config"  # spec 08 §3.4
CONFIG_VERSION_KEY = "config:version"

T = TypeVar("T")
Client = redis.Redis
#: compare-and-set.  KEYS: the key.  ARGV: the expected value ('' = absent), the new
#: value ('' = delete), its TTL ('gone', 'none' = no expiry, else ms).
#: -> {1} written; {2} unchanged (same value, no TTL to set); {0, current} conflict.
SWAP_SCRIPT = """
local current = redis.call('GET', KEYS[1])
if (current or '') ~= ARGV[1] then
  return {0, current}
end
if ARGV[2] == '' or ARGV[3] == 'gone' then
  redis.call('DEL', KEYS[1])
elseif ARGV[3] == 'none' then
  if ARGV[2] == ARGV[1] and redis.call('PTTL', KEYS[1]) == -1 then
    return {2}
  end
  redis.call('SET', KEYS[1], ARGV[2])
else
  redis.call('SET', KEYS[1], ARGV[2], 'PX', ARGV[3])
end
return {1}
"""
SWAP_CONFLICT = 0
_GLOB = re.compile(r"([*?\[\]\\])")


def ttl_ms(ttl_s: float) -> int:
    return max(1, round(ttl_s * 1000))


class RedisLink:
    def __init__(
        self,
        url: str,
        *,
        timeout_s: float,
        namespace: str = NAMESPACE,
        clock: Callable[[], float] = time.monotonic,
        observer: SharedStateObserver | None = None,
    ) -> None:
        self.url = url
        self.timeout_s = timeout_s
        self.namespace = namespace
        self.client: Client = redis.Redis(
            connection_pool=redis.ConnectionPool.from_url(
                url,
                socket_timeout=timeout_s,
                socket_connect_timeout=timeout_s,
                max_connections=POOL_MAX_CONNECTIONS,
                retry=Retry(NoBackoff(), 0),  # the backoff below is the only retry
            )
        )
        self._clock = clock
        self._observer = observer
        self._lock = threading.Lock()
        self._up: bool | None = None  # None until the first call settles it
        self._retry_at = 0.0
        self._backoff_s = 0.0
        self._warned_at = float("-inf")
        self._subscriber: Subscriber | None = None
        self._on_recovery: list[Callable[[], None]] = []

    # ------------------------------------------------------------- naming

    def key(self, name: str) -> str:
        return self.namespace + name

    def channel(self, name: str) -> str:
        """``omniroute:<name>``; on a database other than 0 ``omniroute:<name>@<db>``:
        pub/sub ignores the database number, and two deployments sharing one Redis
        server on two databases must not hear each other's health changes."""
        db = int(self.client.connection_pool.connection_kwargs.get("db") or 0)
        return self.namespace + name + (f"@{db}" if db else "")

    # ------------------------------------------------------------- fail open

    @property
    def observer(self) -> SharedStateObserver:
        return self._observer or shared_state_observer()

    def is_up(self) -> bool:
        """False from a failure until the next success (the store runs locally)."""
        return self._up is not False

    def call(self, op: str, remote: Callable[[Client], T], local: Callable[[], T]) -> T:
        """``remote(client)``, or ``local()`` while Redis fails or is backed off."""
        if self._clock() >= self._retry_at:
            try:
                result = remote(self.client)
            except redis.RedisError as exc:
                self.failed(op, exc)
            else:
                if self._up is not True:
                    self._recovered()
                return result
        self.observer.fallback(op)
        return local()

    def failed(self, op: str, exc: BaseException) -> None:
        """Record a failure: Redis is skipped until the backoff has passed."""
        with self._lock:
            now = self._clock()
            if now < self._retry_at:
                return  # a concurrent call already counted this outage step
            went_down = self._up is not False
            self._up = False
            self._backoff_s = (
                BACKOFF_FIRST_SECONDS
                if went_down
                else min(self._backoff_s * 2, BACKOFF_MAX_SECONDS)
            )
            self._retry_at = now + self._backoff_s
            warn = now - self._warned_at >= WARNING_EVERY_SECONDS
            if warn:
                self._warned_at = now
        if went_down:
            self.observer.redis_up(False)
        if warn:
            logger.warning(
                "shared state: Redis unreachable (%s: %s); this worker uses its "
                "local state, next try in %.0f s",
                op,
                exc,
                self._backoff_s,
            )

    def _recovered(self) -> None:
        with self._lock:
            if self._up is True:
                return
            was_down = self._up is False
            self._up = True
            self._retry_at = 0.0
            self._backoff_s = 0.0
        self.observer.redis_up(True)
        if was_down:
            logger.info("shared state: Redis reachable again; shared state in use")
            for listener in list(self._on_recovery):
                listener()

    def on_recovery(self, listener: Callable[[], None]) -> None:
        self._on_recovery.append(listener)

    def report_ping(self, ok: bool) -> None:
        """A readiness probe's result: a failure backs off, a success recovers."""
        if ok:
            self._recovered()
        else:
            self.failed("ping", redis.ConnectionError("ping failed"))

    # ------------------------------------------------------------- pub/sub

    @property
    def subscriber(self) -> Subscriber:
        with self._lock:
            if self._subscriber is None:
                self._subscriber = Subscriber(self)
            return self._subscriber

    def announce_config(self, version: int) -> None:
        """Spec 08 §3.4 step 2: store the version, then tell every worker."""

        def remote(client: Client) -> None:
            with client.pipeline(transaction=True) as pipe:
                pipe.set(self.key(CONFIG_VERSION_KEY), version)
                pipe.publish(self.channel(CONFIG_CHANNEL), str(version))
                pipe.execute()

        self.call("publish", remote, lambda: None)

    def close(self) -> None:
        if self._subscriber is not None:
            self._subscriber.stop()
        self.client.close()
        self.client.connection_pool.disconnect()


def glob_escape(text: str) -> str:
    return _GLOB.sub(r"\\\1", text)


def queue_write(
    pipe: Any, full_key: str, encoded: bytes | None, ttl_s: float | None
) -> None:
    """SET with the store's TTL semantics (None: no expiry; ≤ 0: gone) or DEL."""
    if encoded is None or (ttl_s is not None and ttl_s <= 0):
        pipe.delete(full_key)
    elif ttl_s is None:
        pipe.set(full_key, encoded)
    else:
        pipe.set(full_key, encoded, px=ttl_ms(ttl_s))


def _cas_ttl(encoded: bytes | None, ttl_s: float | None) -> str:
    """``SWAP_SCRIPT``'s ARGV[3]: ``gone``, ``none`` (no expiry) or milliseconds."""
    if encoded is None or (ttl_s is not None and ttl_s <= 0):
        return "gone"
    return "none" if ttl_s is None else str(ttl_ms(ttl_s))


def compare_and_set(
    client: Client,
    full_key: str,
    fn: Callable[[Any], Any],
    ttl_s: float | None,
    known: Any = UNREAD,
) -> Any:
    """Atomic read-modify-write as a compare-and-set loop (``SWAP_SCRIPT``).

    ``fn`` runs on the current value (read with one GET, or ``known`` when the
    caller has it), and the script writes only if Redis still holds exactly what
    ``fn`` saw; otherwise it answers the value it holds and ``fn`` runs again on
    that.  One round trip with ``known``, two without, more only under a race.
    """
    if known is UNREAD:
        raw = client.get(full_key)
        current, expected = decode(raw), raw or b""
    else:
        current = known
        expected = b"" if known is None else encode(known)
    while True:
        value = fn(current)
        encoded = None if value is None else encode(value)
        reply = client.eval(
            SWAP_SCRIPT,
            1,
            full_key,
            expected,
            encoded or b"",
            _cas_ttl(encoded, ttl_s),
        )
        if reply[0] != SWAP_CONFLICT:
            return value
        raw = reply[1] if len(reply) > 1 else None
        current, expected = decode(raw), raw or b""


class RedisStore:
    """``StateStore`` in Redis, failing open to ``fallback`` (a ``LocalStore``)."""

    def __init__(self, link: RedisLink, fallback: LocalStore | None = None) -> None:
        self.link = link
        self.fallback = fallback if fallback is not None else LocalStore()

    def get(self, key: str) -> Any:
        full = self.link.key(key)
        return self.link.call(
            "get", lambda c: decode(c.get(full)), lambda: self.fallback.get(key)
        )

    def get_many(self, keys: Iterable[str]) -> list[Any]:
        wanted = list(keys)
        if not wanted:
            return []
        fulls = [self.link.key(k) for k in wanted]
        return self.link.call(
            "get_many",
            lambda c: [decode(raw) for raw in c.mget(fulls)],
            lambda: self.fallback.get_many(wanted),
        )

    def set(self, key: str, value: Any, ttl_s: float | None) -> None:
        full = self.link.key(key)
        encoded = None if value is None else encode(value)
        self.link.call(
            "set",
            lambda c: queue_write(c, full, encoded, ttl_s),
            lambda: self.fallback.set(key, value, ttl_s),
        )

    def delete(self, key: str) -> None:
        full = self.link.key(key)
        self.link.call(
            "delete", lambda c: c.delete(full), lambda: self.fallback.delete(key)
        )

    def incr(self, key: str, delta: int, ttl_s: float | None) -> int:
        full = self.link.key(key)

        def remote(client: Client) -> int:
            with client.pipeline(transaction=True) as pipe:
                pipe.incrby(full, delta)
                if ttl_s is None:
                    pipe.persist(full)
                elif ttl_s > 0:
                    pipe.pexpire(full, ttl_ms(ttl_s))
                else:
                    pipe.delete(full)
                return int(pipe.execute()[0])

        return self.link.call(
            "incr", remote, lambda: self.fallback.incr(key, delta, ttl_s)
        )

    def update(
        self,
        key: str,
        fn: Callable[[Any], Any],
        ttl_s: float | None,
        *,
        known: Any = UNREAD,
    ) -> Any:
        full = self.link.key(key)
        return self.link.call(
            "update",
            lambda c: compare_and_set(c, full, fn, ttl_s, known),
            lambda: self.fallback.update(key, fn, ttl_s),
        )

    def keys(self, prefix: str) -> list[str]:
        # The namespace also holds pins (pin:), the config version (config:) and the
        # mirror's bookkeeping (health:); no store key starts with those.
        start = len(self.link.namespace)
        pattern = glob_escape(self.link.key(prefix)) + "*"

        def remote(client: Client) -> list[str]:
            found = client.scan_iter(match=pattern, count=1000)
            return list(dict.fromkeys(raw.decode()[start:] for raw in found))

        return self.link.call("keys", remote, lambda: self.fallback.keys(prefix))


class _Links:
    """One link per Redis URL and process (settings may name another in tests)."""

    lock = threading.Lock()
    by_url: dict[str, RedisLink] = {}  # noqa: RUF012 - the process-wide registry


def shared_link() -> RedisLink | None:
    """The worker's link to ``REDIS_URL``; None when it is unset (embedded)."""
    from django.conf import settings

    url = settings.REDIS_URL
    if not url:
        return None
    with _Links.lock:
        link = _Links.by_url.get(url)
        if link is None:
            link = _Links.by_url[url] = RedisLink(
                url, timeout_s=settings.OMNIROUTE_REDIS_TIMEOUT_MS / 1000
            )
        return link


def shared_state_mode() -> Literal["redis", "local"]:
    """Where this worker's routing state lives right now (``/readyz``)."""
    link = shared_link()
    return "redis" if link is not None and link.is_up() else "local"
