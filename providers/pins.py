"""Session pins (spec 05 §1.3): target pins per combo and tier pins per smart alias.

Keyed by the scoped session key ``S`` (which already folds in the API key id) and a
scope (``combo:<id>`` or ``tier:<alias>``).  Without Redis they live in this
process, at most ``OMNIROUTE_SESSION_MAX_PINS``; when full, expired pins go first,
then the pin expiring soonest.  TTLs slide: every write renews.  An evicted or
expired pin behaves exactly like a missing one.

With ``REDIS_URL`` (``RedisPinStore``) a pin is the Redis key
``omniroute:pin:<first 32 hex of SHA-256(S, scope)>`` with a native TTL, shared by
every worker and not counted: a read is one GET, a write one SET with PX.  A ``tier:``
pin is written by a script that never turns ``hard`` into ``easy`` (it renews the
hard pin instead), since two workers may classify one session's turns at once.
While Redis is unreachable the in-process store above serves, bound and all.
"""

from __future__ import annotations

import hashlib
import heapq
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any

from providers.state_codec import decode, encode

if TYPE_CHECKING:
    from providers.redis_store import RedisLink

DEFAULT_MAX_PINS = 10_000
PIN_KEY_HEX = 32  # spec 08 §3.1: pin:<first 32 hex of SHA-256(key, session, scope)>
TIER_SCOPE = "tier:"
# KEYS: the pin.  ARGV: value, ttl ms, its tier.  Spec 05 §2.3: upward only.
TIER_SCRIPT = """
if ARGV[3] == 'easy' then
  local old = redis.call('GET', KEYS[1])
  if old then
    local ok, pin = pcall(cjson.decode, old)
    if ok and type(pin) == 'table' and pin['tier'] == 'hard' then
      redis.call('PEXPIRE', KEYS[1], ARGV[2])
      return 0
    end
  end
end
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
return 1
"""
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
        overlay = _overlay.get()
        if overlay is not None:
            key = self.key(session_key, scope)
            if key in overlay:
                value: dict[str, Any] | None = overlay[key]
                return value
        return self._read(session_key, scope)

    def get_many(self, refs: Sequence[tuple[str, str]]) -> list[dict[str, Any] | None]:
        """``get`` for several ``(session key, scope)`` pairs at once (one Redis
        round trip in the shared store)."""
        found: list[Any] = [_MISSING] * len(refs)
        overlay = _overlay.get()
        if overlay is not None:
            for index, (session_key, scope) in enumerate(refs):
                found[index] = overlay.get(self.key(session_key, scope), _MISSING)
        wanted = [i for i, value in enumerate(found) if value is _MISSING]
        if wanted:
            for index, value in zip(
                wanted, self._read_many([refs[i] for i in wanted]), strict=True
            ):
                found[index] = value
        return found

    def set(
        self, session_key: str, scope: str, value: dict[str, Any], ttl_s: float
    ) -> None:
        """Create or move a pin; a ``tier:`` pin never goes from hard to easy in
        the Redis store (concurrent workers), here the caller's check suffices."""
        overlay = _overlay.get()
        if overlay is not None:
            overlay[self.key(session_key, scope)] = value
            return
        self._write(session_key, scope, value, ttl_s)

    def delete(self, session_key: str, scope: str) -> None:
        overlay = _overlay.get()
        if overlay is not None:
            overlay[self.key(session_key, scope)] = None
            return
        self._remove(session_key, scope)

    # --- the in-process storage (the Redis store's fallback as well)

    def _read(self, session_key: str, scope: str) -> dict[str, Any] | None:
        key = self.key(session_key, scope)
        found = self._pins.get(key)
        if found is None:
            return None
        expires, value = found
        if expires <= self.clock():
            with self._lock:
                self._pins.pop(key, None)
            return None
        return value

    def _read_many(
        self, refs: Sequence[tuple[str, str]]
    ) -> list[dict[str, Any] | None]:
        return [PinStore._read(self, session_key, scope) for session_key, scope in refs]

    def _write(
        self, session_key: str, scope: str, value: dict[str, Any], ttl_s: float
    ) -> None:
        key = self.key(session_key, scope)
        now = self.clock()
        with self._lock:
            if key not in self._pins and len(self._pins) >= self.max_pins:
                self._evict(now)
            self._pins[key] = (now + ttl_s, value)

    def _remove(self, session_key: str, scope: str) -> None:
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


class RedisPinStore(PinStore):
    """Pins in Redis (shared, no count limit); the in-process store is the fallback."""

    def __init__(
        self,
        link: RedisLink,
        max_pins: int = DEFAULT_MAX_PINS,
        clock: Callable[[], float] = time.time,
    ) -> None:
        super().__init__(max_pins, clock)
        self.link = link

    def redis_key(self, session_key: str, scope: str) -> str:
        digest = hashlib.sha256(f"{session_key}\x00{scope}".encode()).hexdigest()
        return self.link.key(f"pin:{digest[:PIN_KEY_HEX]}")

    def _read(self, session_key: str, scope: str) -> dict[str, Any] | None:
        full = self.redis_key(session_key, scope)

        def remote(client: Any) -> dict[str, Any] | None:
            found = decode(client.get(full))
            return found if isinstance(found, dict) else None

        return self.link.call(
            "pin_get", remote, lambda: PinStore._read(self, session_key, scope)
        )

    def _read_many(
        self, refs: Sequence[tuple[str, str]]
    ) -> list[dict[str, Any] | None]:
        fulls = [self.redis_key(session_key, scope) for session_key, scope in refs]

        def remote(client: Any) -> list[dict[str, Any] | None]:
            found = [decode(raw) for raw in client.mget(fulls)]
            return [value if isinstance(value, dict) else None for value in found]

        return self.link.call(
            "pin_get", remote, lambda: PinStore._read_many(self, refs)
        )

    def _write(
        self, session_key: str, scope: str, value: dict[str, Any], ttl_s: float
    ) -> None:
        from providers.redis_store import ttl_ms

        full = self.redis_key(session_key, scope)
        encoded, ttl = encode(value), ttl_ms(ttl_s)
        if scope.startswith(TIER_SCOPE):
            tier = str(value.get("tier"))

            def remote(client: Any) -> Any:
                return client.eval(TIER_SCRIPT, 1, full, encoded, ttl, tier)
        else:

            def remote(client: Any) -> Any:
                return client.set(full, encoded, px=ttl)

        self.link.call(
            "pin_set",
            remote,
            lambda: PinStore._write(self, session_key, scope, value, ttl_s),
        )

    def _remove(self, session_key: str, scope: str) -> None:
        full = self.redis_key(session_key, scope)
        self.link.call(
            "pin_delete",
            lambda c: c.delete(full),
            lambda: PinStore._remove(self, session_key, scope),
        )


def _configured() -> PinStore:
    """``RedisPinStore`` when ``REDIS_URL`` is set, else the in-process store."""
    try:
        from django.conf import settings

        size = int(getattr(settings, "OMNIROUTE_SESSION_MAX_PINS", DEFAULT_MAX_PINS))
        url = getattr(settings, "REDIS_URL", None)
    except Exception:  # noqa: BLE001 - settings not configured (pure tests)
        return PinStore()
    if not url:
        return PinStore(max_pins=size)
    from providers.redis_store import shared_link

    link = shared_link()
    assert link is not None
    return RedisPinStore(link, max_pins=size)


pins = _configured()
