"""Self-healing exclusions and probes (spec 04 §6), as a pure state machine.

One entry per candidate key, a plain dict ``{level, excluded_until, probe_pending,
probe_in_flight}`` (plain data, so the runtime store may be in-process or Redis).
No entry means "healthy".  Every function returns a new dict; none mutates its input.

* **Exclude.** A candidate with no entry whose DEFAULT score is below
  ``EXCLUDE_BELOW`` gets level 1, ``excluded_until = now + first`` (``BASE_S``
  unless ``settings.self_healing.exclusion_seconds`` says otherwise), probe pending.
  A candidate that has an entry is left alone: the score rule is suspended until
  the entry is deleted.
* **Excluded** (F9 drops it): ``now < excluded_until``, or a probe is in flight.
* **Probe.** Once the exclusion expires, the first attempt sent to the candidate is
  its probe, with the timeout ``min(attempt timeout, PROBE_TIMEOUT_MS)``.
* **Outcome.** success deletes the entry (the backoff resets); a failover-trigger
  failure sets ``level += 1`` and ``excluded_until = now + min(first·2^(level−1),
  cap)`` (by default 5, 10, 20, 30, 30 min; ``cap`` is
  ``max_exclusion_seconds``), probe pending again; any other 4xx leaves the probe
  pending.

``incident_mode``: more than half of the circuits are OPEN (exactly half is not).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

EXCLUDE_BELOW = 0.2  # DEFAULT score under which a candidate is quarantined (§6)
BASE_S = 300  # first exclusion: 5 min
CAP_S = 1800  # longest exclusion: 30 min
PROBE_TIMEOUT_MS = 10_000  # a probe never waits longer than 10 s

SUCCESS = "success"
FAILURE = "failure"  # a failover-trigger failure (02-failover.md)
OTHER = "other"  # any other 4xx

Entry = Mapping[str, Any]


def _entry(level: int, excluded_until: float, *, in_flight: bool) -> dict[str, Any]:
    return {
        "level": level,
        "excluded_until": excluded_until,
        "probe_pending": True,
        "probe_in_flight": in_flight,
    }


def durations(self_healing: Mapping[str, Any]) -> tuple[float, float]:
    """``(first exclusion, cap)`` in seconds from ``settings.self_healing``."""
    first = float(self_healing.get("exclusion_seconds", BASE_S))
    cap = float(self_healing.get("max_exclusion_seconds", max(CAP_S, first)))
    return first, max(cap, first)


def maybe_exclude(
    entry: dict[str, Any] | None,
    default_score: float,
    now: float,
    first_s: float = BASE_S,
) -> dict[str, Any] | None:
    """A new level-1 entry, excluded for ``first_s``, when there is none and
    ``default_score`` is below 0.2; otherwise ``entry`` unchanged (the same
    object)."""
    if entry is None and default_score < EXCLUDE_BELOW:
        return _entry(1, now + first_s, in_flight=False)
    return entry


def is_excluded(entry: Entry | None, now: float) -> bool:
    """F9 drops the candidate: still cooling down, or its probe is in flight."""
    if entry is None:
        return False
    return bool(now < entry["excluded_until"] or entry["probe_in_flight"])


def is_probe(entry: Entry | None, now: float) -> bool:
    """The next attempt on this candidate is its probe."""
    if entry is None:
        return False
    return bool(
        now >= entry["excluded_until"]
        and entry["probe_pending"]
        and not entry["probe_in_flight"]
    )


def probe_started(entry: Entry) -> dict[str, Any]:
    """The probe is on its way: other requests now treat the candidate as excluded."""
    return {**entry, "probe_in_flight": True}


def probe_finished(
    entry: Entry,
    outcome: str,
    now: float,
    first_s: float = BASE_S,
    cap_s: float = CAP_S,
) -> dict[str, Any] | None:
    """The entry after the probe's ``outcome`` (success | failure | other);
    ``None`` means delete it.  A failure doubles the exclusion from ``first_s`` up
    to ``cap_s``."""
    if outcome == SUCCESS:
        return None
    if outcome == FAILURE:
        level = int(entry["level"]) + 1
        cooldown_s = min(first_s * 2 ** (level - 1), cap_s)
        return _entry(level, now + cooldown_s, in_flight=False)
    if outcome == OTHER:
        return {**entry, "probe_pending": True, "probe_in_flight": False}
    raise ValueError(f"unknown probe outcome {outcome!r}")


def probe_timeout_ms(attempt_timeout_ms: int) -> int:
    """A probe's timeout: the attempt's, capped at 10 s (also the first-token one)."""
    return min(attempt_timeout_ms, PROBE_TIMEOUT_MS)


def incident_mode(circuits: Sequence[str]) -> bool:
    """More than 50 % of ``circuits`` (the F7 output's) are ``"open"``."""
    opened = sum(1 for circuit in circuits if circuit == "open")
    return opened * 2 > len(circuits)
