"""The loop's move-on rule and the all-failed answer (spec 02 §6.2, §7, §9, §10)."""

import pytest

from gateway.kernel.errors import FailureReason
from gateway.kernel.failover import (
    HEALTH_SKIPS,
    REQUEST_SKIPS,
    Item,
    Terminal,
    should_continue,
    terminal,
)

FOUR = ("connection_error", "server_error", "rate_limit", "timeout")


# --- should_continue ----------------------------------------------------------------


@pytest.mark.parametrize("reason", FOUR)
def test_retryable_reason_moves_on_when_listed_in_on(reason):
    assert should_continue(reason, FOUR) is True
    assert should_continue(reason, (reason,)) is True


@pytest.mark.parametrize("reason", FOUR)
def test_retryable_reason_stops_when_not_listed_in_on(reason):
    others = tuple(r for r in FOUR if r != reason)

    assert should_continue(reason, others) is False


@pytest.mark.parametrize("reason", FOUR)
def test_empty_on_stops_on_every_retryable_reason(reason):
    assert should_continue(reason, ()) is False


@pytest.mark.parametrize("on", [(), FOUR, ("timeout",)])
def test_context_length_always_moves_on_whatever_on_says(on):
    assert should_continue("context_length", on) is True


@pytest.mark.parametrize("reason", ["invalid_request", "client_cancelled"])
def test_invalid_request_and_client_cancelled_always_stop(reason):
    assert should_continue(reason, (*FOUR, reason)) is False


def test_should_continue_accepts_the_enum_or_its_value():
    assert should_continue(FailureReason.SERVER_ERROR, ("server_error",)) is True
    assert should_continue("server_error", (FailureReason.SERVER_ERROR,)) is True


# --- the report item ----------------------------------------------------------------


def test_report_item_carries_every_key_and_nothing_internal():
    item = Item(
        model="pa/m1",
        slot=1,
        via="team",
        status="failed",
        reason="server_error",
        detail="auth_failed",
        latency_ms=12,
        http_status=401,
        connection="main",
        calls=1,
        retry_after_s=30,
        upstream_message="secret detail",
        upstream_param="x",
        unmet_param="tools",
    )

    assert item.report() == {
        "model": "pa/m1",
        "slot": 1,
        "via": "team",
        "status": "failed",
        "reason": "server_error",
        "detail": "auth_failed",
        "latency_ms": 12,
        "http_status": 401,
        "connection": "main",
        "calls": 1,
    }


def test_skip_kinds_match_the_spec_table():
    assert sorted(HEALTH_SKIPS) == [
        "auth_disabled",
        "busy",
        "circuit_open",
        "connection_failed",
        "cooldown",
        "model_locked",
    ]
    assert sorted(REQUEST_SKIPS) == ["capability_mismatch", "context_too_large"]


# --- terminal: rule 2 (invalid_request) ---------------------------------------------


def test_invalid_request_returns_the_upstream_status_message_and_param(make_item):
    items = [
        make_item(
            "failed",
            "invalid_request",
            http_status=422,
            upstream_message="Invalid 'temperature'",
            upstream_param="temperature",
        )
    ]

    assert terminal(items) == Terminal(
        status=422,
        error_type="invalid_request_error",
        code="upstream_invalid_request",
        message="Upstream rejected the request: Invalid 'temperature'",
        param="temperature",
    )


def test_invalid_request_message_is_cut_to_500_upstream_characters(make_item):
    items = [
        make_item(
            "failed", "invalid_request", http_status=400, upstream_message="x" * 800
        )
    ]

    result = terminal(items)

    assert result.message == "Upstream rejected the request: " + "x" * 500
    assert result.param is None


def test_invalid_request_after_other_failures_still_wins(make_item):
    items = [
        make_item("failed", "rate_limit", http_status=429),
        make_item("failed", "invalid_request", http_status=400, upstream_message="bad"),
    ]

    assert (terminal(items).status, terminal(items).code) == (
        400,
        "upstream_invalid_request",
    )


# --- terminal: rules 3-4 (no call made) ---------------------------------------------


@pytest.mark.parametrize("reason", sorted(HEALTH_SKIPS - {"busy"}))
def test_health_skips_without_a_call_are_503_with_retry_after(make_item, reason):
    items = [
        make_item("skipped", reason, retry_after_s=29.2),
        make_item("skipped", reason, model="pb/m2", retry_after_s=7.01),
    ]

    assert terminal(items) == Terminal(
        status=503,
        error_type="upstream_error",
        code="no_healthy_candidate",
        message="No healthy candidate is available for this request",
        retry_after_s=8,
    )


def test_busy_skip_counts_as_one_second(make_item):
    items = [
        make_item("skipped", "cooldown", retry_after_s=30),
        make_item("skipped", "busy", model="pb/m2"),
    ]

    assert terminal(items).retry_after_s == 1


def test_retry_after_is_at_least_one_second(make_item):
    items = [make_item("skipped", "circuit_open", retry_after_s=0.2)]

    assert terminal(items).retry_after_s == 1


def test_health_skip_beats_request_skips_when_no_call_was_made(make_item):
    items = [
        make_item("skipped", "context_too_large"),
        make_item("skipped", "circuit_open", model="pb/m2", retry_after_s=12),
    ]

    result = terminal(items)

    assert (result.status, result.code, result.retry_after_s) == (
        503,
        "no_healthy_candidate",
        12,
    )


def test_no_target_at_all_is_503_no_healthy_candidate():
    result = terminal([])

    assert (result.status, result.code, result.retry_after_s) == (
        503,
        "no_healthy_candidate",
        1,
    )


def test_request_skips_with_a_context_one_are_400_context_length_exceeded(make_item):
    items = [
        make_item("skipped", "capability_mismatch", unmet_param="tools"),
        make_item("skipped", "context_too_large", model="pb/m2"),
    ]

    assert terminal(items) == Terminal(
        status=400,
        error_type="invalid_request_error",
        code="context_length_exceeded",
        message="The request exceeds the context window of every candidate",
        param="messages",
    )


@pytest.mark.parametrize("need", ["tools", "messages", "response_format"])
def test_capability_skips_only_are_400_naming_the_first_unmet_need(make_item, need):
    items = [
        make_item("skipped", "capability_mismatch", unmet_param=need),
        make_item("skipped", "capability_mismatch", model="pb/m2", unmet_param="x"),
    ]

    assert terminal(items) == Terminal(
        status=400,
        error_type="invalid_request_error",
        code="capability_mismatch",
        message="No candidate has a capability this request needs",
        param=need,
    )


def test_capability_skip_without_a_named_need_reports_messages(make_item):
    result = terminal([make_item("skipped", "capability_mismatch")])

    assert (result.code, result.param) == ("capability_mismatch", "messages")


# --- terminal: rule 5 (context_length last) ------------------------------------------


def test_last_failure_context_length_is_400_context_length_exceeded(make_item):
    items = [
        make_item("failed", "server_error", http_status=503),
        make_item("failed", "context_length", model="pb/m2", http_status=400),
        make_item("skipped", "context_too_large", model="pb/m2", connection="b"),
    ]

    assert terminal(items) == Terminal(
        status=400,
        error_type="invalid_request_error",
        code="context_length_exceeded",
        message="The request exceeds the context window of every model tried",
        param="messages",
    )


def test_context_length_followed_by_another_failure_is_not_rule_five(make_item):
    items = [
        make_item("failed", "context_length", http_status=400),
        make_item("failed", "server_error", model="pb/m2", http_status=500),
    ]

    result = terminal(items)

    assert (result.status, result.code) == (502, "all_models_failed")
    assert result.message == (
        "All 2 model attempt(s) failed (last: pb/m2 \u2014 server_error)"
    )


# --- terminal: rules 6-7 ------------------------------------------------------------


def test_every_failure_rate_limited_is_429_with_the_earliest_cooldown(make_item):
    # Spec 02 §14 example 2.
    items = [
        make_item("failed", "rate_limit", model="pa/m1", http_status=429),
        make_item("failed", "rate_limit", model="pb/m2", slot=1, http_status=429),
        make_item("failed", "rate_limit", model="pc/m3", slot=2, http_status=429),
    ]

    assert terminal(items, cooldown_retry_after_s=7) == Terminal(
        status=429,
        error_type="rate_limit_error",
        code="all_models_failed",
        message="All 3 model attempt(s) failed (last: pc/m3 \u2014 rate_limit)",
        retry_after_s=7,
    )


def test_rate_limit_retry_after_falls_back_to_the_items_cooldowns(make_item):
    items = [
        make_item("failed", "rate_limit", http_status=429, retry_after_s=30),
        make_item("failed", "rate_limit", model="pb/m2", retry_after_s=6.5),
    ]

    assert terminal(items).retry_after_s == 7


def test_explicit_cooldown_wins_over_the_items_cooldowns(make_item):
    items = [make_item("failed", "rate_limit", retry_after_s=3)]

    assert terminal(items, cooldown_retry_after_s=30).retry_after_s == 30


def test_rate_limit_with_skips_around_it_is_still_429(make_item):
    items = [
        make_item("skipped", "circuit_open", retry_after_s=5),
        make_item("failed", "rate_limit", model="pb/m2", http_status=429),
        make_item("skipped", "already_attempted", model="pb/m2"),
    ]

    result = terminal(items)

    assert (result.status, result.message) == (
        429,
        "All 1 model attempt(s) failed (last: pb/m2 \u2014 rate_limit)",
    )


def test_one_non_rate_limit_failure_makes_it_502(make_item):
    items = [
        make_item("failed", "rate_limit", http_status=429),
        make_item("failed", "timeout", model="pb/m2"),
        make_item("failed", "rate_limit", model="pc/m3", http_status=429),
    ]

    assert terminal(items) == Terminal(
        status=502,
        error_type="upstream_error",
        code="all_models_failed",
        message="All 3 model attempt(s) failed (last: pc/m3 \u2014 rate_limit)",
    )


@pytest.mark.parametrize("reason", ["connection_error", "server_error", "timeout"])
def test_single_failure_of_another_reason_is_502(make_item, reason):
    result = terminal([make_item("failed", reason, model="pb/m2")])

    assert result == Terminal(
        status=502,
        error_type="upstream_error",
        code="all_models_failed",
        message=f"All 1 model attempt(s) failed (last: pb/m2 \u2014 {reason})",
    )


def test_message_counts_failed_items_only_and_uses_an_em_dash(make_item):
    items = [
        make_item("skipped", "cooldown", retry_after_s=3),
        make_item("failed", "server_error", model="pa/m1", http_status=500),
        make_item("skipped", "connection_failed", model="pa/m1", connection="b"),
        make_item("failed", "connection_error", model="pb/m2"),
    ]

    message = terminal(items).message

    assert message == "All 2 model attempt(s) failed (last: pb/m2 — connection_error)"
    assert "\u2014" in message
