"""Upstream failures through the real gateway: classification, reports, logs."""

from __future__ import annotations

import json
import time

import httpx
import pytest

from tests.integration.conftest import KEY_ALL

pytestmark = pytest.mark.integration
MESSAGES = [{"role": "user", "content": "hi"}]


def _sse(response: httpx.Response) -> list[dict | str]:
    events: list[dict | str] = []
    for line in response.text.splitlines():
        if line.startswith("data: "):
            data = line[len("data: ") :]
            events.append(data if data == "[DONE]" else json.loads(data))
    return events


def test_chain_fails_over_from_a_5xx_to_the_next_model(client, upstream, gateway):
    upstream.add("m1", status=503)
    response = client.post(
        "/v1/chat/completions",
        json={"models": ["pa/m1", "pb/m2"], "messages": MESSAGES},
    )
    assert response.status_code == 200
    assert response.headers["x-omniroute-attempts"] == "2"
    assert response.headers["x-omniroute-served-model"] == "pb/m2"
    omni = response.json()["omniroute"]
    assert (omni["route"], omni["requested_model"], omni["served_model"]) == (
        "chain",
        "pa/m1",
        "pb/m2",
    )
    attempts = omni["failover"]["attempts"]
    assert omni["failover"]["occurred"] is True
    assert [
        (a["model"], a["status"], a["reason"], a["http_status"], a["slot"])
        for a in attempts
    ] == [
        ("pa/m1", "failed", "server_error", 503, 0),
        ("pb/m2", "served", None, 200, 1),
    ]
    assert set(attempts[0]) == {
        "model",
        "slot",
        "via",
        "status",
        "reason",
        "detail",
        "latency_ms",
        "http_status",
        "connection",
        "calls",
    }
    request = gateway.requests_log()[-1]
    assert (request["status"], request["attempt_count"], request["failover"]) == (
        "success",
        2,
        1,
    )
    rows = gateway.attempts_log(request["id"])
    assert [(r["result"], r["billable"]) for r in rows] == [
        ("server_error", 0),
        ("success", 1),
    ]


def test_all_rate_limited_is_429_with_the_retry_after_of_the_last(client, upstream):
    upstream.add("m1", status=429)
    upstream.add("m2", status=429, headers={"Retry-After": "7"})
    response = client.post(
        "/v1/chat/completions",
        json={"model": "pa/m1", "fallback_models": ["pb/m2"], "messages": MESSAGES},
    )
    assert response.status_code == 429
    error = response.json()["error"]
    assert (error["type"], error["code"]) == ("rate_limit_error", "all_models_failed")
    assert error["message"] == (
        "All 2 model attempt(s) failed (last: pb/m2 \u2014 rate_limit)"
    )
    assert len(error["attempts"]) == 2
    assert int(response.headers["retry-after"]) >= 1


def test_single_entry_failure_is_502_with_attempts(client, upstream):
    upstream.add("m2", status=500)
    response = client.post(
        "/v1/chat/completions", json={"model": "pb/m2", "messages": MESSAGES}
    )
    assert response.status_code == 502
    error = response.json()["error"]
    assert error["message"] == (
        "All 1 model attempt(s) failed (last: pb/m2 \u2014 server_error)"
    )
    assert error["attempts"][0]["http_status"] == 500
    assert "failover" not in response.text


def test_upstream_rejection_is_passed_on_and_never_fails_over(client, upstream):
    upstream.add(
        "m1",
        status=400,
        error_body={
            "error": {"message": "Invalid 'temperature'", "param": "temperature"}
        },
    )
    response = client.post(
        "/v1/chat/completions",
        json={"models": ["pa/m1", "pb/m2"], "messages": MESSAGES},
    )
    assert response.status_code == 400
    error = response.json()["error"]
    assert (error["code"], error["param"]) == (
        "upstream_invalid_request",
        "temperature",
    )
    assert error["message"] == "Upstream rejected the request: Invalid 'temperature'"
    assert [r["model"] for r in upstream.requests()] == ["m1"]


def test_on_filter_stops_at_a_reason_not_listed(client, upstream):
    upstream.add("m1", status=429)
    response = client.post(
        "/v1/chat/completions",
        json={
            "models": ["pa/m1", "pb/m2"],
            "redundancy": {"on": ["server_error"]},
            "messages": MESSAGES,
        },
    )
    assert response.status_code == 429
    assert len(response.json()["error"]["attempts"]) == 1
    assert [r["model"] for r in upstream.requests()] == ["m1"]


def test_connection_reset_is_a_connection_error(client, upstream):
    upstream.add("m1", reset="before_headers")
    response = client.post(
        "/v1/chat/completions",
        json={"models": ["pa/m1", "pb/m2"], "messages": MESSAGES},
    )
    assert response.status_code == 200
    first = response.json()["omniroute"]["failover"]["attempts"][0]
    assert (first["reason"], first["http_status"]) == ("connection_error", None)


def test_hanging_upstream_times_out_at_the_attempt_timeout(client, upstream):
    upstream.add("m1", hang=True)
    started = time.monotonic()
    response = client.post(
        "/v1/chat/completions",
        json={
            "models": ["pa/m1", "pb/m2"],
            "redundancy": {"timeout_ms": 1000},
            "messages": MESSAGES,
        },
    )
    assert response.status_code == 200
    first = response.json()["omniroute"]["failover"]["attempts"][0]
    assert first["reason"] == "timeout"
    assert 900 <= first["latency_ms"] < 5000
    assert time.monotonic() - started < 10
    upstream.wait_for("cancelled")


def test_slow_first_token_fails_over_before_anything_is_sent(client, upstream):
    upstream.add("m1", role_then_hang=True)
    response = client.post(
        "/v1/chat/completions",
        json={
            "models": ["pa/m1", "pb/m2"],
            "stream": True,
            "redundancy": {"first_token_timeout_ms": 1000},
            "messages": MESSAGES,
        },
    )
    assert response.status_code == 200
    events = _sse(response)
    assert events[-1] == "[DONE]"
    chunks = [e for e in events if isinstance(e, dict)]
    assert all(c["model"] == "pb/m2" for c in chunks)
    report = chunks[-1]["omniroute"]["failover"]["attempts"]
    assert (report[0]["reason"], report[0]["detail"]) == ("timeout", "first_token")
    assert report[1]["status"] == "served"


def test_stream_dropped_after_tokens_ends_with_an_error_chunk(
    client, upstream, gateway
):
    upstream.add("m1", drop_after_tokens=2, tokens=6)
    response = client.post(
        "/v1/chat/completions",
        json={"models": ["pa/m1", "pb/m2"], "stream": True, "messages": MESSAGES},
    )
    events = _sse(response)
    assert events[-1] == "[DONE]"
    tail = events[-2]
    assert tail["choices"] == [{"index": 0, "delta": {}, "finish_reason": "error"}]
    assert tail["error"]["code"] == "stream_interrupted"
    assert tail["error"]["message"] == "Upstream stream interrupted (connection_error)"
    assert tail["omniroute"]["served_model"] == "pa/m1"
    text = "".join(
        c["choices"][0]["delta"].get("content") or ""
        for c in events[:-2]
        if isinstance(c, dict) and c["choices"]
    )
    assert text
    assert [r["model"] for r in upstream.requests()] == ["m1"]
    row = gateway.requests_log()[-1]
    assert (row["status"], row["reason"]) == ("interrupted", "stream_interrupted")


def test_all_failed_stream_gets_a_json_error(client, upstream):
    upstream.add("m1", status=500)
    response = client.post(
        "/v1/chat/completions",
        json={"model": "pa/m1", "stream": True, "messages": MESSAGES},
    )
    assert response.status_code == 502
    assert response.headers["content-type"].startswith("application/json")
    assert response.json()["error"]["code"] == "all_models_failed"


def test_credentials_never_leak_in_errors(client, upstream):
    upstream.add(
        "m1",
        status=401,
        error_body={
            "error": {"message": "bad key sk-upstream-secret-pa-1234567890 rejected"}
        },
    )
    response = client.post(
        "/v1/chat/completions", json={"model": "pa/m1", "messages": MESSAGES}
    )
    assert response.status_code == 502
    assert "sk-upstream-secret" not in response.text
    detail = response.json()["error"]["attempts"][0]
    assert (detail["reason"], detail["detail"]) == ("server_error", "auth_failed")


def test_upstream_rejection_text_is_sanitised(client, upstream):
    upstream.add(
        "m1",
        status=400,
        error_body={
            "error": {
                "message": "key sk-upstream-secret-pa-1234567890 lacks access to top_k"
            }
        },
    )
    response = client.post(
        "/v1/chat/completions", json={"model": "pa/m1", "messages": MESSAGES}
    )
    assert response.status_code == 400
    assert "sk-upstream-secret" not in response.text
    assert "lacks access to top_k" in response.json()["error"]["message"]


def test_classic_endpoint_wraps_success_and_failure(client, upstream):
    ok = client.post(
        "/chat/completions", json={"models": ["pa/m1", "pb/m2"], "messages": MESSAGES}
    )
    body = ok.json()
    assert body["success"] is True
    assert body["data"]["choices"][0]["message"]["content"]
    assert body["metadata"]["served_model"] == "pa/m1"
    assert body["metadata"]["failover"]["occurred"] is False
    upstream.add("m1", status=500)
    upstream.add("m2", status=502)
    failed = client.post(
        "/chat/completions", json={"models": ["pa/m1", "pb/m2"], "messages": MESSAGES}
    )
    assert failed.status_code == 502
    assert failed.json()["success"] is False
    assert failed.json()["error"] == "All model attempts failed"
    assert len(failed.json()["attempts"]) == 2


def test_client_disconnect_cancels_the_upstream_at_once(gateway, upstream):
    upstream.add("m1", token_delay_ms=200, tokens=50)
    with (
        httpx.Client(base_url=gateway.url, timeout=10) as http,
        http.stream(
            "POST",
            "/v1/chat/completions",
            headers={"Authorization": f"Bearer {KEY_ALL}"},
            json={"model": "pa/m1", "stream": True, "messages": MESSAGES},
        ) as response,
    ):
        for line in response.iter_lines():
            if '"content"' in line and '""' not in line:
                break
    started = time.monotonic()
    upstream.wait_for("cancelled", timeout_seconds=3)
    assert time.monotonic() - started < 3
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        rows = gateway.requests_log("client_disconnected = 1")
        if rows:
            break
        time.sleep(0.1)
    assert rows
    assert rows[-1]["status"] == "client_closed"
