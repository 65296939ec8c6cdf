"""When each scheduled job is next due, for ``run_jobs`` and the admin's Jobs page.

The table is ``settings.OMNIROUTE_JOB_SCHEDULE`` (the data behind
``CELERY_BEAT_SCHEDULE``).  A job is due at ``next_due(schedule, last_started)``:

* never run -> due now (an embedded install gets its catalog at once);
* every N seconds -> ``last_started + N``;
* a crontab ``"m h dom mon dow"`` -> the first matching minute after
  ``last_started`` (UTC).  Fields take ``*``, numbers, ``a-b``, ``*/n``, ``a-b/n``
  and comma lists; when both day fields are restricted either may match (cron's rule).

However long the process was down, a late job runs once: the backlog is dropped, as
Celery's ``expires`` drops it.  Pure: time comes in as arguments.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

_FIELDS = (("minute", 0, 59), ("hour", 0, 23), ("dom", 1, 31), ("month", 1, 12))
_DOW = ("dow", 0, 7)  # 0 and 7 are Sunday
_CRON_FIELD_COUNT = 5
_SUNDAY_ALIAS = 7
_MAX_STEPS = 10_000  # far more than any valid expression needs to find a match


@dataclass(frozen=True, slots=True)
class Cron:
    minutes: frozenset[int]
    hours: frozenset[int]
    days: frozenset[int]
    months: frozenset[int]
    weekdays: frozenset[int]  # 0 = Sunday … 6
    days_restricted: bool
    weekdays_restricted: bool

    def day_matches(self, moment: datetime) -> bool:
        weekday = moment.isoweekday() % 7
        in_days = moment.day in self.days
        in_weekdays = weekday in self.weekdays
        if self.days_restricted and self.weekdays_restricted:
            return in_days or in_weekdays
        return in_days and in_weekdays


def _field(text: str, name: str, low: int, high: int) -> frozenset[int]:
    values: set[int] = set()
    for part in text.split(","):
        span, _, step_text = part.partition("/")
        step = int(step_text) if step_text else 1
        if span == "*":
            first, last = low, high
        elif "-" in span:
            first_text, _, last_text = span.partition("-")
            first, last = int(first_text), int(last_text)
        else:
            first = int(span)
            last = high if step_text else first
        if step < 1 or not low <= first <= last <= high:
            raise ValueError(f"crontab {name} field {text!r} is out of range")
        values.update(range(first, last + 1, step))
    return frozenset(values)


def parse_cron(expression: str) -> Cron:
    """``"17 */6 * * *"`` -> ``Cron``; raises ``ValueError`` on a bad expression."""
    parts = expression.split()
    if len(parts) != _CRON_FIELD_COUNT:
        raise ValueError(f"crontab {expression!r}: expected 5 fields")
    try:
        minutes, hours, days, months = (
            _field(text, *spec) for text, spec in zip(parts, _FIELDS, strict=False)
        )
        weekdays = _field(parts[4], *_DOW)
    except ValueError as exc:
        raise ValueError(f"crontab {expression!r}: {exc}") from exc
    if _SUNDAY_ALIAS in weekdays:
        weekdays = (weekdays - {_SUNDAY_ALIAS}) | {0}
    return Cron(
        minutes=minutes,
        hours=hours,
        days=days,
        months=months,
        weekdays=weekdays,
        days_restricted=parts[2] != "*",
        weekdays_restricted=parts[4] != "*",
    )


def next_cron_time(expression: str, after: datetime) -> datetime:
    """The first minute strictly after ``after`` that the expression matches."""
    cron = parse_cron(expression)
    moment = after.replace(second=0, microsecond=0) + timedelta(minutes=1)
    for _ in range(_MAX_STEPS):
        if moment.month not in cron.months:
            year, month = divmod(moment.month, 12)  # the first day of next month
            moment = moment.replace(
                year=moment.year + year, month=month + 1, day=1, hour=0, minute=0
            )
        elif not cron.day_matches(moment):
            moment = moment.replace(hour=0, minute=0) + timedelta(days=1)
        elif moment.hour not in cron.hours:
            moment = moment.replace(minute=0) + timedelta(hours=1)
        elif moment.minute not in cron.minutes:
            moment += timedelta(minutes=1)
        else:
            return moment
    raise ValueError(f"crontab {expression!r} never matches")


def next_due(
    schedule: str | int, last_started: datetime | None, now: datetime
) -> datetime:
    """When a job with this schedule and last start is due (≤ now: run it)."""
    if last_started is None:
        return now
    if isinstance(schedule, int):
        return last_started + timedelta(seconds=schedule)
    return next_cron_time(schedule, last_started)


def seconds_until(due: datetime, now: datetime) -> float:
    return max(0.0, (due - now).total_seconds())
