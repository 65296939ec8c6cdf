"""Per-key rate limits and budgets: the arithmetic (spec 08 §6).

What it decides, all from plain numbers and a clock passed in as ``now`` (unix seconds):

* **Windows.** ``rpm`` and ``tpm`` are sliding estimates over two fixed minute buckets:
  ``used = current + previous × (60 − s) / 60``, ``s`` the time into the current minute.
  The comparison runs in whole milliseconds and integers
  (``current·60000 + previous·(60000 − s_ms) + need·60000 ≤ limit·60000``) so this
  module and the Redis script decide identically, with no float rounding.
* **Estimates.** ``E = R_in + ⌈characters of tools ÷ 4⌉ + reserve``, capped at ``tpm``;
  the reserve is ``max_completion_tokens`` or ``max_tokens`` when set, else the
  configured default.  ``C = prompt estimate × highest input price + reserve × highest
  output price`` over the candidate models; a price missing on a side adds 0.  Prices
  are USD per million tokens, so tokens × price is micro-USD, the unit every budget
  amount uses here (integers, exact in Redis).
* **Retry-After.** The smallest whole number of seconds (≥ 1) after which the sliding
  estimate of every refusing window admits the request, assuming no other traffic.
* **Periods.** ``day``, ``week`` and ``month`` in UTC: from 00:00, from Monday 00:00,
  from the 1st at 00:00.

Invariants: the estimate of a window never increases while no request is counted, so
a Retry-After is never shorter than needed; ``E ≤ tpm`` whenever ``tpm`` is set, so any
single request fits an empty window.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from decimal import ROUND_CEILING, ROUND_HALF_UP, Decimal
from typing import Any

from gateway.kernel.chain import MAX_COMBO_DEPTH
from gateway.kernel.facts import CHARS_PER_TOKEN, input_tokens
from gateway.kernel.resolve import Resolved, RouteKind
from gateway.kernel.types import ComboInfo, ModelInfo, RoutingTable

MINUTE_MS = 60_000
#: spec 08 §3.1: a minute bucket is read during its minute and the next one
WINDOW_TTL_SECONDS = 120
#: spec 08 §6: an open reservation of a crashed worker stops counting after 15 min
RESERVATION_TTL_SECONDS = 900
#: spec 08 §3.1: budget keys outlive their period by two days
BUDGET_TTL_AFTER_END_SECONDS = 2 * 86_400
MICRO_USD_PER_USD = 1_000_000
PERIODS = ("day", "week", "month")
#: Retry-After never exceeds this: two minutes empty both buckets
MAX_RETRY_AFTER_SECONDS = 2 * MINUTE_MS // 1000


def minute_of(now_ms: int) -> int:
    """The minute bucket a time falls in (minutes since the epoch)."""
    return now_ms // MINUTE_MS


def sliding_used(current: int, previous: int, now_ms: int) -> float:
    """``current + previous × (60 − s) / 60`` (for display and tests)."""
    into = now_ms % MINUTE_MS
    return current + previous * (MINUTE_MS - into) / MINUTE_MS


def window_admits(
    current: int, previous: int, need: int, limit: int, now_ms: int
) -> bool:
    """``used + need ≤ limit``, exactly, in integer arithmetic."""
    into = now_ms % MINUTE_MS
    used = current * MINUTE_MS + previous * (MINUTE_MS - into)
    return used + need * MINUTE_MS <= limit * MINUTE_MS


@dataclass(frozen=True, slots=True)
class WindowReading:
    """One window's buckets at admission time: (current, previous) and what it needs."""

    current: int
    previous: int
    need: int
    limit: int


def _admits_after(window: WindowReading, now_ms: int, wait_ms: int) -> bool:
    """Would the window admit at ``now + wait`` if nothing else is counted meanwhile?"""
    later = now_ms + wait_ms
    shift = minute_of(later) - minute_of(now_ms)
    if shift == 0:
        current, previous = window.current, window.previous
    elif shift == 1:
        current, previous = 0, window.current
    else:
        return window.need <= window.limit
    return window_admits(current, previous, window.need, window.limit, later)


def retry_after_seconds(windows: tuple[WindowReading, ...], now_ms: int) -> int:
    """Smallest whole seconds ≥ 1 after which every window admits (spec 08 §6)."""
    for wait in range(1, MAX_RETRY_AFTER_SECONDS + 1):
        if all(_admits_after(w, now_ms, wait * 1000) for w in windows):
            return wait
    return MAX_RETRY_AFTER_SECONDS


def prompt_estimate(body: dict[str, Any]) -> int:
    """``R_in + ⌈characters of tools ÷ 4⌉`` (base64 image data never counts)."""
    tools = body.get("tools")
    tool_chars = len(json.dumps(tools, ensure_ascii=False)) if tools else 0
    return input_tokens(body.get("messages")) + math.ceil(tool_chars / CHARS_PER_TOKEN)


def completion_reserve(body: dict[str, Any], default: int) -> int:
    """``max_completion_tokens`` or ``max_tokens`` when set (a positive int), else
    ``default`` (``OMNIROUTE_RESERVE_COMPLETION_TOKENS``)."""
    for name in ("max_completion_tokens", "max_tokens"):
        value = body.get(name)
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            return value
    return default


def token_estimate(prompt: int, reserve: int, tpm: int | None) -> int:
    """``E``: prompt estimate plus reserve, capped at ``tpm`` when there is one."""
    total = prompt + reserve
    return min(total, tpm) if tpm is not None else total


@dataclass(frozen=True, slots=True)
class PriceCeiling:
    """The highest input and output prices (USD per Mtok) over some candidates."""

    input_cost: float = 0.0
    output_cost: float = 0.0

    @classmethod
    def over(cls, models: Iterable[ModelInfo]) -> PriceCeiling:
        """Over some models; a missing price counts as 0."""
        highest_in = highest_out = 0.0
        for model in models:
            highest_in = max(highest_in, model.input_cost or 0.0)
            highest_out = max(highest_out, model.output_cost or 0.0)
        return cls(highest_in, highest_out)

    def __or__(self, other: PriceCeiling) -> PriceCeiling:
        return PriceCeiling(
            max(self.input_cost, other.input_cost),
            max(self.output_cost, other.output_cost),
        )


def fleet_models(table: RoutingTable) -> Iterator[ModelInfo]:
    """Every model an ``auto`` pool may draw from: served, not deprecated."""
    for provider in table.providers.values():
        if provider.connections:
            yield from (m for m in provider.models.values() if not m.deprecated)


def _combo_members(combo: ComboInfo) -> tuple[list[str], list[str]]:
    """(``provider/model`` names, referenced combo names), the judge included."""
    models = [t.model for t in combo.targets if t.model is not None]
    refs = [t.ref for t in combo.targets if t.ref is not None]
    judge = combo.config.get("judgeModel")
    if isinstance(judge, str) and judge:
        if "/" in judge and not judge.lower().startswith("combo/"):
            models.append(judge)
        else:
            refs.append(judge.split("/", 1)[-1])
    return models, refs


def _combo_models(
    table: RoutingTable, combo: ComboInfo, depth: int
) -> Iterator[ModelInfo]:
    models, refs = _combo_members(combo)
    for name in models:
        slug, _, model_id = name.partition("/")
        provider = table.providers.get(slug.lower())
        model = provider.models.get(model_id) if provider is not None else None
        if model is not None:
            yield model
    for ref in refs:
        inner = table.combos.get(ref.lower())
        if inner is not None and inner.active and depth < MAX_COMBO_DEPTH:
            yield from _combo_models(table, inner, depth + 1)


def candidate_models(table: RoutingTable, resolved: Resolved) -> Iterator[ModelInfo]:
    """The models one chain slot may call, found cheaply (no planning, no health).

    A direct model: its resolved models.  A combo: its declared targets, the
    ``judgeModel`` and referenced combos (to the nesting limit).  ``auto`` (built-in,
    or a combo without targets): the whole fleet, an upper bound of any pool.
    """
    combo = resolved.combo
    if resolved.kind is RouteKind.AUTO or (combo is not None and not combo.targets):
        yield from fleet_models(table)
    elif combo is not None:
        yield from _combo_models(table, combo, 1)
    else:
        yield from resolved.models


def cost_estimate_micro_usd(prompt: int, reserve: int, prices: PriceCeiling) -> int:
    """``C`` in micro-USD, rounded up (a reservation errs on the safe side)."""
    total = Decimal(prompt) * Decimal(str(prices.input_cost)) + Decimal(
        reserve
    ) * Decimal(str(prices.output_cost))
    return int(total.to_integral_value(rounding=ROUND_CEILING))


def usd_to_micro(amount: Decimal | float | None) -> int:
    """A USD amount in micro-USD, to the nearest unit (None is 0)."""
    if amount is None:
        return 0
    micro = Decimal(str(amount)) * MICRO_USD_PER_USD
    return int(micro.to_integral_value(rounding=ROUND_HALF_UP))


def budget_micro_usd(budget_usd: float) -> int:
    return usd_to_micro(budget_usd)


def budget_admits(spent: int, open_reservations: int, cost: int, budget: int) -> bool:
    """``spent + open + C ≤ budget``, and nothing at all once ``spent + open ≥ budget``
    (so a request priced at 0 cannot slip into an exhausted budget)."""
    committed = spent + open_reservations
    return committed < budget and committed + cost <= budget


@dataclass(frozen=True, slots=True)
class Period:
    """One budget period: ``[start, end)`` in UTC and the label used in keys."""

    start: datetime
    end: datetime

    @property
    def label(self) -> str:
        return self.start.strftime("%Y-%m-%d")

    @property
    def expire_at(self) -> int:
        """Unix seconds at which the period's budget keys expire."""
        return int(self.end.timestamp()) + BUDGET_TTL_AFTER_END_SECONDS


def budget_period(period: str, now: float) -> Period:
    """The period of kind ``period`` (day/week/month) that contains ``now``."""
    day = datetime.fromtimestamp(now, UTC).replace(
        hour=0, minute=0, second=0, microsecond=0
    )
    if period == "day":
        return Period(day, day + timedelta(days=1))
    if period == "week":
        start = day - timedelta(days=day.weekday())
        return Period(start, start + timedelta(days=7))
    if period != "month":
        raise ValueError(f"unknown budget period {period!r}")
    start = day.replace(day=1)
    if start.month == 12:  # noqa: PLR2004
        return Period(start, start.replace(year=start.year + 1, month=1))
    return Period(start, start.replace(month=start.month + 1))


__all__ = [
    "BUDGET_TTL_AFTER_END_SECONDS",
    "MICRO_USD_PER_USD",
    "MINUTE_MS",
    "PERIODS",
    "RESERVATION_TTL_SECONDS",
    "WINDOW_TTL_SECONDS",
    "Period",
    "PriceCeiling",
    "WindowReading",
    "budget_admits",
    "budget_micro_usd",
    "budget_period",
    "candidate_models",
    "completion_reserve",
    "cost_estimate_micro_usd",
    "fleet_models",
    "minute_of",
    "prompt_estimate",
    "retry_after_seconds",
    "sliding_used",
    "token_estimate",
    "usd_to_micro",
    "window_admits",
]
