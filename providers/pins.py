"""Session pins (spec 05 §1.3): target pins per combo and tier pins per smart alias.

Keyed by the scoped session key ``S`` (which already folds in the API key id) and a
scope (``combo:<id>`` or ``tier:<alias>``).  Without Redis they live in this
process, at most ``OMNIROUTE_SESSION_MAX_PINS``; when full, expired pins go first,
then the pin expiring soonest.  TTLs slide: every write renews.  An evicted or
expired pin behaves exactly like a missing one.
"""

from __future__ import annotations

import heapq
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

DEFAULT_MAX_PINS = 10_000
_MISSING = object()
#: a dry run's private writes (explain route): reads see them first, the real pins
#: are never changed while it is set
_overlay: ContextVar[dict[str, Any] | None] = ContextVar("pin_overlay", default=None)


@contextmanager
def dry_run() -> Iterator[dict[str, Any]]:
    """Pin writes inside this block stay in a private overlay (explain route)."""
    writes: dict[str, Any] = {}
    token = _overlay.set(writes)
    try:
        yield writes
    finally:
        _overlay.reset(token)


class PinStore:
    def __init__(
        self, max_pins: int = DEFAULT_MAX_PINS, clock: Callable[[], float] = time.time
    ) -> None:
        self.max_pins = max_pins
        self.clock = clock
        self._pins: dict[str, tuple[float, dict[str, Any]]] = {}
        self._lock = threading.Lock()

    @staticmethod
    def key(session_key: str, scope: str) -> str:
        return f"pin:{session_key}:{scope}"

    def get(self, session_key: str, scope: str) -> dict[str, Any] | None:
        key = self.key(session_key, scope)
        overlay = _overlay.get()
        if overlay is not None and key in overlay:
            value: dict[str, Any] | None = overlay[key]
            return value
        found = self._pins.get(key)
        if found is None:
            return None
        expires, value = found
        if expires <= self.clock():
            with self._lock:
                self._pins.pop(key, None)
            return None
        return value

    def set(
        self, session_key: str, scope: str, value: dict[str, Any], ttl_s: float
    ) -> None:
        key = self.key(session_key, scope)
        overlay = _overlay.get()
        if overlay is not None:
            overlay[key] = value
            return
        now = self.clock()
        with self._lock:
            if key not in self._pins and len(self._pins) >= self.max_pins:
                self._evict(now)
            self._pins[key] = (now + ttl_s, value)

    def delete(self, session_key: str, scope: str) -> None:
        overlay = _overlay.get()
        if overlay is not None:
            overlay[self.key(session_key, scope)] = None
            return
        with self._lock:
            self._pins.pop(self.key(session_key, scope), None)

    def _evict(self, now: float) -> None:
        expired = [k for k, (until, _) in self._pins.items() if until <= now]
        for key in expired:
            del self._pins[key]
        overflow = len(self._pins) - self.max_pins + 1
        if overflow > 0:
            soonest = heapq.nsmallest(
                overflow, self._pins.items(), key=lambda item: item[1][0]
            )
            for key, _ in soonest:
                del self._pins[key]

    def __len__(self) -> int:
        return len(self._pins)

    def clear(self) -> None:
        with self._lock:
            self._pins.clear()


def _configured() -> PinStore:
    try:
        from django.conf import settings

        size = int(getattr(settings, "OMNIROUTE_SESSION_MAX_PINS", DEFAULT_MAX_PINS))
    except Exception:  # noqa: BLE001 - settings not configured (pure tests)
        size = DEFAULT_MAX_PINS
    return PinStore(max_pins=size)


pins = _configured()
