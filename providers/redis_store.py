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
WATCH/MULTI loop: a concurrent write makes EXEC fail and ``fn`` run again on the new
value, so two workers never lose an update (``fn`` must therefore be pure).

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
from typing import TYPE_CHECKING, Any, Literal, TypeVar

import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

from providers.state_codec import decode, encode
from providers.state_store import LocalStore, SharedStateObserver, shared_state_observer

if TYPE_CHECKING:
    from providers.redis_pubsub import Subscriber

logger = logging.getLogger(__name__)

NAMESPACE = "omniroute:"  # spec 08 §3.1: every key and channel
BACKOFF_FIRST_SECONDS = 1.0  # spec 08 §3.3: skip Redis for 1 s after a failure,
BACKOFF_MAX_SECONDS = 5.0  # doubling up to 5 s between retries
WARNING_EVERY_SECONDS = 60.0  # spec 03 §8.8: one WARNING per 60 s at most
POOL_MAX_CONNECTIONS = 64  # per worker; past it a call fails over like a timeout
CONFIG_CHANNEL = "config"  # spec 08 §3.4
CONFIG_VERSION_KEY = "config:version"

T = TypeVar("T")
Client = redis.Redis
#: GET and PTTL in one round trip (the WATCH phase of an update)
READ_WITH_TTL = "return {redis.call('GET', KEYS[1]), redis.call('PTTL', KEYS[1])}"
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
        return self.namespace + name

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
                from providers.redis_pubsub import Subscriber

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


Writer = Callable[[Any, bytes | None, float | None], None]


def atomic_update(
    client: Client,
    full_key: str,
    fn: Callable[[Any], Any],
    ttl_s: float | None,
    write: Writer,
) -> tuple[Any, list[Any] | None]:
    """WATCH/MULTI read-modify-write: ``(new value, EXEC replies or None)``.

    ``write(pipe, encoded, ttl_s)`` queues the commands inside MULTI.  Nothing is
    written when the value is unchanged and there is no TTL to renew (a breaker
    outcome that changes nothing costs two round trips and publishes nothing).
    """
    with client.pipeline(transaction=True) as pipe:
        while True:
            try:
                pipe.watch(full_key)
                raw, pttl = pipe.eval(READ_WITH_TTL, 1, full_key)
                value = fn(decode(raw))
                encoded = None if value is None else encode(value)
                if encoded == raw and ttl_s is None and pttl < 0:
                    return value, None
                pipe.multi()
                write(pipe, encoded, ttl_s)
                return value, pipe.execute()
            except redis.WatchError:
                continue  # another worker committed first: run fn on its value


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

    def update(self, key: str, fn: Callable[[Any], Any], ttl_s: float | None) -> Any:
        full = self.link.key(key)

        def write(pipe: Any, encoded: bytes | None, ttl: float | None) -> None:
            queue_write(pipe, full, encoded, ttl)

        return self.link.call(
            "update",
            lambda c: atomic_update(c, full, fn, ttl_s, write)[0],
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
