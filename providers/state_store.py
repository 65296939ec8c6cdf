"""The runtime state store (spec 03 §8.8): one interface, in-process implementation.

``get/get_many/set/delete/incr/update`` with per-key TTLs.  ``update(key, fn, ttl)`` is
an atomic read-modify-write (the breaker transitions and probe claims rely on it).
The Redis implementation (shared by every worker) arrives with the scale-out work and
keeps this interface; values here are plain Python objects.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable
from typing import Any, Protocol


class StateStore(Protocol):
    def get(self, key: str) -> Any: ...
    def get_many(self, keys: Iterable[str]) -> list[Any]: ...
    def set(self, key: str, value: Any, ttl_s: float | None) -> None: ...
    def delete(self, key: str) -> None: ...
    def incr(self, key: str, delta: int, ttl_s: float | None) -> int: ...
    def update(
        self, key: str, fn: Callable[[Any], Any], ttl_s: float | None
    ) -> Any: ...
    def keys(self, prefix: str) -> list[str]: ...


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

    def update(self, key: str, fn: Callable[[Any], Any], ttl_s: float | None) -> Any:
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
