"""The runtime state store (spec 03 §8.8): one interface, two implementations.

``get/get_many/set/delete/incr/update/keys`` with per-key TTLs (None: no expiry; a
write always sets the TTL again; ≤ 0: the value is gone at once).  ``update(key, fn,
ttl)`` is an atomic read-modify-write (the breaker transitions and probe claims rely
on it); ``fn`` must be pure, since a shared store may run it again after a concurrent
write.  ``update(..., known=value)`` passes the value the caller has just read (a
batched read before planning): a shared store then tries it as the expected value
first and skips its own read, one round trip instead of two when nobody raced.
A None value reads like a missing key and is not listed by ``keys``.

``LocalStore`` here is the embedded default: one process, values kept as the Python
objects given.  With ``REDIS_URL`` the board uses ``state_mirror.MirroredStore`` over
``redis_store.RedisStore``: shared by every worker, values stored as JSON
(``state_codec``), failing open to a ``LocalStore`` (spec 08 §3.3).
``providers.health.shared_store()`` chooses at start-up.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable
from typing import Any, ClassVar, Protocol

#: ``update``'s ``known`` when the caller has not read the key
UNREAD: Any = object()


class StateStore(Protocol):
    def get(self, key: str) -> Any: ...
    def get_many(self, keys: Iterable[str]) -> list[Any]: ...
    def set(self, key: str, value: Any, ttl_s: float | None) -> None: ...
    def delete(self, key: str) -> None: ...
    def incr(self, key: str, delta: int, ttl_s: float | None) -> int: ...
    def update(
        self,
        key: str,
        fn: Callable[[Any], Any],
        ttl_s: float | None,
        *,
        known: Any = UNREAD,
    ) -> Any: ...
    def keys(self, prefix: str) -> list[str]: ...


class SharedStateObserver(Protocol):
    """Where Redis-backed stores report fallbacks and Redis's health (spec 08 §3.3).

    Defined here, without Redis, so the gateway can install its Prometheus observer
    at start-up whether or not Redis is configured.
    """

    def fallback(self, op: str) -> None: ...
    def redis_up(self, up: bool) -> None: ...


class _Silent:
    def fallback(self, op: str) -> None:
        pass

    def redis_up(self, up: bool) -> None:
        pass


class _Hooks:
    observer: ClassVar[SharedStateObserver] = _Silent()


def observe(observer: SharedStateObserver) -> None:
    """Install the observer every Redis link reports to (the gateway app does)."""
    _Hooks.observer = observer


def shared_state_observer() -> SharedStateObserver:
    return _Hooks.observer


class LocalStore:
    """Per-process store: a dict and a lock; expired keys read as absent."""

    def __init__(self, clock: Callable[[], float] = time.time) -> None:
        self._data: dict[str, tuple[Any, float | None]] = {}
        self._lock = threading.Lock()
        self._clock = clock

    def _live(self, key: str, now: float) -> Any:
        item = self._data.get(key)
        if item is None:
            return None
        value, expires = item
        if expires is not None and now >= expires:
            del self._data[key]
            return None
        return value

    def get(self, key: str) -> Any:
        with self._lock:
            return self._live(key, self._clock())

    def get_many(self, keys: Iterable[str]) -> list[Any]:
        with self._lock:
            now = self._clock()
            return [self._live(key, now) for key in keys]

    def set(self, key: str, value: Any, ttl_s: float | None) -> None:
        with self._lock:
            expires = None if ttl_s is None else self._clock() + ttl_s
            self._data[key] = (value, expires)

    def delete(self, key: str) -> None:
        with self._lock:
            self._data.pop(key, None)

    def incr(self, key: str, delta: int, ttl_s: float | None) -> int:
        return int(self.update(key, lambda old: (old or 0) + delta, ttl_s))

    def update(
        self,
        key: str,
        fn: Callable[[Any], Any],
        ttl_s: float | None,
        *,
        known: Any = UNREAD,  # one process: the read under the lock is free
    ) -> Any:
        with self._lock:
            now = self._clock()
            value = fn(self._live(key, now))
            self._data[key] = (value, None if ttl_s is None else now + ttl_s)
            return value

    def keys(self, prefix: str) -> list[str]:
        with self._lock:
            now = self._clock()
            return [
                k
                for k in list(self._data)
                if k.startswith(prefix) and self._live(k, now) is not None
            ]
