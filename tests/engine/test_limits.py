"""Per-key limit arithmetic (spec 08 §6): windows, estimates, Retry-After, periods.

Time is a plain number: ``at(minute, seconds)`` is unix milliseconds, so a test
crosses minute boundaries and periods without sleeping.
"""

from __future__ import annotations

import json
import math
from datetime import UTC, datetime
from decimal import Decimal

import pytest

from gateway.kernel.limits import (
    BUDGET_TTL_AFTER_END_SECONDS,
    MAX_RETRY_AFTER_SECONDS,
    PriceCeiling,
    WindowReading,
    budget_admits,
    budget_period,
    candidate_models,
    completion_reserve,
    cost_estimate_micro_usd,
    minute_of,
    prompt_estimate,
    retry_after_seconds,
    sliding_used,
    token_estimate,
    usd_to_micro,
    window_admits,
)
from gateway.kernel.resolve import Resolved, RouteKind
from gateway.kernel.types import ComboInfo, ComboTargetInfo

BASE_MINUTE = 29_000_000  # an arbitrary minute since the epoch


def at(minute: int, seconds: float) -> int:
    """Unix ms ``seconds`` into minute ``BASE_MINUTE + minute``."""
    return (BASE_MINUTE + minute) * 60_000 + round(seconds * 1000)


def ts(text: str) -> float:
    return datetime.fromisoformat(text).replace(tzinfo=UTC).timestamp()


# --- the sliding estimate -------------------------------------------------------------


@pytest.mark.parametrize(
    ("current", "previous", "seconds", "used"),
    [
        (0, 8, 0, 8.0),  # the minute just began: all of the previous one counts
        (4, 8, 15, 10.0),  # 4 + 8 × 45/60
        (4, 8, 30, 8.0),  # 4 + 8 × 30/60
        (4, 8, 45, 6.0),
        (10, 0, 59.5, 10.0),
        (3, 6, 59.999, 3.0001),
    ],
)
def test_sliding_estimate_weights_the_previous_minute_by_what_is_left(
    current, previous, seconds, used
):
    assert sliding_used(current, previous, at(0, seconds)) == pytest.approx(used)


def test_sliding_estimate_is_continuous_across_the_minute_boundary():
    # 10 requests in minute 0: just before the boundary they are "current", just
    # after it they are "previous" with full weight; the estimate does not jump.
    before = sliding_used(10, 0, at(0, 59.999))
    after = sliding_used(0, 10, at(1, 0))
    later = sliding_used(0, 10, at(1, 30))
    assert (before, after, later) == (10.0, 10.0, 5.0)
    assert minute_of(at(0, 59.999)) + 1 == minute_of(at(1, 0))


@pytest.mark.parametrize(
    ("current", "previous", "need", "limit", "seconds", "admits"),
    [
        (5, 10, 1, 10, 30, False),  # used 10: one more would be 11
        (5, 10, 1, 10, 35.9, False),  # used 9.0167
        (5, 10, 1, 10, 36, True),  # used exactly 9
        (9, 0, 1, 10, 0, True),
        (10, 0, 1, 10, 0, False),
        (700, 0, 300, 1000, 10, True),  # E fills the window exactly
        (701, 0, 300, 1000, 10, False),
        (0, 0, 1000, 1000, 0, True),  # one E = tpm fits an empty window
    ],
)
def test_window_admits_exactly_at_the_limit(
    current, previous, need, limit, seconds, admits
):
    assert window_admits(current, previous, need, limit, at(0, seconds)) is admits


# --- Retry-After ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("windows", "seconds", "expected"),
    [
        # rpm 10, 5 now + 10 before, at :30 -> used must reach 9 -> at :36
        ([WindowReading(5, 10, 1, 10)], 30, 6),
        ([WindowReading(5, 10, 1, 10)], 30.5, 6),  # 5.5 s rounds up to whole seconds
        # the current minute is full: wait for it to become "previous" and decay
        # to 9: 40 s to the boundary, then 6 s
        ([WindowReading(10, 0, 1, 10)], 20, 46),
        # rpm 1 used at :00 -> only when that minute has fully slid out
        ([WindowReading(1, 0, 1, 1)], 0, MAX_RETRY_AFTER_SECONDS),
        # tpm 1000, 800 used, E 300: next minute at 800 × (60 - s)/60 ≤ 700 -> s ≥ 7.5
        ([WindowReading(800, 0, 300, 1000)], 10, 58),
        # already admissible windows still answer at least 1 s
        ([WindowReading(0, 0, 1, 10)], 12, 1),
        # two windows: the later of the two
        ([WindowReading(5, 10, 1, 10), WindowReading(800, 0, 300, 1000)], 10, 58),
    ],
)
def test_retry_after_is_the_first_whole_second_that_admits(windows, seconds, expected):
    now = at(0, seconds)
    wait = retry_after_seconds(tuple(windows), now)
    assert wait == expected
    # and it really is the first: one second less would still refuse (when > 1)
    if wait > 1:
        earlier = now + (wait - 1) * 1000
        assert not all(_admits_at(w, now, earlier) for w in windows)


def _admits_at(window: WindowReading, now_ms: int, later_ms: int) -> bool:
    shift = minute_of(later_ms) - minute_of(now_ms)
    current, previous = {
        0: (window.current, window.previous),
        1: (0, window.current),
    }.get(shift, (0, 0))
    return window_admits(current, previous, window.need, window.limit, later_ms)


# --- the token estimate E -------------------------------------------------------------

HI = [{"role": "user", "content": "hi"}]  # json.dumps: 35 characters -> 9 tokens
TOOLS = [{"type": "function", "function": {"name": "f", "parameters": {}}}]  # 67 chars
IMAGE = {
    "type": "image_url",
    "image_url": {"url": "data:image/png;base64," + "A" * 9000},
}
WITH_IMAGE = [{"role": "user", "content": [{"type": "text", "text": "look"}, IMAGE]}]


@pytest.mark.parametrize(
    ("body", "prompt"),
    [
        ({"messages": HI}, 9),
        ({"messages": HI, "tools": TOOLS}, 9 + 17),  # ⌈67 / 4⌉
        # the image part is 1 000 tokens; its base64 is never counted as text
        ({"messages": WITH_IMAGE}, math.ceil(65 / 4) + 1000),
        ({"messages": WITH_IMAGE + HI, "tools": TOOLS}, math.ceil(100 / 4) + 1000 + 17),
        ({}, 1),  # json.dumps(None) is "null": 4 characters
    ],
)
def test_prompt_estimate_is_r_in_plus_tools_over_four(body, prompt):
    assert len(json.dumps(HI)) == 35
    assert prompt_estimate(body) == prompt


@pytest.mark.parametrize(
    ("body", "reserve"),
    [
        ({"max_completion_tokens": 50, "max_tokens": 70}, 50),
        ({"max_tokens": 70}, 70),
        ({}, 1024),
        ({"max_tokens": 0}, 1024),
        ({"max_tokens": True}, 1024),  # a bool is not a count
        ({"max_tokens": "100"}, 1024),
    ],
)
def test_completion_reserve_prefers_the_request_then_the_setting(body, reserve):
    assert completion_reserve(body, 1024) == reserve


@pytest.mark.parametrize(
    ("prompt", "reserve", "tpm", "expected"),
    [
        (9, 1024, None, 1033),
        (9, 1024, 100_000, 1033),
        (9, 1024, 500, 500),  # capped: one big request fits an empty window
        (2000, 0, 1000, 1000),
    ],
)
def test_token_estimate_is_capped_at_tpm(prompt, reserve, tpm, expected):
    assert token_estimate(prompt, reserve, tpm) == expected


# --- the cost estimate C --------------------------------------------------------------


@pytest.mark.parametrize(
    ("prompt", "reserve", "prices", "micro"),
    [
        (1000, 100, PriceCeiling(0.05, 0.40), 90),  # 50 + 40 micro-USD
        (9, 1024, PriceCeiling(3.0, 15.0), 27 + 15_360),
        (1, 1, PriceCeiling(0.01, 0.0), 1),  # 0.01 rounds up: a reservation is safe
        (1000, 1000, PriceCeiling(), 0),  # unpriced candidates reserve nothing
        (100, 0, PriceCeiling(0.1, 0.0), 10),  # exact decimal, no float residue
    ],
)
def test_cost_estimate_in_micro_usd(prompt, reserve, prices, micro):
    assert cost_estimate_micro_usd(prompt, reserve, prices) == micro


PRICED = {
    "pa": {"models": [{"model_id": "m1", "input_cost": 0.05, "output_cost": 0.40}]},
    "pb": {"models": [{"model_id": "m2", "input_cost": 0.15, "output_cost": 0.30}]},
    "pc": {"models": [{"model_id": "m3"}]},  # no price
    "pd": {"models": [{"model_id": "m4", "input_cost": 9.0, "output_cost": 9.0}]},
}


@pytest.mark.parametrize(
    ("model", "ceiling"),
    [
        ("pa/m1", PriceCeiling(0.05, 0.40)),
        ("pc/m3", PriceCeiling(0.0, 0.0)),
        # input from one model, output from another
        ("duo", PriceCeiling(0.15, 0.40)),
        # a combo ref is followed
        ("outer", PriceCeiling(0.15, 0.40)),
        # auto: the whole fleet is the upper bound
        ("auto", PriceCeiling(9.0, 9.0)),
    ],
)
def test_price_ceiling_over_a_slots_candidates(make_table, make_slot, model, ceiling):
    table = make_table(
        PRICED,
        combos={"duo": ["pa/m1", "pb/m2", "pc/m3"], "outer": ["combo:duo"]},
    )
    slot = make_slot(table, model)
    assert PriceCeiling.over(candidate_models(table, slot.resolved)) == ceiling


def test_price_ceiling_includes_a_fusion_judge(make_table):
    table = make_table(PRICED)
    fusion = ComboInfo(
        id=9,
        name="panel",
        strategy="fusion",
        targets=(ComboTargetInfo(model="pa/m1"),),
        config={"judgeModel": "pd/m4"},
    )
    resolved = Resolved(
        kind=RouteKind.COMBO,
        identity="combo:panel",
        route="combo:panel",
        resolved_name="panel",
        combo=fusion,
    )
    assert PriceCeiling.over(candidate_models(table, resolved)) == PriceCeiling(9, 9)


@pytest.mark.parametrize(
    ("spent", "held", "cost", "budget", "admits"),
    [
        (0, 0, 100, 100, True),
        (0, 0, 101, 100, False),
        (50, 40, 10, 100, True),  # spent + reservations + C = budget
        (50, 40, 11, 100, False),
        (60, 40, 0, 100, False),  # exhausted: even a free request is refused
        (0, 0, 0, 0, False),  # budget_usd: 0 admits nothing
    ],
)
def test_budget_counts_spent_and_open_reservations(spent, held, cost, budget, admits):
    assert budget_admits(spent, held, cost, budget) is admits


@pytest.mark.parametrize(
    ("amount", "micro"),
    [
        (None, 0),
        (Decimal("0.0000015000"), 2),
        (Decimal("0.0000014999"), 1),
        (Decimal("12.345678"), 12_345_678),
        (0.01, 10_000),
    ],
)
def test_usd_to_micro_rounds_to_nearest(amount, micro):
    assert usd_to_micro(amount) == micro


# --- periods --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("period", "now", "start", "end"),
    [
        ("day", "2026-03-15T13:45:00", "2026-03-15", "2026-03-16"),
        ("day", "2026-03-15T00:00:00", "2026-03-15", "2026-03-16"),
        ("day", "2026-12-31T23:59:59", "2026-12-31", "2027-01-01"),
        # 2026-03-15 is a Sunday: its week began on Monday the 9th
        ("week", "2026-03-15T23:59:59", "2026-03-09", "2026-03-16"),
        ("week", "2026-03-16T00:00:00", "2026-03-16", "2026-03-23"),  # Monday
        ("week", "2026-01-01T12:00:00", "2025-12-29", "2026-01-05"),  # across years
        ("month", "2026-03-31T23:59:59", "2026-03-01", "2026-04-01"),
        ("month", "2026-04-01T00:00:00", "2026-04-01", "2026-05-01"),
        ("month", "2026-12-15T08:00:00", "2026-12-01", "2027-01-01"),
        ("month", "2028-02-29T10:00:00", "2028-02-01", "2028-03-01"),  # leap year
    ],
)
def test_budget_periods_are_utc_day_monday_week_and_calendar_month(
    period, now, start, end
):
    found = budget_period(period, ts(now))
    assert found.start == datetime.fromisoformat(start).replace(tzinfo=UTC)
    assert found.end == datetime.fromisoformat(end).replace(tzinfo=UTC)
    assert found.label == start
    assert found.expire_at == int(found.end.timestamp()) + BUDGET_TTL_AFTER_END_SECONDS


def test_unknown_budget_period_is_an_error():
    with pytest.raises(ValueError, match="fortnight"):
        budget_period("fortnight", 0.0)
