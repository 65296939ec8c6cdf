"""Health state through the real gateway: breakers, cooldowns, auth disables, locks."""

from __future__ import annotations

import httpx
import pytest

pytestmark = pytest.mark.integration
MESSAGES = [{"role": "user", "content": "hi"}]


def _health(gateway, slug: str, name: str = "main") -> dict:
    rows = httpx.get(
        f"{gateway.url}/api/connections",
        headers={"Authorization": f"Bearer {gateway.admin_token}"},
    ).json()
    found = next(r for r in rows if r["provider"] == slug and r["name"] == name)
    return found["health"]


def _chat(client, **body):
    return client.post("/v1/chat/completions", json={"messages": MESSAGES, **body})


def test_five_server_errors_open_the_breaker_and_later_requests_skip(
    client, upstream, gateway
):
    upstream.add("m1", status=503)
    for _ in range(5):
        assert _chat(client, model="pa/m1").status_code == 502
    assert _health(gateway, "pa")["circuit"] == "open"
    response = _chat(client, models=["pa/m1", "pb/m2"])
    assert response.status_code == 200
    assert response.headers["x-omniroute-attempts"] == "1"
    failover = response.json()["omniroute"]["failover"]
    assert failover["occurred"] is True
    first = failover["attempts"][0]
    assert (
        first["model"],
        first["status"],
        first["reason"],
        first["calls"],
        first["latency_ms"],
        first["http_status"],
    ) == ("pa/m1", "skipped", "circuit_open", 0, 0, None)
    assert [r["model"] for r in upstream.requests()].count("m1") == 5


def test_every_candidate_open_is_503_no_healthy_candidate_with_retry_after(
    client, upstream
):
    upstream.add("*", status=500)
    for model in ("pa/m1", "pb/m2"):
        for _ in range(5):
            _chat(client, model=model)
    response = _chat(client, models=["pa/m1", "pb/m2"])
    assert response.status_code == 503
    error = response.json()["error"]
    assert (error["type"], error["code"]) == ("upstream_error", "no_healthy_candidate")
    assert [a["reason"] for a in error["attempts"]] == ["circuit_open", "circuit_open"]
    assert 1 <= int(response.headers["retry-after"]) <= 30


def test_auth_failure_disables_the_connection_for_later_requests(
    client, upstream, gateway
):
    upstream.add("m1", status=401, times=1)
    first = _chat(client, models=["pa/m1", "pb/m2"])
    attempt = first.json()["omniroute"]["failover"]["attempts"][0]
    assert (attempt["reason"], attempt["detail"], attempt["http_status"]) == (
        "server_error",
        "auth_failed",
        401,
    )
    health = _health(gateway, "pa")
    assert health["auth_status"] == "auth_failed"
    assert health["auth_disabled_until"] is not None
    second = _chat(client, models=["pa/m1", "pb/m2"])
    skipped = second.json()["omniroute"]["failover"]["attempts"][0]
    assert (skipped["status"], skipped["reason"]) == ("skipped", "auth_disabled")


def test_rate_limit_starts_a_cooldown_honouring_retry_after(client, upstream, gateway):
    upstream.add("m1", status=429, headers={"Retry-After": "7"}, times=1)
    response = _chat(client, model="pa/m1")
    assert response.status_code == 429
    assert response.headers["retry-after"] == "7"
    assert _health(gateway, "pa")["cooldown_until"] is not None
    again = _chat(client, model="pa/m1")
    assert again.status_code == 503
    assert again.json()["error"]["attempts"][0]["reason"] == "cooldown"
    assert 1 <= int(again.headers["retry-after"]) <= 7


def test_all_rate_limited_uses_the_earliest_cooldown(client, upstream):
    upstream.add("m1", status=429)
    upstream.add("m2", status=429, headers={"Retry-After": "7"})
    upstream.add("m3", status=429)
    response = _chat(client, model="pa/m1", fallback_models=["pb/m2", "pc/m3"])
    assert response.status_code == 429
    error = response.json()["error"]
    assert error["message"] == (
        "All 3 model attempt(s) failed (last: pc/m3 \u2014 rate_limit)"
    )
    assert response.headers["retry-after"] == "7"


def test_model_not_found_locks_that_model_on_that_connection(client, upstream, gateway):
    upstream.add("m1", status=404, times=1)
    _chat(client, models=["pa/m1", "pb/m2"])
    assert list(_health(gateway, "pa")["locked_models"]) == ["m1"]
    response = _chat(client, models=["pa/m1", "pb/m2"])
    first = response.json()["omniroute"]["failover"]["attempts"][0]
    assert (first["status"], first["reason"]) == ("skipped", "model_locked")


def test_rate_limit_never_touches_the_breaker(client, upstream, gateway):
    upstream.add("m1", status=429)
    for _ in range(6):
        _chat(client, model="pa/m1")
    assert _health(gateway, "pa")["circuit"] == "closed"


def test_attempt_log_records_the_penalty_an_attempt_started(client, upstream, gateway):
    upstream.add("m1", status=429, times=1)
    _chat(client, models=["pa/m1", "pb/m2"])
    request = gateway.requests_log()[-1]
    rows = gateway.attempts_log(request["id"])
    assert [(r["result"], r["cooldown_trigger"]) for r in rows] == [
        ("rate_limit", "rate_limit"),
        ("success", None),
    ]


def test_reset_health_clears_a_disabled_connection(client, upstream, gateway):
    upstream.add("m1", status=403, times=1)
    _chat(client, model="pa/m1")
    assert _health(gateway, "pa")["auth_status"] == "auth_failed"
    gateway.reset_health()
    assert _health(gateway, "pa")["auth_status"] is None
    assert _chat(client, model="pa/m1").status_code == 200


def test_rate_limit_without_retry_after_cools_down_thirty_seconds(
    client, upstream, gateway
):
    import time
    from datetime import datetime

    upstream.add("m1", status=429, times=1)
    before = time.time()
    _chat(client, model="pa/m1")
    until = datetime.fromisoformat(
        _health(gateway, "pa")["cooldown_until"].replace("Z", "+00:00")
    ).timestamp()
    assert 29 <= until - before <= 32


def test_stream_rate_limit_event_before_the_first_token_fails_over(
    client, upstream, gateway
):
    upstream.add(
        "m1", stream_error={"type": "rate_limit_error", "message": "slow"}, times=1
    )
    response = _chat(client, models=["pa/m1", "pb/m2"], stream=True)
    assert response.status_code == 200
    assert '"served_model":"pb/m2"' in response.text.replace(" ", "")
    assert '"reason":"rate_limit"' in response.text.replace(" ", "")
    assert _health(gateway, "pa")["cooldown_until"] is not None


def test_stream_reset_before_headers_fails_over(client, upstream):
    upstream.add("m1", reset="before_headers")
    response = _chat(client, models=["pa/m1", "pb/m2"], stream=True)
    assert response.status_code == 200
    text = response.text.replace(" ", "")
    assert '"reason":"connection_error"' in text
    assert text.rstrip().endswith("data:[DONE]")


def test_client_leaving_a_hanging_call_cancels_it_and_is_logged(upstream, gateway):
    import time

    from tests.integration.conftest import KEY_ALL

    upstream.add("m1", hang=True, times=1)
    with pytest.raises(httpx.ReadTimeout):
        httpx.post(
            f"{gateway.url}/v1/chat/completions",
            timeout=1.0,
            headers={"Authorization": f"Bearer {KEY_ALL}"},
            json={"model": "pa/m1", "messages": MESSAGES},
        )
    upstream.wait_for("cancelled", timeout_seconds=3)
    deadline = time.monotonic() + 5
    rows = []
    while time.monotonic() < deadline and not rows:
        rows = gateway.requests_log("status = 'client_closed' and stream = 0")
        time.sleep(0.1)
    assert rows
    attempts = gateway.attempts_log(rows[-1]["id"])
    assert [(a["result"], a["reason"]) for a in attempts] == [
        ("cancelled", "client_cancelled")
    ]
    assert _health(gateway, "pa")["circuit"] == "closed"
