"""Ops endpoints, config propagation and the request log, against the real process."""

from __future__ import annotations

import time

import httpx
import pytest

pytestmark = pytest.mark.integration
MESSAGES = [{"role": "user", "content": "hi"}]


def test_healthz_and_readyz_answer_200(gateway):
    assert httpx.get(f"{gateway.url}/healthz").json() == {"status": "ok"}
    ready = httpx.get(f"{gateway.url}/readyz")
    assert ready.status_code == 200
    assert ready.json()["db"] == "ok"


def test_metrics_expose_request_and_attempt_series(gateway, client, upstream):
    client.post("/v1/chat/completions", json={"model": "pa/m1", "messages": MESSAGES})
    text = httpx.get(f"{gateway.url}/metrics").text
    assert (
        'omniroute_requests_total{endpoint="chat",route="direct",'
        'served_model="pa/m1",status="200"}' in text
    )
    assert (
        'omniroute_upstream_attempts_total{connection="main",model="m1",'
        'provider="pa",result="success"}'
    ) in text
    assert "omniroute_gateway_overhead_seconds_bucket" in text
    assert "omniroute_requests_in_flight" in text


def test_a_config_change_is_served_within_two_seconds(gateway, client, upstream, mock):
    before = client.post(
        "/v1/chat/completions", json={"model": "pa/m9", "messages": MESSAGES}
    )
    assert before.status_code == 404
    result = gateway.manage(
        "import_config",
        "-",
        stdin=f"""
providers:
  - slug: pa
    kind: openai
    base_url: {mock.url}
    models:
      - id: m1
        input_cost: 0.05
        output_cost: 0.40
        context_window: 400000
      - id: m9
""",
    )
    assert result.returncode == 0, result.stderr
    # the write committed before the command returned: the 2 s start now (starting
    # the command, a fresh interpreter with Django, is not the gateway's time)
    deadline = time.monotonic() + 2.0
    while True:
        response = client.post(
            "/v1/chat/completions", json={"model": "pa/m9", "messages": MESSAGES}
        )
        if response.status_code == 200 or time.monotonic() >= deadline:
            break
        time.sleep(0.05)
    assert response.status_code == 200
    assert response.json()["omniroute"]["served_model"] == "pa/m9"


def test_served_request_is_logged_with_usage_cost_and_overhead(
    gateway, client, upstream
):
    response = client.post(
        "/v1/chat/completions", json={"model": "pa/m1", "messages": MESSAGES}
    )
    usage = response.json()["usage"]
    row = gateway.requests_log()[-1]
    assert row["status"] == "success"
    assert (row["served_model"], row["provider"], row["connection"]) == (
        "pa/m1",
        "pa",
        "main",
    )
    assert row["prompt_tokens"] == usage["prompt_tokens"]
    assert row["completion_tokens"] == usage["completion_tokens"]
    assert row["usage_source"] == "upstream"
    expected = (usage["prompt_tokens"] * 0.05 + usage["completion_tokens"] * 0.40) / 1e6
    assert float(row["cost_usd"]) == pytest.approx(expected)
    assert row["overhead_ms"] == int(response.headers["x-omniroute-overhead-ms"])
    assert row["api_key_prefix"] == "sk-or-test-a"
    attempt = gateway.attempts_log(row["id"])[0]
    assert (attempt["target"], attempt["result"], attempt["billable"]) == (
        "pa/m1@main",
        "success",
        1,
    )
    assert attempt["latency_ms"] >= 0


def test_streaming_request_is_logged_with_ttft(gateway, client, upstream):
    with client.stream(
        "POST",
        "/v1/chat/completions",
        json={
            "model": "pa/m1",
            "stream": True,
            "messages": MESSAGES,
        },
    ) as response:
        body = response.read()
    assert body.endswith(b"data: [DONE]\n\n")
    row = gateway.requests_log()[-1]
    assert (row["stream"], row["status"]) == (1, "success")
    assert row["ttft_ms"] is not None
    assert row["completion_tokens"] > 0
