"""Spec 02 checks through the real gateway that the unit tests cannot make: the
``model_failover`` metric and event, how each upstream status and a bad response are
classified, skips stored with the request, streams the client leaves or that go idle,
refusals that list the earlier items, and the earliest cooldown when all are
rate-limited."""

from __future__ import annotations

import json
import re
import time

import httpx
import pytest

from tests.integration.conftest import KEY_ALL

pytestmark = pytest.mark.integration
MESSAGES = [{"role": "user", "content": "hi"}]


def _chat(client, **body):
    return client.post("/v1/chat/completions", json={"messages": MESSAGES, **body})


def _sse(response: httpx.Response) -> list[dict | str]:
    events: list[dict | str] = []
    for line in response.text.splitlines():
        if line.startswith("data: "):
            data = line[len("data: ") :]
            events.append(data if data == "[DONE]" else json.loads(data))
    return events


def _failovers(gateway, source: str, target: str, reason: str) -> float:
    text = httpx.get(f"{gateway.url}/metrics", timeout=5).text
    pattern = (
        r"^omniroute_model_failover_total\{(?=[^}]*from_model=\""
        + re.escape(source)
        + r"\")(?=[^}]*to_model=\""
        + re.escape(target)
        + r"\")(?=[^}]*reason=\""
        + re.escape(reason)
        + r"\")[^}]*\} (\S+)$"
    )
    match = re.search(pattern, text, re.M)
    return float(match.group(1)) if match else 0.0


def _wait_rows(gateway, where: str) -> list:
    deadline = time.monotonic() + 5
    rows: list = []
    while time.monotonic() < deadline and not rows:
        rows = gateway.requests_log(where)
        time.sleep(0.05)
    return rows


def test_a_failover_between_slots_counts_once_in_the_metric(client, upstream, gateway):
    before = _failovers(gateway, "pa/m1", "pb/m2", "server_error")
    upstream.add("m1", status=503)
    assert _chat(client, models=["pa/m1", "pb/m2"]).status_code == 200
    assert _failovers(gateway, "pa/m1", "pb/m2", "server_error") == before + 1


def test_an_upstream_rejection_emits_no_failover_event(client, upstream, gateway):
    before = _failovers(gateway, "pa/m1", "pb/m2", "invalid_request")
    upstream.add(
        "m1",
        status=422,
        error_body={"error": {"message": "Invalid 'temperature'", "param": 7}},
    )
    response = _chat(client, models=["pa/m1", "pb/m2"])
    assert response.status_code == 422
    error = response.json()["error"]
    assert (error["code"], error["param"]) == ("upstream_invalid_request", None)
    assert _failovers(gateway, "pa/m1", "pb/m2", "invalid_request") == before


def test_a_context_rejection_moves_on_even_with_an_empty_on(client, upstream):
    upstream.add(
        "m1",
        status=400,
        error_body={"error": {"message": "This model's maximum context length is 8k"}},
    )
    response = _chat(client, models=["pa/m1", "pb/m2"], redundancy={"on": []})
    assert response.status_code == 200
    first = response.json()["omniroute"]["failover"]["attempts"][0]
    assert (first["reason"], first["http_status"]) == ("context_length", 400)


def test_skips_of_a_served_request_are_stored_with_the_request(
    client, upstream, gateway
):
    upstream.add("m1", status=500)
    response = _chat(client, models=["pa/m1", "team"])
    assert response.status_code == 200
    attempts = response.json()["omniroute"]["failover"]["attempts"]
    assert [(a["model"], a["status"], a["reason"]) for a in attempts] == [
        ("pa/m1", "failed", "server_error"),
        ("pa/m1", "skipped", "already_attempted"),
        ("pb/m2", "served", None),
    ]
    row = gateway.requests_log()[-1]
    assert json.loads(row["skips"]) == [
        {
            "model": "pa/m1",
            "connection": "main",
            "slot": 1,
            "via": "team",
            "reason": "already_attempted",
        }
    ]


def test_a_stream_error_event_before_the_first_token_is_a_bad_response(
    client, upstream
):
    upstream.add("m1", stream_error={"type": "server_error", "message": "boom"})
    response = _chat(client, models=["pa/m1", "pb/m2"], stream=True)
    assert response.status_code == 200
    tail = [e for e in _sse(response) if isinstance(e, dict)][-1]
    first = tail["omniroute"]["failover"]["attempts"][0]
    assert (first["reason"], first["detail"]) == ("server_error", "bad_response")


def test_a_200_that_is_not_json_is_a_bad_response(client, upstream):
    upstream.add("m1", raw_body="<html>oops</html>")
    response = _chat(client, models=["pa/m1", "pb/m2"])
    assert response.status_code == 200
    first = response.json()["omniroute"]["failover"]["attempts"][0]
    assert (first["reason"], first["detail"], first["http_status"]) == (
        "server_error",
        "bad_response",
        200,
    )


@pytest.mark.parametrize(
    ("status", "reason", "detail"),
    [
        (402, "server_error", "payment_required"),
        (404, "server_error", "model_not_found"),
        (405, "server_error", "unexpected_status"),
        (408, "timeout", None),
        (413, "context_length", None),
    ],
)
def test_each_status_is_classified_as_the_table_says(
    client, upstream, status, reason, detail
):
    upstream.add("m1", status=status)
    response = _chat(client, models=["pa/m1", "pb/m2"])
    assert response.status_code == 200
    first = response.json()["omniroute"]["failover"]["attempts"][0]
    assert (first["reason"], first["detail"], first["http_status"]) == (
        reason,
        detail,
        status,
    )


def test_a_stream_the_client_leaves_logs_its_attempt_as_cancelled(gateway, upstream):
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
    upstream.wait_for("cancelled", timeout_seconds=3)
    rows = _wait_rows(gateway, "client_disconnected = 1 and stream = 1")
    assert rows
    attempts = gateway.attempts_log(rows[-1]["id"])
    assert [(a["result"], a["reason"]) for a in attempts] == [
        ("cancelled", "client_cancelled")
    ]


def test_a_refused_later_slot_lists_the_earlier_items(client, upstream):
    upstream.add("m1", status=500)
    response = client.post(
        "/v1/chat/completions",
        headers={
            "X-OmniRoute-Budget": "0.0000000001",
            "X-OmniRoute-Budget-Fallback": "strict",
        },
        json={"models": ["pa/m1", "auto"], "messages": MESSAGES},
    )
    assert response.status_code == 402, response.text
    error = response.json()["error"]
    assert error["code"] == "budget_exceeded"
    assert [(a["model"], a["status"]) for a in error["attempts"]] == [
        ("pa/m1", "failed")
    ]


def test_a_bad_budget_header_is_refused_before_any_call(client, upstream):
    response = client.post(
        "/v1/chat/completions",
        headers={"X-OmniRoute-Budget": "abc"},
        json={"models": ["pa/m1", "auto"], "messages": MESSAGES},
    )
    assert response.status_code == 400
    assert response.json()["error"]["code"] == "invalid_budget"
    assert upstream.requests() == []


@pytest.fixture
def short_idle(gateway):
    result = gateway.apply("settings:\n  stream_idle_timeout_ms: 1000\n")
    assert result.returncode == 0, result.stderr
    yield gateway
    result = gateway.apply("settings:\n  stream_idle_timeout_ms: 120000\n")
    assert result.returncode == 0, result.stderr


def test_a_stream_idle_after_its_first_token_ends_interrupted(
    short_idle, client, upstream
):
    upstream.add("m1", tokens=3, token_delay_ms=2500)
    started = time.monotonic()
    response = _chat(client, models=["pa/m1", "pb/m2"], stream=True)
    assert time.monotonic() - started < 5
    events = _sse(response)
    assert events[-1] == "[DONE]"
    tail = events[-2]
    assert tail["error"] == {
        "message": "Upstream stream interrupted (timeout)",
        "type": "upstream_error",
        "code": "stream_interrupted",
    }
    served = tail["omniroute"]["failover"]["attempts"]
    assert [(a["model"], a["status"], a["detail"]) for a in served] == [
        ("pa/m1", "served", "stream_interrupted")
    ]
    assert list(tail) == [
        "id",
        "object",
        "created",
        "model",
        "choices",
        "error",
        "omniroute",
    ]


def test_a_stream_commits_with_the_calls_made_so_far(client, upstream):
    upstream.add("m1", status=500)
    upstream.add("m2", status=429)
    response = _chat(client, models=["pa/m1", "pb/m2", "pc/m3"], stream=True)
    assert response.status_code == 200
    assert response.headers["x-omniroute-attempts"] == "3"
    assert response.headers["x-omniroute-served-model"] == "pc/m3"
    assert response.headers["x-omniroute-route"] == "chain"
    assert "x-omniroute-overhead-ms" not in response.headers
    tail = _sse(response)[-2]
    assert list(tail)[-1] == "omniroute"  # on the finish chunk (spec 09 §7)
    assert tail["choices"][0]["finish_reason"] == "stop"
    assert tail["omniroute"]["failover"]["occurred"] is True


def test_all_rate_limited_reports_the_earliest_cooldown(client, upstream):
    upstream.add("m1", status=429)
    upstream.add("m2", status=429)
    upstream.add("m3", status=429, headers={"Retry-After": "7"})
    response = _chat(client, model="pa/m1", fallback_models=["pb/m2", "pc/m3"])
    assert response.status_code == 429
    assert response.headers["retry-after"] == "7"
    error = response.json()["error"]
    assert (error["type"], error["code"]) == ("rate_limit_error", "all_models_failed")
    assert error["message"] == (
        "All 3 model attempt(s) failed (last: pc/m3 \u2014 rate_limit)"
    )
    assert len(error["attempts"]) == 3
