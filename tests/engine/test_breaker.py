"""Pure health transitions (spec 03 §8.1-8.4, §10 examples 11-15).

Every function takes ``now`` as a plain float: a test replays minutes of traffic in
microseconds and asserts exact deadlines.
"""

import random

import pytest

from gateway.kernel.breaker import (
    PROBE_LEASE_EXTRA_SECONDS,
    AuthDisable,
    AuthDisableConfig,
    Breaker,
    BreakerConfig,
    BreakerOutcome,
    Circuit,
    Cooldown,
    CooldownConfig,
    auth_failed,
    auth_success,
    breaker_outcome,
    claim_probe,
    config_from_settings,
    cooldown_success,
    lock_until,
    rate_limited,
    record_outcome,
    reenable,
)
from gateway.kernel.errors import FailureDetail, FailureReason

CONFIG = BreakerConfig()
COOLDOWN = CooldownConfig()
AUTH = AuthDisableConfig()

SUCCESS = BreakerOutcome.SUCCESS
FAILURE = BreakerOutcome.FAILURE
IGNORED = BreakerOutcome.IGNORED


def replay(outcomes, times, state=None, config=CONFIG):
    """Apply ``outcomes`` ("S", "F", "I") at ``times``; returns the final state."""
    codes = {"S": SUCCESS, "F": FAILURE, "I": IGNORED}
    state = state or Breaker()
    for code, now in zip(outcomes, times, strict=True):
        state = record_outcome(state, codes[code], now, config)
    return state


def opened_at(now, config=CONFIG):
    """A breaker that the 5th consecutive failure opened at ``now``."""
    return replay("FFFFF", [now] * 5, config=config)


# --- §8.1 the outcome table ----------------------------------------------------------


@pytest.mark.parametrize(
    ("reason", "detail", "expected"),
    [
        # served; the upstream answered properly
        (None, None, SUCCESS),
        (FailureReason.INVALID_REQUEST, None, SUCCESS),
        (FailureReason.CONTEXT_LENGTH, None, SUCCESS),
        # owned by another health record, or nobody's fault
        (FailureReason.RATE_LIMIT, None, IGNORED),
        (FailureReason.SERVER_ERROR, FailureDetail.AUTH_FAILED, IGNORED),
        (FailureReason.SERVER_ERROR, FailureDetail.PAYMENT_REQUIRED, IGNORED),
        (FailureReason.SERVER_ERROR, FailureDetail.MODEL_NOT_FOUND, IGNORED),
        (FailureReason.CLIENT_CANCELLED, None, IGNORED),
        (FailureReason.TIMEOUT, "straggler_dropped", IGNORED),
        # the connection is unwell
        (FailureReason.CONNECTION_ERROR, None, FAILURE),
        (FailureReason.TIMEOUT, None, FAILURE),
        (FailureReason.TIMEOUT, FailureDetail.FIRST_TOKEN, FAILURE),
        (FailureReason.TIMEOUT, FailureDetail.IDLE, FAILURE),
        (FailureReason.SERVER_ERROR, None, FAILURE),
        (FailureReason.SERVER_ERROR, FailureDetail.BAD_RESPONSE, FAILURE),
        (FailureReason.SERVER_ERROR, FailureDetail.EMPTY_STREAM, FAILURE),
        (FailureReason.SERVER_ERROR, FailureDetail.EMPTY_OUTPUT, FAILURE),
        (FailureReason.SERVER_ERROR, FailureDetail.UNEXPECTED_STATUS, FAILURE),
    ],
)
def test_breaker_outcome_follows_the_spec_table(reason, detail, expected):
    assert breaker_outcome(reason, detail) is expected


def test_breaker_outcome_accepts_plain_strings():
    assert breaker_outcome("rate_limit", None) is IGNORED
    assert breaker_outcome("server_error", "model_not_found") is IGNORED
    assert breaker_outcome("server_error", "bad_response") is FAILURE
    assert breaker_outcome("context_length", None) is SUCCESS


# --- §8.1 CLOSED -> OPEN -----------------------------------------------------------


def test_a_fresh_breaker_is_closed():
    assert Breaker().circuit(0.0) is Circuit.CLOSED


@pytest.mark.parametrize("failures", [1, 2, 3, 4])
def test_fewer_than_five_consecutive_failures_keep_it_closed(failures):
    state = replay("F" * failures, [100.0] * failures)

    assert state.circuit(100.0) is Circuit.CLOSED
    assert state.consecutive == failures


def test_five_consecutive_failures_open_it_for_30_seconds():
    state = replay("FFFFF", [100.0, 101.0, 102.0, 103.0, 104.0])

    assert state.open_until == 134.0
    assert state.open_seconds == 30.0
    assert state.circuit(104.0) is Circuit.OPEN
    assert state.circuit(133.999) is Circuit.OPEN
    assert state.circuit(134.0) is Circuit.HALF_OPEN


def test_a_run_on_a_connection_that_mostly_answers_opens_it_for_5_seconds():
    # spec 03 §8.1 (amended): 20 successes then a run of 5 in the window
    state = replay("S" * 20 + "FFFFF", [100.0 + i * 0.1 for i in range(25)])

    assert state.open_seconds == 5.0
    assert state.open_until == pytest.approx(102.4 + 5.0)
    assert state.circuit(107.0) is Circuit.OPEN
    assert state.circuit(107.5) is Circuit.HALF_OPEN


def test_failed_probes_after_a_partial_open_extend_the_run_then_open_it_fully():
    state = replay("S" * 20 + "FFFFF", [100.0] * 25)
    periods = []
    for _ in range(6):
        now = state.open_until
        state = record_outcome(claim_probe(state, now, 10.0), FAILURE, now, CONFIG)
        periods.append(state.open_seconds)

    # the run: 5, then probes 6..9 at 5 s each; the 10th failure in a row is an
    # outage: open_seconds, then doubling as usual
    assert periods == [5.0, 5.0, 5.0, 5.0, 30.0, 60.0]
    assert not state.partial


def test_a_successful_probe_after_a_partial_open_clears_everything():
    state = replay("S" * 20 + "FFFFF", [100.0] * 25)
    now = state.open_until
    state = record_outcome(claim_probe(state, now, 10.0), FAILURE, now, CONFIG)
    now = state.open_until

    closed = record_outcome(claim_probe(state, now, 10.0), SUCCESS, now, CONFIG)

    assert closed == Breaker()


def test_the_window_rule_keeps_the_full_open_time():
    # 10 outcomes, 5 failures: the window's share reaches failure_ratio 0.5
    state = replay("SSSSSFFFFF", [100.0] * 10)

    assert state.open_seconds == 30.0


def test_a_run_before_min_requests_outcomes_keeps_the_full_open_time():
    # 9 outcomes: too few for the window to show the connection mostly answering
    assert replay("SSSSFFFFF", [100.0] * 9).open_seconds == 30.0


def test_partial_open_seconds_is_capped_at_open_seconds():
    config = BreakerConfig(open_seconds=3, partial_open_seconds=5)

    state = replay("S" * 20 + "FFFFF", [100.0] * 25, config=config)

    assert state.open_seconds == 3.0


def test_a_30_percent_failure_rate_opens_it_briefly():
    """Seeded Bernoulli(0.3) outcomes at 30 attempts/s for 30 s after 2 s of
    successes: chance runs open it for 5 s (again 5 s after a failed probe), where
    the unamended rule kept it open 30 s from the first run."""
    rng = random.Random(17)
    state = replay("S" * 60, [100.0 + i / 30 for i in range(60)])
    periods = []
    served = 0
    for i in range(900):
        now = 102.0 + i / 30
        circuit = state.circuit(now)
        if circuit is Circuit.OPEN:
            continue
        if circuit is Circuit.HALF_OPEN:
            state = claim_probe(state, now, 10.0) or state
        served += 1
        before = state.open_until
        outcome = FAILURE if rng.random() < 0.3 else SUCCESS
        state = record_outcome(state, outcome, now, CONFIG)
        if state.open_until is not None and state.open_until != before:
            periods.append(state.open_seconds)

    assert periods == [5.0, 5.0, 5.0, 5.0]
    assert served == 437


def test_a_success_resets_the_consecutive_count():
    state = replay("FFFFSFFFF", [100.0 + i for i in range(9)])

    assert state.circuit(108.0) is Circuit.CLOSED
    assert state.consecutive == 4


def test_an_ignored_outcome_neither_counts_nor_resets_while_closed():
    before = replay("FFFF", [100.0] * 4)

    after = record_outcome(before, IGNORED, 101.0, CONFIG)

    assert after is before
    assert record_outcome(after, FAILURE, 102.0, CONFIG).circuit(102.0) is Circuit.OPEN


def test_outcomes_while_open_change_nothing():
    state = opened_at(100.0)

    for outcome in (SUCCESS, FAILURE, IGNORED):
        assert record_outcome(state, outcome, 120.0, CONFIG) is state


def test_alternating_outcomes_open_it_after_the_tenth_within_the_window():
    times = [100.0 + 5 * i for i in range(10)]  # 45 s span

    nine = replay("SFSFSFSFS", times[:9])
    ten = record_outcome(nine, FAILURE, times[9], CONFIG)

    assert nine.circuit(times[8]) is Circuit.CLOSED
    assert ten.circuit(times[9]) is Circuit.OPEN
    assert ten.open_until == times[9] + 30.0


def test_four_failures_in_ten_outcomes_stay_below_the_ratio():
    state = replay("SSFSFSFSFS", [100.0 + i for i in range(10)])

    assert state.circuit(109.0) is Circuit.CLOSED


@pytest.mark.parametrize(
    ("second_batch_at", "expected"),
    [(159.0, Circuit.OPEN), (160.0, Circuit.CLOSED), (161.0, Circuit.CLOSED)],
)
def test_outcomes_older_than_the_window_do_not_count(second_batch_at, expected):
    # 4 failures + 1 success at t=100, then S S F S F: 6/10 only if all are in 60 s
    first = replay("FFFFS", [100.0] * 5)

    state = replay("SSFSF", [second_batch_at] * 5, state=first)

    assert state.circuit(second_batch_at) is expected


def test_the_window_drops_outcomes_older_than_window_seconds():
    state = replay("SFS", [100.0, 130.0, 170.0])

    assert state.window == ((130.0, 1, 1), (170.0, 1, 0))


def test_record_outcome_never_mutates_its_input():
    state = replay("FFFF", [100.0] * 4)
    snapshot = (state.consecutive, state.window, state.open_until)

    record_outcome(state, FAILURE, 101.0, CONFIG)

    assert (state.consecutive, state.window, state.open_until) == snapshot


def test_breaker_config_from_settings_keeps_known_keys_only():
    config = config_from_settings(
        BreakerConfig, {"consecutive_failures": 3, "open_seconds": 10, "colour": "red"}
    )

    assert config == BreakerConfig(consecutive_failures=3, open_seconds=10)


def test_consecutive_failures_setting_is_honoured():
    config = BreakerConfig(consecutive_failures=2)

    assert replay("FF", [0.0, 1.0], config=config).circuit(1.0) is Circuit.OPEN


# --- §8.1 HALF_OPEN and the probe --------------------------------------------------


def test_claim_probe_is_refused_while_open():
    assert claim_probe(opened_at(100.0), 129.0, 10.0) is None


def test_claim_probe_is_refused_while_closed():
    assert claim_probe(Breaker(), 100.0, 10.0) is None


def test_first_claim_gets_the_probe_and_the_second_is_refused():
    state = opened_at(100.0)

    claimed = claim_probe(state, 130.0, 10.0)

    assert claimed is not None
    assert claimed.probe_until == 130.0 + 10.0 + PROBE_LEASE_EXTRA_SECONDS
    assert claimed.probe_taken(130.0)
    assert claim_probe(claimed, 130.0, 10.0) is None
    assert state.probe_until is None  # input untouched


def test_the_probe_lease_expires_after_timeout_plus_five_seconds():
    claimed = claim_probe(opened_at(100.0), 130.0, 10.0)
    assert claimed is not None

    assert claim_probe(claimed, 144.999, 10.0) is None
    again = claim_probe(claimed, 145.0, 10.0)

    assert again is not None
    assert again.probe_until == 160.0


def test_probe_success_closes_it_and_clears_the_counters():
    claimed = claim_probe(opened_at(100.0), 130.0, 10.0)
    assert claimed is not None

    state = record_outcome(claimed, SUCCESS, 131.0, CONFIG)

    assert state == Breaker()
    assert state.circuit(131.0) is Circuit.CLOSED


def test_after_closing_it_takes_five_new_failures_to_open_for_30_seconds_again():
    claimed = claim_probe(opened_at(100.0), 130.0, 10.0)
    assert claimed is not None
    closed = record_outcome(claimed, SUCCESS, 131.0, CONFIG)

    four = replay("FFFF", [132.0] * 4, state=closed)
    five = record_outcome(four, FAILURE, 133.0, CONFIG)

    assert four.circuit(132.0) is Circuit.CLOSED
    assert five.open_until == 163.0


def test_probe_failure_reopens_it_for_twice_as_long():
    claimed = claim_probe(opened_at(100.0), 130.0, 10.0)
    assert claimed is not None

    state = record_outcome(claimed, FAILURE, 131.0, CONFIG)

    assert state.circuit(131.0) is Circuit.OPEN
    assert state.open_until == 191.0
    assert state.open_seconds == 60.0
    assert state.probe_until is None


def test_failed_probes_double_the_open_time_up_to_max_open_seconds():
    state = opened_at(0.0)
    periods = []
    for _ in range(6):
        assert state.open_until is not None
        now = state.open_until
        claimed = claim_probe(state, now, 10.0)
        assert claimed is not None
        state = record_outcome(claimed, FAILURE, now, CONFIG)
        periods.append(state.open_seconds)

    assert periods == [60.0, 120.0, 240.0, 300.0, 300.0, 300.0]


def test_an_ignored_outcome_releases_the_probe():
    claimed = claim_probe(opened_at(100.0), 130.0, 10.0)
    assert claimed is not None

    released = record_outcome(claimed, IGNORED, 131.0, CONFIG)

    assert released.circuit(131.0) is Circuit.HALF_OPEN
    assert released.probe_until is None
    assert released.open_until == claimed.open_until
    assert claim_probe(released, 131.0, 10.0) is not None


# --- §8.2 rate-limit cooldown --------------------------------------------------------


def test_cooldowns_without_retry_after_double_from_30_to_300():
    state = Cooldown()
    now = 0.0
    durations = []
    for _ in range(7):
        state = rate_limited(state, now, None, COOLDOWN)
        assert state.until is not None
        durations.append(state.until - now)
        now = state.until  # the next 429 right after expiry

    assert durations == [30.0, 60.0, 120.0, 240.0, 300.0, 300.0, 300.0]


def test_example_13_cooldowns_are_30_60_then_30_after_a_success():
    first = rate_limited(Cooldown(), 0.0, None, COOLDOWN)
    second = rate_limited(first, 30.0, None, COOLDOWN)
    served = cooldown_success(second)
    third = rate_limited(served, 100.0, None, COOLDOWN)

    assert (first.until, second.until, third.until) == (30.0, 90.0, 130.0)
    assert (first.level, second.level, served.level, third.level) == (1, 2, 0, 1)


def test_a_success_never_shortens_an_active_cooldown():
    state = rate_limited(Cooldown(), 0.0, None, COOLDOWN)

    served = cooldown_success(state)

    assert served.until == 30.0
    assert served.active(29.0)


def test_cooldown_success_without_a_level_returns_the_same_state():
    state = Cooldown()

    assert cooldown_success(state) is state


@pytest.mark.parametrize(
    ("retry_after_s", "duration"),
    [
        (7.0, 7.0),
        (7.5, 7.5),
        (1.0, 1.0),
        (0.2, 1.0),
        (0.0, 1.0),
        (3600.0, 3600.0),
        (5000.0, 3600.0),
    ],
)
def test_retry_after_is_honoured_exactly_within_1_second_and_the_maximum(
    retry_after_s, duration
):
    state = rate_limited(Cooldown(), 100.0, retry_after_s, COOLDOWN)

    assert state.until == 100.0 + duration


def test_retry_after_maximum_comes_from_the_config():
    config = config_from_settings(CooldownConfig, {"max_retry_after_seconds": 60})

    assert rate_limited(Cooldown(), 0.0, 90.0, config).until == 60.0


def test_retry_after_still_raises_the_level():
    state = rate_limited(Cooldown(), 0.0, 7.0, COOLDOWN)

    after = rate_limited(state, 7.0, None, COOLDOWN)

    assert after.until == 67.0
    assert after.level == 2


@pytest.mark.parametrize(
    ("third_at", "duration"),
    [(629.0, 120.0), (630.0, 30.0), (1000.0, 30.0)],
)
def test_a_level_with_no_rate_limit_for_600_seconds_is_forgotten(third_at, duration):
    state = rate_limited(Cooldown(), 0.0, None, COOLDOWN)
    state = rate_limited(state, 30.0, None, COOLDOWN)  # level 2, last at 30

    state = rate_limited(state, third_at, None, COOLDOWN)

    assert state.until == third_at + duration


def test_a_new_rate_limit_never_shortens_the_cooldown():
    long = rate_limited(Cooldown(), 0.0, 300.0, COOLDOWN)

    short = rate_limited(long, 10.0, 7.0, COOLDOWN)

    assert short.until == 300.0
    assert short.level == 2
    assert short.last_rate_limit_at == 10.0


def test_cooldown_config_from_settings():
    config = config_from_settings(
        CooldownConfig, {"base_seconds": 10, "max_seconds": 40}
    )

    durations = []
    state = Cooldown()
    for now in (0.0, 100.0, 200.0, 300.0):
        state = rate_limited(state, now, None, config)
        durations.append(state.until - now)

    assert durations == [10.0, 20.0, 40.0, 40.0]


# --- §8.3 auth disable ---------------------------------------------------------------


def test_example_14_auth_disable_is_300_then_600_after_reenable():
    first = auth_failed(AuthDisable(), 0.0, "auth_failed", "bad key", AUTH)
    cleared = reenable(first)
    second = auth_failed(cleared, 10.0, "auth_failed", "bad key", AUTH)

    assert first == AuthDisable(
        until=300.0, failures=1, reason="auth_failed", message="bad key", at=0.0
    )
    assert cleared.until is None
    assert cleared.failures == 1
    assert not cleared.active(10.0)
    assert second.until == 610.0


def test_auth_disable_doubles_up_to_max_seconds():
    state = AuthDisable()
    durations = []
    for now in (0.0, 1.0, 2.0, 3.0, 4.0, 5.0):
        state = auth_failed(state, now, "payment_required", "", AUTH)
        assert state.until is not None
        durations.append(state.until - now)

    assert durations == [300.0, 600.0, 1200.0, 2400.0, 3600.0, 3600.0]
    assert state.reason == "payment_required"


def test_a_success_resets_the_auth_failure_count():
    state = auth_failed(AuthDisable(), 0.0, "auth_failed", "", AUTH)
    state = auth_failed(state, 1.0, "auth_failed", "", AUTH)

    state = auth_success(state)
    state = auth_failed(state, 2.0, "auth_failed", "", AUTH)

    assert state.failures == 1
    assert state.until == 302.0


def test_auth_success_without_failures_returns_the_same_state():
    state = AuthDisable()

    assert auth_success(state) is state


def test_auth_disable_config_from_settings():
    config = config_from_settings(
        AuthDisableConfig, {"seconds": 60, "max_seconds": 100}
    )

    first = auth_failed(AuthDisable(), 0.0, "auth_failed", "", config)
    second = auth_failed(first, 0.0, "auth_failed", "", config)

    assert (first.until, second.until) == (60.0, 100.0)


# --- §8.4 model lock -----------------------------------------------------------------


@pytest.mark.parametrize(
    ("existing", "expected"),
    [(None, 700.0), (650.0, 700.0), (700.0, 700.0), (900.0, 900.0)],
)
def test_model_lock_is_ten_minutes_and_keeps_a_longer_existing_lock(existing, expected):
    assert lock_until(existing, 100.0, 10) == expected
