"""Health state transitions (spec 03 §8.1–8.4): pure ``(state, outcome, now) -> state``.

* Circuit breaker, one per connection: CLOSED counts failures (consecutive, and a
  sliding window of outcomes, kept in 1-second buckets); either rule opens it for
  ``open_seconds``, except that a consecutive run on a connection whose window holds
  ``min_requests`` outcomes with a failure share below ``failure_ratio`` (it mostly
  answers: the run may be chance under a partial failure) opens it for
  ``partial_open_seconds``, again after each failed probe until the run (probes
  included) reaches twice ``consecutive_failures``, then ``open_seconds`` (spec 03
  §8.1, amended).  When
  ``open_until`` passes it reads HALF_OPEN: exactly one request may claim the probe (a
  lease of the attempt timeout + 5 s); probe success closes it and clears everything,
  probe failure re-opens it for twice as long (capped); an ignored outcome releases the
  probe.  Outcomes are classified by ``breaker_outcome`` (success / failure / ignored).
* Rate-limit cooldown per connection: extend-only ``until``; the upstream's
  ``Retry-After`` is honoured exactly (1 s .. ``max_retry_after_seconds``), else
  ``min(base · 2^(level−1), max)``; a success resets the level, never the cooldown.
* Auth disable per connection on 401/402/403: ``seconds · 2^(n−1)`` capped; a success
  resets ``n``; re-enabling clears ``until`` but keeps ``n``.
* Model lock per (connection, model) on model-not-found: extend-only.

Invariants: functions never mutate their input; a rate limit never touches the
breaker; ``until`` values only ever grow except through an explicit reset.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from enum import StrEnum
from typing import Any, TypeVar

from gateway.kernel.errors import FailureDetail, FailureReason

WINDOW_BUCKET_SECONDS = 1.0  # resolution of the failure-ratio window
PROBE_LEASE_EXTRA_SECONDS = 5.0  # spec 03 §8.1: the attempt's timeout + 5 s
RATE_LEVEL_FORGET_SECONDS = 600.0  # spec 03 §8.2: a level with no rate limit for 600 s


class Circuit(StrEnum):
    CLOSED = "closed"
    HALF_OPEN = "half_open"
    OPEN = "open"


class BreakerOutcome(StrEnum):
    SUCCESS = "success"
    FAILURE = "failure"
    IGNORED = "ignored"


_Config = TypeVar("_Config", "BreakerConfig", "CooldownConfig", "AuthDisableConfig")


def config_from_settings(cls: type[_Config], data: Mapping[str, Any]) -> _Config:
    """A config from a YAML ``settings:`` group; keys it does not know are ignored."""
    known: dict[str, Any] = {k: v for k, v in data.items() if k in cls.__slots__}
    return cls(**known)


@dataclass(frozen=True, slots=True, kw_only=True)
class BreakerConfig:
    consecutive_failures: int = 5
    window_seconds: float = 60.0
    min_requests: int = 10
    failure_ratio: float = 0.5
    open_seconds: float = 30.0
    max_open_seconds: float = 300.0
    #: spec 03 §8.1 (amended): the open period of a consecutive run on a connection
    #: that mostly answers (see ``record_outcome``); capped at ``open_seconds``
    partial_open_seconds: float = 5.0


@dataclass(frozen=True, slots=True, kw_only=True)
class CooldownConfig:
    base_seconds: float = 30.0
    max_seconds: float = 300.0
    max_retry_after_seconds: float = 3600.0


@dataclass(frozen=True, slots=True, kw_only=True)
class AuthDisableConfig:
    seconds: float = 300.0
    max_seconds: float = 3600.0


@dataclass(frozen=True, slots=True, kw_only=True)
class Breaker:
    consecutive: int = 0
    #: 1-second buckets inside the window, oldest first:
    #: (time of the bucket's latest outcome, outcomes, failures)
    window: tuple[tuple[float, int, int], ...] = ()
    open_until: float | None = None
    open_seconds: float | None = None  # the current open period (doubles per probe)
    probe_until: float | None = None  # the probe lease while HALF_OPEN
    #: the open period is ``partial_open_seconds`` (spec 03 §8.1, amended); while
    #: it is, ``consecutive`` keeps counting the run through failed probes
    partial: bool = False

    def circuit(self, now: float) -> Circuit:
        if self.open_until is None:
            return Circuit.CLOSED
        return Circuit.OPEN if now < self.open_until else Circuit.HALF_OPEN

    def probe_taken(self, now: float) -> bool:
        return self.probe_until is not None and now < self.probe_until


def breaker_outcome(reason: str | None, detail: str | None) -> BreakerOutcome:
    """Spec 03 §8.1: what an attempt's outcome means to its connection's breaker."""
    if reason is None:
        return BreakerOutcome.SUCCESS
    if reason in (FailureReason.INVALID_REQUEST, FailureReason.CONTEXT_LENGTH):
        return BreakerOutcome.SUCCESS
    if reason in (FailureReason.RATE_LIMIT, FailureReason.CLIENT_CANCELLED):
        return BreakerOutcome.IGNORED
    if detail in (
        FailureDetail.AUTH_FAILED,
        FailureDetail.PAYMENT_REQUIRED,
        FailureDetail.MODEL_NOT_FOUND,
        "straggler_dropped",
    ):
        return BreakerOutcome.IGNORED
    return BreakerOutcome.FAILURE


def claim_probe(state: Breaker, now: float, attempt_timeout_s: float) -> Breaker | None:
    """The state with the probe claimed, or None when it is OPEN or already taken."""
    if state.circuit(now) is not Circuit.HALF_OPEN or state.probe_taken(now):
        return None
    return replace(
        state, probe_until=now + attempt_timeout_s + PROBE_LEASE_EXTRA_SECONDS
    )


def _open(state: Breaker, now: float, seconds: float) -> Breaker:
    return Breaker(
        open_until=now + seconds,
        open_seconds=seconds,
        consecutive=state.consecutive,
        window=state.window,
    )


def _add_to_window(
    window: tuple[tuple[float, int, int], ...], now: float, seconds: float, failed: bool
) -> tuple[tuple[float, int, int], ...]:
    """Count one outcome in its 1-second bucket; drop buckets wholly outside.

    Buckets keep the cost of an outcome constant however busy the connection is (an
    exact list of outcomes made every call O(requests per window)).  A bucket counts
    until its latest outcome leaves the window, so an outcome may count up to 1 s
    longer than ``window_seconds``.
    """
    horizon = now - seconds
    start = 0
    while start < len(window) and window[start][0] <= horizon:
        start += 1
    kept = window[start:]
    if kept and int(kept[-1][0] // WINDOW_BUCKET_SECONDS) == int(
        now // WINDOW_BUCKET_SECONDS
    ):
        _, outcomes, failures = kept[-1]
        return (*kept[:-1], (now, outcomes + 1, failures + int(failed)))
    return (*kept, (now, 1, int(failed)))


def record_outcome(  # noqa: PLR0911
    state: Breaker, outcome: BreakerOutcome, now: float, config: BreakerConfig
) -> Breaker:
    """Apply one outcome; returns the new state (``state`` itself when unchanged)."""
    circuit = state.circuit(now)
    if circuit is Circuit.HALF_OPEN:
        if outcome is BreakerOutcome.SUCCESS:
            return Breaker()
        if outcome is BreakerOutcome.FAILURE and state.partial:
            run = state.consecutive + 1
            if run < 2 * config.consecutive_failures:
                # one failed probe says little under a partial failure (30 % of
                # probes fail): open as briefly again, the run goes on
                return replace(
                    _open(state, now, state.open_seconds or config.open_seconds),
                    consecutive=run,
                    partial=True,
                )
            # the run went on through the probes: an outage, the full open time
            return _open(state, now, config.open_seconds)
        if outcome is BreakerOutcome.FAILURE:
            doubled = min(
                (state.open_seconds or config.open_seconds) * 2, config.max_open_seconds
            )
            return _open(state, now, doubled)
        return replace(state, probe_until=None)
    if circuit is Circuit.OPEN or outcome is BreakerOutcome.IGNORED:
        return state
    window = _add_to_window(
        state.window, now, config.window_seconds, outcome is BreakerOutcome.FAILURE
    )
    if outcome is BreakerOutcome.SUCCESS:
        return Breaker(consecutive=0, window=window)
    consecutive = state.consecutive + 1
    outcomes = sum(bucket[1] for bucket in window)
    failures = sum(bucket[2] for bucket in window)
    measured = outcomes >= config.min_requests
    window_trips = measured and failures / outcomes >= config.failure_ratio
    if window_trips:
        seconds = config.open_seconds
    elif consecutive >= config.consecutive_failures:
        # A run on a connection whose window shows it mostly answering: under a
        # partial failure (say 30 % 500s) a run of five comes by chance every few
        # hundred attempts, so the open is short and a successful probe closes it;
        # failed probes extend the run, and a run of twice consecutive_failures
        # (an outage) opens it for open_seconds, doubling as usual from there.
        if measured:
            seconds = min(config.partial_open_seconds, config.open_seconds)
            return Breaker(
                open_until=now + seconds,
                open_seconds=seconds,
                consecutive=consecutive,
                window=window,
                partial=True,
            )
        seconds = config.open_seconds
    else:
        return Breaker(consecutive=consecutive, window=window)
    return Breaker(open_until=now + seconds, open_seconds=seconds)


@dataclass(frozen=True, slots=True, kw_only=True)
class Cooldown:
    until: float | None = None
    level: int = 0
    last_rate_limit_at: float | None = None

    def active(self, now: float) -> bool:
        return self.until is not None and now < self.until


def rate_limited(
    state: Cooldown, now: float, retry_after_s: float | None, config: CooldownConfig
) -> Cooldown:
    """A 429 (or in-stream rate-limit error) on the connection (spec 03 §8.2)."""
    level = state.level
    if state.last_rate_limit_at is not None and (
        now - state.last_rate_limit_at >= RATE_LEVEL_FORGET_SECONDS
    ):
        level = 0
    level += 1
    if retry_after_s is not None:
        duration = min(max(retry_after_s, 1.0), config.max_retry_after_seconds)
    else:
        duration = min(config.base_seconds * 2 ** (level - 1), config.max_seconds)
    until = now + duration
    if state.until is not None and state.until > until:
        until = state.until
    return Cooldown(until=until, level=level, last_rate_limit_at=now)


def cooldown_success(state: Cooldown) -> Cooldown:
    return state if state.level == 0 else replace(state, level=0)


@dataclass(frozen=True, slots=True, kw_only=True)
class AuthDisable:
    until: float | None = None
    failures: int = 0
    reason: str | None = None  # auth_failed | payment_required
    message: str | None = None
    at: float | None = None

    def active(self, now: float) -> bool:
        return self.until is not None and now < self.until


def auth_failed(
    state: AuthDisable, now: float, detail: str, message: str, config: AuthDisableConfig
) -> AuthDisable:
    failures = state.failures + 1
    duration = min(config.seconds * 2 ** (failures - 1), config.max_seconds)
    return AuthDisable(
        until=now + duration, failures=failures, reason=detail, message=message, at=now
    )


def auth_success(state: AuthDisable) -> AuthDisable:
    return state if state.failures == 0 else replace(state, failures=0)


def reenable(state: AuthDisable) -> AuthDisable:
    """'Re-enable now' / new credentials: clears ``until``, keeps the count."""
    return replace(state, until=None)


def lock_until(existing: float | None, now: float, minutes: float) -> float:
    until = now + minutes * 60
    return existing if existing is not None and existing > until else until


@dataclass(frozen=True, slots=True, kw_only=True)
class HealthConfig:
    breaker: BreakerConfig = field(default_factory=BreakerConfig)
    cooldown: CooldownConfig = field(default_factory=CooldownConfig)
    auth: AuthDisableConfig = field(default_factory=AuthDisableConfig)
    model_lock_minutes: float = 10.0
