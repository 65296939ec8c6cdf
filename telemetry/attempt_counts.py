"""How attempts are counted (spec 06 §3.4): the rules the 24 h reliability
statistics (``telemetry.reliability``) and the hourly usage rows
(``telemetry.usage``) share.

* ``AttemptRow``: the columns of one ``AttemptLog`` row that both read;
* ``Tally``: the running counts of one group.  ``attempts`` are all rows;
  ``samples`` leave out ``cancelled`` and ``client_error`` (the client's doing);
  ``failures`` are samples whose result is not ``success``, ``bad_output`` those of
  them that are ``empty_response`` or ``stream_interrupted``; the latencies are the
  successes', the times to first token the successful streams';
* ``nearest_rank``: the value at position ceil(p/100 * n) of the ascending list
  (PostgreSQL's ``percentile_disc``, computed here so every backend agrees);
* ``count_changes``: computed records against stored rows, for a job's counts.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime
from decimal import Decimal
from typing import Any, NamedTuple

SUCCESS = "success"
NOT_SAMPLES = frozenset({"cancelled", "client_error"})  # client-caused, spec 06 §3.4
BAD_OUTPUT = frozenset({"empty_response", "stream_interrupted"})  # quality, spec 04


class AttemptRow(NamedTuple):
    """The columns of one ``AttemptLog`` row that the statistics read."""

    provider: str
    model: str
    connection: str
    result: str
    latency_ms: int | None
    ttft_ms: int | None
    stream: bool
    started_at: datetime
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    cached_tokens: int | None = None
    cost_usd: Decimal | None = None


def nearest_rank(ordered: list[int], percent: int) -> int:
    """The value at position ceil(percent/100 * n) of an ascending, non-empty list."""
    position = -(-percent * len(ordered) // 100)  # integer ceil: no float rounding
    return ordered[max(position, 1) - 1]


def percentile_or_none(values: list[int], percent: int, minimum: int) -> int | None:
    """Nearest rank of ``values`` (sorted here), or None below ``minimum`` values."""
    if len(values) < max(minimum, 1):
        return None
    return nearest_rank(sorted(values), percent)


@dataclass(slots=True)
class Tally:
    """The running counts of one group; fed row by row, so rows may be streamed."""

    attempts: int = 0
    samples: int = 0
    failures: int = 0
    successes: int = 0
    bad_output: int = 0
    latencies: list[int] = field(default_factory=list)
    ttfts: list[int] = field(default_factory=list)

    def add(self, row: AttemptRow) -> None:
        self.attempts += 1
        if row.result in NOT_SAMPLES:
            return
        self.samples += 1
        if row.result != SUCCESS:
            self.failures += 1
            if row.result in BAD_OUTPUT:
                self.bad_output += 1
            return
        self.successes += 1
        if row.latency_ms is not None:
            self.latencies.append(row.latency_ms)
        if row.stream and row.ttft_ms is not None:
            self.ttfts.append(row.ttft_ms)


def count_changes(
    records: Iterable[Any],
    stored: dict[tuple[Any, ...], tuple[int, tuple[Any, ...]]],
    value_fields: tuple[str, ...],
) -> tuple[int, int, int, list[int]]:
    """Records against the stored rows (``key -> (pk, values)``): how many are new,
    changed and unchanged, and the primary keys of stored rows no record names."""
    stored = dict(stored)
    created = updated = unchanged = 0
    for record in records:
        old = stored.pop(record.key, None)
        if old is None:
            created += 1
        elif old[1] == tuple(getattr(record, name) for name in value_fields):
            unchanged += 1
        else:
            updated += 1
    return created, updated, unchanged, [pk for pk, _ in stored.values()]
