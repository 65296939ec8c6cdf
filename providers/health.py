"""Connection health: breakers, cooldowns, auth disables, model locks (spec 03 §8).

The transitions are the pure functions of ``gateway.kernel.breaker``; this module keeps
their state in the process's ``StateStore`` and answers the two questions the attempt
loop asks: *may this target be called now?* (``skip_reason``) and *what did this
attempt do to its connection?* (``record``).  The admin reads the same board.

Keys: ``breaker:<provider>@<connection>``, ``cooldown:…``, ``auth:…``,
``lock:<provider>@<connection>:<model>``.  Soft state: it rebuilds from traffic.
With ``REDIS_URL`` the store is shared by every worker and these four kinds are read
from a local mirror (``shared_store``); in-flight counts always stay per process.
"""

from __future__ import annotations

import email.utils
import math
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from gateway.kernel.breaker import (
    AuthDisable,
    Breaker,
    BreakerOutcome,
    Circuit,
    Cooldown,
    HealthConfig,
    auth_failed,
    auth_success,
    breaker_outcome,
    claim_probe,
    cooldown_success,
    lock_until,
    rate_limited,
    record_outcome,
    reenable,
)
from gateway.kernel.errors import FailureDetail, FailureReason
from providers.state_store import LocalStore, StateStore

STATE_TTL_EXTRA_SECONDS = 3600.0  # spec 08 §3.1: until + 1 h
BUSY_RETRY_AFTER_SECONDS = 1.0  # spec 02 §10 rule 3: a busy connection counts as 1 s
_AUTH_DETAILS = (FailureDetail.AUTH_FAILED, FailureDetail.PAYMENT_REQUIRED)


def connection_key(provider: str, connection: str) -> str:
    return f"{provider}@{connection}"


def parse_retry_after(value: str | None, now: float) -> float | None:
    """Seconds from ``Retry-After`` (seconds, HTTP date) or ``ms:<retry-after-ms>``."""
    if not value:
        return None
    value = value.strip()
    try:
        seconds = float(value[3:]) / 1000 if value.startswith("ms:") else float(value)
    except ValueError:
        pass
    else:  # "nan", "inf" and negative numbers are garbage, not a delay
        return seconds if math.isfinite(seconds) and seconds >= 0 else None
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:  # an HTTP date is GMT, never the server's local time
        when = when.replace(tzinfo=UTC)
    return max(0.0, when.timestamp() - now)


@dataclass(frozen=True, slots=True)
class Skip:
    reason: str
    retry_after_s: float | None
    #: ``capability_mismatch``: the request field of the unmet need (spec 02 §10)
    unmet_param: str | None = None


@dataclass(frozen=True, slots=True)
class ConnectionHealth:
    """What the admin shows for one connection."""

    circuit: Circuit
    open_until: float | None
    cooldown_until: float | None
    auth: AuthDisable
    locked_models: dict[str, float]


class HealthBoard:
    """The health state of every connection, in ``store`` (``shared_store()``)."""

    def __init__(self, store: StateStore | None = None) -> None:
        self.store: StateStore = store or LocalStore()
        self._in_flight: dict[str, int] = {}

    # ----------------------------------------------------------- reading

    def _get(self, key: str, default: Any) -> Any:
        value = self.store.get(key)
        return default if value is None else value

    def skip_reason(
        self, conn: str, model: str, max_concurrency: int, now: float
    ) -> Skip | None:
        """Why ``model`` on connection ``conn`` must not be called now, if at all.

        The reason is the first that applies (spec 02 §6.3 order); ``retry_after_s``
        is the time until the target is usable, i.e. until *every* active penalty
        has lifted (spec 02 §10 rule 3), not just the reported one.
        """
        breaker, cooldown, auth, locked = self.store.get_many(
            (
                f"breaker:{conn}",
                f"cooldown:{conn}",
                f"auth:{conn}",
                f"lock:{conn}:{model}",
            )
        )
        blocks: list[tuple[str, float]] = []
        if breaker is not None and breaker.open_until is not None:
            if breaker.circuit(now) is Circuit.OPEN:
                blocks.append(("circuit_open", breaker.open_until - now))
            elif breaker.probe_taken(now):
                blocks.append(("circuit_open", breaker.probe_until - now))
        if cooldown is not None and cooldown.active(now):
            blocks.append(("cooldown", cooldown.until - now))
        if auth is not None and auth.active(now):
            blocks.append(("auth_disabled", auth.until - now))
        if locked is not None and now < locked:
            blocks.append(("model_locked", locked - now))
        if max_concurrency > 0 and self._in_flight.get(conn, 0) >= max_concurrency:
            blocks.append(("busy", BUSY_RETRY_AFTER_SECONDS))
        if not blocks:
            return None
        return Skip(blocks[0][0], max(wait for _, wait in blocks))

    def describe_circuit(self, conn: str, now: float) -> Circuit:
        breaker: Breaker = self._get(f"breaker:{conn}", Breaker())
        return breaker.circuit(now)

    def cooldown_remaining(self, conn: str, now: float) -> float | None:
        cooldown: Cooldown = self._get(f"cooldown:{conn}", Cooldown())
        return (
            (cooldown.until - now) if cooldown.active(now) and cooldown.until else None
        )

    def describe(self, conn: str, now: float) -> ConnectionHealth:
        breaker: Breaker = self._get(f"breaker:{conn}", Breaker())
        cooldown: Cooldown = self._get(f"cooldown:{conn}", Cooldown())
        locks = {}
        for key in self.store.keys(f"lock:{conn}:"):
            until = self.store.get(key)
            if until is not None and now < until:
                locks[key[len(f"lock:{conn}:") :]] = until
        return ConnectionHealth(
            circuit=breaker.circuit(now),
            open_until=breaker.open_until,
            cooldown_until=cooldown.until if cooldown.active(now) else None,
            auth=self._get(f"auth:{conn}", AuthDisable()),
            locked_models=locks,
        )

    # ----------------------------------------------------------- writing

    def begin(self, conn: str, now: float, timeout_s: float) -> bool:
        """Count the call in flight; claim the probe of a HALF_OPEN breaker.

        False when another request took the probe first (the caller skips).  Only a
        breaker that reads HALF_OPEN is written: the claim is an atomic update, a
        round trip to Redis when the state is shared, and a CLOSED breaker needs none.
        """
        key = f"breaker:{conn}"
        current = self.store.get(key)
        claimed = True
        if current is not None and current.circuit(now) is Circuit.HALF_OPEN:
            claimed = self._claim_probe(key, now, timeout_s)
        if claimed:
            self._in_flight[conn] = self._in_flight.get(conn, 0) + 1
        return claimed

    def _claim_probe(self, key: str, now: float, timeout_s: float) -> bool:
        claimed = True

        def claim(state: Breaker | None) -> Breaker:
            # May run more than once (a shared store retries on a concurrent write).
            nonlocal claimed
            current = state or Breaker()
            claimed = True
            if current.circuit(now) is not Circuit.HALF_OPEN:
                return current
            probed = claim_probe(current, now, timeout_s)
            if probed is None:
                claimed = False
                return current
            return probed

        self.store.update(key, claim, None)
        return claimed

    def end(self, conn: str) -> None:
        count = self._in_flight.get(conn, 0) - 1
        if count > 0:
            self._in_flight[conn] = count
        else:
            self._in_flight.pop(conn, None)

    def record(
        self,
        conn: str,
        model: str,
        reason: str | None,
        detail: str | None,
        *,
        now: float,
        config: HealthConfig,
        retry_after: str | None = None,
        message: str | None = None,
    ) -> str | None:
        """Apply one attempt's outcome; returns the penalty it started, if any."""
        trigger = self._record_breaker(
            conn, breaker_outcome(reason, detail), now, config
        )
        if reason is None:
            self._success(conn, config)
        elif reason == FailureReason.RATE_LIMIT:
            seconds = parse_retry_after(retry_after, now)
            self.store.update(
                f"cooldown:{conn}",
                lambda s: rate_limited(s or Cooldown(), now, seconds, config.cooldown),
                config.cooldown.max_retry_after_seconds + STATE_TTL_EXTRA_SECONDS,
            )
            trigger = "rate_limit"
        elif detail in _AUTH_DETAILS:
            self.store.update(
                f"auth:{conn}",
                lambda s: auth_failed(
                    s or AuthDisable(), now, str(detail), message or "", config.auth
                ),
                config.auth.max_seconds + STATE_TTL_EXTRA_SECONDS,
            )
            trigger = "auth"
        elif detail == FailureDetail.MODEL_NOT_FOUND:
            key = f"lock:{conn}:{model}"
            until = lock_until(self.store.get(key), now, config.model_lock_minutes)
            self.store.set(key, until, until - now)
            trigger = "not_found"
        return trigger

    def _record_breaker(
        self, conn: str, outcome: BreakerOutcome, now: float, config: HealthConfig
    ) -> str | None:
        key = f"breaker:{conn}"
        before = self.store.get(key) or Breaker()  # the mirror: no round trip

        def apply(state: Breaker | None) -> Breaker:
            return record_outcome(state or Breaker(), outcome, now, config.breaker)

        # spec 08 §3.1: a breaker nobody touched for its longest open time + 1 h is
        # forgotten (it would read CLOSED with an empty window anyway)
        ttl = config.breaker.max_open_seconds + STATE_TTL_EXTRA_SECONDS
        # spec 03 §8.8: an outcome is written behind the response where the store
        # can (the Redis mirror); a claim stays a synchronous update
        behind = getattr(self.store, "update_behind", None)
        update = behind if callable(behind) else self.store.update
        after = update(key, apply, ttl)
        opened = (
            isinstance(after, Breaker)
            and after.open_until is not None
            and after.open_until != before.open_until
        )
        return "server_error" if opened else None

    def _success(self, conn: str, config: HealthConfig) -> None:
        cooldown = self.store.get(f"cooldown:{conn}")
        if cooldown is not None and cooldown.level:
            self.store.update(
                f"cooldown:{conn}",
                lambda s: cooldown_success(s or Cooldown()),
                config.cooldown.max_retry_after_seconds + STATE_TTL_EXTRA_SECONDS,
            )
        auth = self.store.get(f"auth:{conn}")
        if auth is not None and auth.failures:
            self.store.update(
                f"auth:{conn}",
                lambda s: auth_success(s or AuthDisable()),
                config.auth.max_seconds + STATE_TTL_EXTRA_SECONDS,
            )

    def reenable(self, conn: str) -> None:
        self.store.update(f"auth:{conn}", lambda s: reenable(s or AuthDisable()), None)

    def reset(self, conn: str) -> None:
        """Admin action: forget every health record of the connection."""
        for key in (f"breaker:{conn}", f"cooldown:{conn}", f"auth:{conn}"):
            self.store.delete(key)
        for key in self.store.keys(f"lock:{conn}:"):
            self.store.delete(key)
        self.store.delete(f"quota:{conn}")
        slug, _, name = conn.partition("@")
        for key in self.store.keys(f"heal:{slug}/"):
            if key.endswith(f"@{name}"):
                self.store.delete(key)  # self-healing exclusions (spec 04 §6)
        # statistics start afresh too: the live window, the latency estimates and
        # the target stats (least-used, p2c)
        from providers.latency import latency
        from providers.live_window import window
        from providers.target_stats import stats

        window.forget_provider(slug)
        latency.forget(slug, name)
        stats.forget(slug, name)


def shared_store() -> StateStore:
    """The state store of this process (spec 03 §8.8), chosen once at start-up.

    Without ``REDIS_URL``, a ``LocalStore``: the embedded default.  With it, Redis
    shared by every worker, with the health keys mirrored in memory
    (``state_mirror``); the mirror starts following Redis on first use.
    """
    try:
        from django.conf import settings

        url = getattr(settings, "REDIS_URL", None)
    except Exception:  # noqa: BLE001 - settings not configured (pure tests)
        url = None
    if not url:
        return LocalStore()
    from providers.redis_store import shared_link
    from providers.state_mirror import MirroredStore

    link = shared_link()
    assert link is not None
    return MirroredStore(link)


board = HealthBoard(shared_store())


def start_shared_state() -> None:
    """Load the health mirror and follow Redis now (start-up) rather than on the
    first request that reads it; a no-op without Redis.  Blocking: one round trip."""
    start = getattr(board.store, "start", None)
    if callable(start):
        start()


def stop_shared_state() -> None:
    """Close this process's Redis link (pub/sub thread and pool) at shutdown."""
    from providers.redis_store import shared_link

    try:
        link = shared_link()
    except Exception:  # noqa: BLE001 - settings not configured (pure tests)
        return
    if link is not None:
        flush = getattr(board.store, "flush_behind", None)
        if callable(flush):
            flush()  # the last outcomes reach Redis before the link closes
        link.close()


def _iso(ts: float | None) -> str | None:
    if ts is None:
        return None
    return datetime.fromtimestamp(ts, UTC).isoformat().replace("+00:00", "Z")


def health_view(connection: Any, now: float | None = None) -> dict[str, Any]:
    """A connection's health as JSON (REST API and admin; times in ISO 8601 UTC)."""
    now = time.time() if now is None else now
    health = board.describe(
        connection_key(connection.provider.slug, connection.name), now
    )
    auth = health.auth
    return {
        "circuit": health.circuit.value,
        "open_until": _iso(health.open_until) if health.circuit != "closed" else None,
        "cooldown_until": _iso(health.cooldown_until),
        "auth_disabled_until": _iso(auth.until) if auth.active(now) else None,
        "auth_status": auth.reason if auth.active(now) else None,
        "auth_message": auth.message if auth.active(now) else None,
        "locked_models": {m: _iso(u) for m, u in sorted(health.locked_models.items())},
    }


@dataclass(frozen=True, slots=True)
class HealthSummary:
    """One connection's health in one word for the console (issue #15): ``state``
    is ``auth_disabled``, ``open``, ``half_open``, ``cooling``, ``locked`` or
    ``healthy``, worst first; ``until`` (epoch seconds) is when it ends, if known."""

    state: str
    detail: str
    until: float | None
    locked: tuple[str, ...]

    @property
    def healthy(self) -> bool:
        return self.state == "healthy"

    @property
    def severity(self) -> str:
        """``bad``, ``warn`` or ``ok`` (the badge colour)."""
        if self.state in ("auth_disabled", "open"):
            return "bad"
        return "ok" if self.healthy else "warn"


def summarize(conn: str, now: float | None = None) -> HealthSummary:
    now = time.time() if now is None else now
    health = board.describe(conn, now)
    locked = tuple(
        sorted(m for m, until in health.locked_models.items() if until > now)
    )
    if health.auth.active(now):
        message = f": {health.auth.message}" if health.auth.message else ""
        reason = health.auth.reason or "auth"
        return HealthSummary(
            "auth_disabled", f"{reason} disabled{message}", health.auth.until, locked
        )
    if health.circuit == Circuit.OPEN:
        return HealthSummary("open", "circuit open", health.open_until, locked)
    if health.circuit == Circuit.HALF_OPEN:
        return HealthSummary("half_open", "circuit half-open: probing", None, locked)
    if health.cooldown_until is not None and health.cooldown_until > now:
        return HealthSummary(
            "cooling", "rate-limit cooldown", health.cooldown_until, locked
        )
    if locked:
        return HealthSummary(
            "locked", "models locked: " + ", ".join(locked), None, locked
        )
    return HealthSummary("healthy", "healthy", None, locked)
