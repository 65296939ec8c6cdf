"""The health board: skip decisions and attempt outcomes (spec 03 §8, 02 §6.3).

Time is injected: the board takes ``now`` and its ``LocalStore`` reads the same
``Clock`` for TTLs, so a test walks through minutes of state in microseconds.
"""

import threading
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from gateway.kernel.breaker import (
    AuthDisable,
    Breaker,
    BreakerConfig,
    Circuit,
    HealthConfig,
)
from providers.health import HealthBoard, Skip, parse_retry_after
from providers.state_store import LocalStore

CONN = "pa@main"
OTHER = "pa@backup"
CONFIG = HealthConfig()
TIMEOUT_S = 10.0  # the attempt timeout; the probe lease is this + 5 s

# (reason, detail) of the upstream outcomes used below (spec 02 §6.1)
SERVED = (None, None)
HTTP_503 = ("server_error", None)
HTTP_429 = ("rate_limit", None)
HTTP_401 = ("server_error", "auth_failed")
HTTP_402 = ("server_error", "payment_required")
HTTP_404 = ("server_error", "model_not_found")
HTTP_400 = ("invalid_request", None)
CANCELLED = ("client_cancelled", None)


class Clock:
    def __init__(self, now: float = 1000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock():
    return Clock()


@pytest.fixture
def board(clock):
    return HealthBoard(LocalStore(clock=clock))


@pytest.fixture
def record(board, clock):
    """``record(outcome, at=…)``: one attempt's outcome on ``CONN`` for ``m1``."""

    def record(outcome, *, at, conn=CONN, model="m1", config=CONFIG, **kwargs):
        clock.now = at
        reason, detail = outcome
        return board.record(
            conn, model, reason, detail, now=at, config=config, **kwargs
        )

    return record


def open_breaker(record, at):
    """Five 503s at ``at``: the breaker opens until ``at + 30``."""
    return [record(HTTP_503, at=at) for _ in range(5)]


# --- §8.1 circuit breaker (example 11) -----------------------------------------------


def test_five_503s_open_the_breaker_and_only_the_fifth_reports_it(board, record):
    triggers = open_breaker(record, 1000.0)

    assert triggers == [None, None, None, None, "server_error"]
    assert board.skip_reason(CONN, "m1", 0, 1000.0) == Skip("circuit_open", 30.0)
    assert board.describe_circuit(CONN, 1029.0) is Circuit.OPEN


def test_an_open_breaker_blocks_every_model_of_its_connection_only(board, record):
    open_breaker(record, 1000.0)

    assert board.skip_reason(CONN, "m2", 0, 1010.0) == Skip("circuit_open", 20.0)
    assert board.skip_reason(OTHER, "m1", 0, 1010.0) is None


def test_half_open_lets_exactly_one_of_two_concurrent_requests_probe(board, record):
    open_breaker(record, 1000.0)

    assert board.skip_reason(CONN, "m1", 0, 1030.0) is None
    first = board.begin(CONN, 1030.0, TIMEOUT_S)
    second = board.begin(CONN, 1030.0, TIMEOUT_S)

    assert (first, second) == (True, False)
    assert board.skip_reason(CONN, "m1", 0, 1031.0) == Skip("circuit_open", 14.0)


def test_exactly_one_of_many_threads_claims_the_probe(board, record):
    open_breaker(record, 1000.0)
    start = threading.Barrier(8)

    def claim(_):
        start.wait()
        return board.begin(CONN, 1030.0, TIMEOUT_S)

    with ThreadPoolExecutor(max_workers=8) as pool:
        results = list(pool.map(claim, range(8)))

    assert results.count(True) == 1


def test_probe_success_closes_the_breaker_and_clears_its_counters(board, record):
    open_breaker(record, 1000.0)
    assert board.begin(CONN, 1030.0, TIMEOUT_S)

    trigger = record(SERVED, at=1031.0)
    board.end(CONN)

    assert trigger is None
    assert board.describe_circuit(CONN, 1031.0) is Circuit.CLOSED
    assert board.store.get(f"breaker:{CONN}") == Breaker()
    assert board.skip_reason(CONN, "m1", 0, 1031.0) is None


def test_probe_failure_reopens_for_60_then_120_up_to_300_seconds(board, record):
    open_breaker(record, 1000.0)
    now, periods = 1030.0, []
    for _ in range(5):
        assert board.begin(CONN, now, TIMEOUT_S)
        assert record(HTTP_503, at=now) == "server_error"
        board.end(CONN)
        skip = board.skip_reason(CONN, "m1", 0, now)
        assert skip is not None
        periods.append(skip.retry_after_s)
        now += skip.retry_after_s

    assert periods == [60.0, 120.0, 240.0, 300.0, 300.0]


def test_an_ignored_outcome_on_the_probe_releases_it(board, record):
    open_breaker(record, 1000.0)
    assert board.begin(CONN, 1030.0, TIMEOUT_S)

    trigger = record(CANCELLED, at=1031.0)
    board.end(CONN)

    assert trigger is None
    assert board.describe_circuit(CONN, 1031.0) is Circuit.HALF_OPEN
    assert board.begin(CONN, 1031.0, TIMEOUT_S) is True


def test_an_abandoned_probe_lease_expires_after_timeout_plus_five_seconds(
    board, record
):
    open_breaker(record, 1000.0)
    assert board.begin(CONN, 1030.0, TIMEOUT_S)

    assert board.begin(CONN, 1044.9, TIMEOUT_S) is False
    assert board.skip_reason(CONN, "m1", 0, 1045.0) is None
    assert board.begin(CONN, 1045.0, TIMEOUT_S) is True


def test_begin_on_a_closed_breaker_always_succeeds(board):
    assert [board.begin(CONN, 1000.0, TIMEOUT_S) for _ in range(3)] == [True] * 3


def test_alternating_outcomes_open_it_on_the_tenth_within_60_seconds(board, record):
    outcomes = [SERVED, HTTP_503] * 5

    triggers = [
        record(outcome, at=1000.0 + 5 * i) for i, outcome in enumerate(outcomes)
    ]

    assert triggers == [None] * 9 + ["server_error"]
    assert board.skip_reason(CONN, "m1", 0, 1045.0) == Skip("circuit_open", 30.0)


def test_breaker_settings_come_from_the_config(board, record):
    config = HealthConfig(breaker=BreakerConfig(consecutive_failures=2))

    triggers = [record(HTTP_503, at=1000.0, config=config) for _ in range(2)]

    assert triggers == [None, "server_error"]


@pytest.mark.parametrize("outcome", [SERVED, HTTP_400, ("context_length", None)])
def test_answers_that_count_as_success_reset_the_consecutive_count(
    board, record, outcome
):
    for _ in range(4):
        record(HTTP_503, at=1000.0)

    record(outcome, at=1001.0)
    trigger = record(HTTP_503, at=1002.0)

    assert trigger is None
    assert board.describe_circuit(CONN, 1002.0) is Circuit.CLOSED


# --- §8.2 rate-limit cooldown (example 13) -------------------------------------------


def test_example_13_cooldowns_are_30_then_60_then_30_after_a_success(board, record):
    assert record(HTTP_429, at=1000.0) == "rate_limit"
    first = board.cooldown_remaining(CONN, 1000.0)
    record(HTTP_429, at=1030.0)
    second = board.cooldown_remaining(CONN, 1030.0)
    record(SERVED, at=1090.0)
    record(HTTP_429, at=1091.0)
    third = board.cooldown_remaining(CONN, 1091.0)

    assert (first, second, third) == (30.0, 60.0, 30.0)
    assert board.describe_circuit(CONN, 1091.0) is Circuit.CLOSED


@pytest.mark.parametrize(
    ("retry_after", "seconds"),
    [
        ("7", 7.0),
        ("7.5", 7.5),
        ("0", 1.0),
        ("ms:1500", 1.5),
        ("ms:200", 1.0),
        ("Thu, 01 Jan 1970 00:17:00 GMT", 20.0),  # 1020 s after the epoch
        ("99999", 3600.0),
        ("soon", 30.0),
    ],
)
def test_rate_limit_honours_retry_after_within_1_second_and_the_maximum(
    board, record, retry_after, seconds
):
    record(HTTP_429, at=1000.0, retry_after=retry_after)

    assert board.skip_reason(CONN, "m1", 0, 1000.0) == Skip("cooldown", seconds)


def test_a_rate_limit_never_touches_the_breaker(board, record):
    for _ in range(4):
        record(HTTP_503, at=1000.0)
    before = board.store.get(f"breaker:{CONN}")

    for _ in range(10):
        record(HTTP_429, at=1001.0)

    assert board.store.get(f"breaker:{CONN}") == before
    assert record(HTTP_503, at=1002.0) == "server_error"


def test_a_success_never_shortens_an_active_cooldown(board, record):
    record(HTTP_429, at=1000.0, retry_after="120")

    record(SERVED, at=1010.0)

    assert board.cooldown_remaining(CONN, 1010.0) == 110.0


def test_a_new_rate_limit_only_extends_the_cooldown(board, record):
    record(HTTP_429, at=1000.0, retry_after="300")

    record(HTTP_429, at=1010.0, retry_after="7")

    assert board.cooldown_remaining(CONN, 1010.0) == 290.0


def test_cooldown_is_over_when_its_time_is_up(board, record):
    record(HTTP_429, at=1000.0)

    assert board.cooldown_remaining(CONN, 1029.5) == 0.5
    assert board.cooldown_remaining(CONN, 1030.0) is None
    assert board.skip_reason(CONN, "m1", 0, 1030.0) is None


# --- §8.3 auth disable (example 14) --------------------------------------------------


def test_example_14_a_401_disables_for_300_then_600_after_reenable(board, record):
    assert record(HTTP_401, at=1000.0, message="invalid api key") == "auth"
    skipped = board.skip_reason(CONN, "m1", 0, 1000.0)
    shown = board.describe(CONN, 1000.0).auth
    board.reenable(CONN)
    reenabled = board.skip_reason(CONN, "m1", 0, 1001.0)
    record(HTTP_401, at=1002.0)

    assert skipped == Skip("auth_disabled", 300.0)
    assert shown == AuthDisable(
        until=1300.0,
        failures=1,
        reason="auth_failed",
        message="invalid api key",
        at=1000.0,
    )
    assert reenabled is None
    assert board.skip_reason(CONN, "m1", 0, 1002.0) == Skip("auth_disabled", 600.0)


def test_a_402_disables_with_reason_payment_required(board, record):
    assert record(HTTP_402, at=1000.0) == "auth"

    auth = board.describe(CONN, 1000.0).auth

    assert (auth.reason, auth.until, auth.message) == ("payment_required", 1300.0, "")


def test_a_success_resets_the_auth_failure_count(board, record):
    record(HTTP_401, at=1000.0)
    board.reenable(CONN)
    record(SERVED, at=1001.0)

    record(HTTP_401, at=1002.0)

    assert board.skip_reason(CONN, "m1", 0, 1002.0) == Skip("auth_disabled", 300.0)


def test_auth_failures_never_touch_the_breaker(board, record):
    for at in (1000.0, 2000.0, 5000.0, 9000.0, 15000.0):
        board.reenable(CONN)
        record(HTTP_401, at=at)

    assert board.describe_circuit(CONN, 15000.0) is Circuit.CLOSED
    assert board.skip_reason(CONN, "m1", 0, 15000.0) == Skip("auth_disabled", 3600.0)


# --- §8.4 model lock (example 15) ----------------------------------------------------


def test_example_15_a_404_locks_that_model_on_that_connection_for_10_minutes(
    board, record
):
    assert record(HTTP_404, at=1000.0) == "not_found"

    assert board.skip_reason(CONN, "m1", 0, 1000.0) == Skip("model_locked", 600.0)
    assert board.skip_reason(CONN, "m2", 0, 1000.0) is None
    assert board.skip_reason(OTHER, "m1", 0, 1000.0) is None
    assert board.describe(CONN, 1000.0).locked_models == {"m1": 1600.0}
    assert board.describe_circuit(CONN, 1000.0) is Circuit.CLOSED


def test_a_longer_existing_model_lock_is_kept(board, record):
    record(HTTP_404, at=1000.0, config=HealthConfig(model_lock_minutes=30))

    record(HTTP_404, at=1100.0)

    assert board.describe(CONN, 1100.0).locked_models == {"m1": 2800.0}


def test_a_later_404_extends_the_model_lock(board, record):
    record(HTTP_404, at=1000.0)

    record(HTTP_404, at=1300.0)

    assert board.skip_reason(CONN, "m1", 0, 1300.0) == Skip("model_locked", 600.0)


def test_a_model_lock_is_gone_from_the_store_when_it_expires(board, record, clock):
    record(HTTP_404, at=1000.0)
    clock.now = 1600.0

    assert board.skip_reason(CONN, "m1", 0, 1600.0) is None
    assert board.store.keys(f"lock:{CONN}:") == []


# --- skip order, retry_after_s and busy (02 §6.3, §10 rule 3) ------------------------


def test_skip_reasons_come_in_spec_order_as_each_penalty_lifts(board, record):
    record(HTTP_404, at=1000.0)  # model lock until 1600
    record(HTTP_401, at=1000.0)  # auth disable until 1300
    record(HTTP_429, at=1000.0, retry_after="200")  # cooldown until 1200
    open_breaker(record, 1000.0)  # open until 1030
    board.begin(CONN, 1000.0, TIMEOUT_S)  # one call in flight

    reasons = [
        board.skip_reason(CONN, "m1", 1, now)
        for now in (1000.0, 1100.0, 1250.0, 1400.0, 1700.0)
    ]

    assert reasons == [
        Skip("circuit_open", 600.0),
        Skip("cooldown", 500.0),
        Skip("auth_disabled", 350.0),
        Skip("model_locked", 200.0),
        Skip("busy", 1.0),
    ]


def test_retry_after_is_the_time_until_every_penalty_has_lifted(board, record):
    open_breaker(record, 1000.0)  # open until 1030
    record(HTTP_429, at=1000.0, retry_after="90")  # cooldown until 1090

    assert board.skip_reason(CONN, "m1", 0, 1000.0) == Skip("circuit_open", 90.0)


def test_busy_when_in_flight_reaches_max_concurrency(board):
    board.begin(CONN, 1000.0, TIMEOUT_S)
    one = board.skip_reason(CONN, "m1", 2, 1000.0)
    board.begin(CONN, 1000.0, TIMEOUT_S)
    two = board.skip_reason(CONN, "m1", 2, 1000.0)
    board.end(CONN)
    after_end = board.skip_reason(CONN, "m1", 2, 1000.0)

    assert one is None
    assert two == Skip("busy", 1.0)
    assert after_end is None
    assert board.skip_reason(OTHER, "m1", 1, 1000.0) is None


def test_max_concurrency_zero_means_unlimited(board):
    for _ in range(50):
        board.begin(CONN, 1000.0, TIMEOUT_S)

    assert board.skip_reason(CONN, "m1", 0, 1000.0) is None


def test_end_never_drives_the_in_flight_count_below_zero(board):
    board.end(CONN)
    board.begin(CONN, 1000.0, TIMEOUT_S)

    assert board.skip_reason(CONN, "m1", 1, 1000.0) == Skip("busy", 1.0)


def test_a_refused_probe_is_not_counted_in_flight(board, record):
    open_breaker(record, 1000.0)
    assert board.begin(CONN, 1030.0, TIMEOUT_S)
    assert not board.begin(CONN, 1030.0, TIMEOUT_S)

    record(SERVED, at=1031.0)
    board.end(CONN)  # only the probe ends; the refused call never began

    assert board.skip_reason(CONN, "m1", 1, 1031.0) is None


# --- record's trigger ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("outcome", "trigger"),
    [
        (SERVED, None),
        (HTTP_400, None),
        (("context_length", None), None),
        (HTTP_503, None),  # one failure does not open the breaker
        (("connection_error", None), None),
        (("timeout", None), None),
        (CANCELLED, None),
        (("timeout", "straggler_dropped"), None),
        (HTTP_429, "rate_limit"),
        (HTTP_401, "auth"),
        (HTTP_402, "auth"),
        (HTTP_404, "not_found"),
    ],
)
def test_record_returns_the_penalty_the_attempt_started(record, outcome, trigger):
    assert record(outcome, at=1000.0) == trigger


def test_failures_while_open_report_no_trigger(board, record):
    open_breaker(record, 1000.0)

    assert record(HTTP_503, at=1010.0) is None
    assert board.skip_reason(CONN, "m1", 0, 1010.0) == Skip("circuit_open", 20.0)


# --- reset ---------------------------------------------------------------------------


def test_reset_forgets_every_health_record_of_the_connection(board, record):
    open_breaker(record, 1000.0)
    record(HTTP_429, at=1000.0)
    record(HTTP_401, at=1000.0)
    record(HTTP_404, at=1000.0, model="m1")
    record(HTTP_404, at=1000.0, model="m2")
    record(HTTP_404, at=1000.0, conn=OTHER)

    board.reset(CONN)

    assert board.skip_reason(CONN, "m1", 0, 1000.0) is None
    assert board.skip_reason(CONN, "m2", 0, 1000.0) is None
    assert board.store.keys(f"lock:{CONN}:") == []
    assert board.describe(CONN, 1000.0).auth == AuthDisable()
    assert board.skip_reason(OTHER, "m1", 0, 1000.0) == Skip("model_locked", 600.0)
    record(HTTP_401, at=1001.0)
    assert board.skip_reason(CONN, "m1", 0, 1001.0) == Skip("auth_disabled", 300.0)


# --- parse_retry_after ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "seconds"),
    [
        ("7", 7.0),
        (" 7 ", 7.0),
        ("0", 0.0),
        ("1.25", 1.25),
        ("ms:1500", 1.5),
        ("ms:0", 0.0),
        ("Wed, 21 Oct 2015 07:28:00 GMT", 10.0),
        ("Wed, 21 Oct 2015 07:27:00 GMT", 0.0),  # in the past
        (None, None),
        ("", None),
        ("soon", None),
        ("ms:", None),
        ("ms:abc", None),
        ("12 seconds", None),
        ("Wed, 32 Oct 2015 07:28:00 GMT", None),
        ("nan", None),
        ("inf", None),
        ("-5", None),
        ("ms:-100", None),
    ],
)
def test_parse_retry_after(value, seconds):
    now = 1445412470.0  # Wed, 21 Oct 2015 07:27:50 GMT

    assert parse_retry_after(value, now) == seconds


@pytest.fixture
def new_york_local_time(monkeypatch):
    monkeypatch.setenv("TZ", "America/New_York")
    time.tzset()
    yield
    monkeypatch.undo()
    time.tzset()


@pytest.mark.usefixtures("new_york_local_time")
def test_an_http_date_without_zone_is_read_as_gmt_not_local_time():
    now = 1445412470.0  # Wed, 21 Oct 2015 07:27:50 GMT

    assert parse_retry_after("Wed, 21 Oct 2015 07:28:00", now) == 10.0
    assert parse_retry_after("Wed, 21 Oct 2015 07:28:00 -0000", now) == 10.0


def test_health_records_expire_an_hour_after_their_longest_penalty(
    board, record, clock
):
    """Spec 08 §3.1: breakers live their reset timeout + 1 h, cooldowns until + 1 h."""
    open_breaker(record, at=1000.0)
    store = board.store
    _, breaker_expiry = store._data[f"breaker:{CONN}"]
    assert breaker_expiry == 1000.0 + CONFIG.breaker.max_open_seconds + 3600
    clock.now = breaker_expiry + 1
    assert store.get(f"breaker:{CONN}") is None  # forgotten: reads as CLOSED
