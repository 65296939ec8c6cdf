"""Acceptance examples of spec 02 §14 that need extra configuration."""

from __future__ import annotations

import httpx
import pytest

pytestmark = pytest.mark.integration
MESSAGES = [{"role": "user", "content": "hi"}]
KEY_DEFAULTS = "sk-or-test-defaults-00000000000000000000000000"
KEY_SHORT = "sk-or-test-short-defaults-000000000000000000000"


@pytest.fixture(scope="module")
def extra(gateway, mock):
    result = gateway.apply(f"""
providers:
  - slug: pw
    kind: openai
    base_url: {mock.url}
    connections: [{{name: main, api_key: sk-upstream-pw-000000000000}}]
    models:
      - {{id: small, context_window: 1000, capabilities: [json]}}
      - {{id: big, context_window: 200000, capabilities: [tools, json]}}
api_keys:
  - name: defaults
    key: {KEY_DEFAULTS}
    failover_defaults:
      models: [pa/m1, pb/m2, pc/m3]
      timeout_ms: 2000
  - name: short-defaults
    key: {KEY_SHORT}
    failover_defaults:
      models: [pa/m1]
""")
    assert result.returncode == 0, result.stderr
    return gateway


def _post(gateway, key, **body):
    return httpx.post(
        f"{gateway.url}/v1/chat/completions",
        timeout=30,
        headers={"Authorization": f"Bearer {key}"},
        json={"messages": MESSAGES, **body},
    )


def test_key_defaults_continue_from_the_requested_model(extra, upstream):
    upstream.add("m2", latency_ms=5000)
    response = _post(extra, KEY_DEFAULTS, model="pb/m2")
    assert response.status_code == 200
    omni = response.json()["omniroute"]
    assert (omni["requested_model"], omni["served_model"]) == ("pb/m2", "pc/m3")
    first = omni["failover"]["attempts"][0]
    assert (first["model"], first["reason"]) == ("pb/m2", "timeout")
    assert 1900 <= first["latency_ms"] < 4000
    assert "m1" not in [r["model"] for r in upstream.requests()]


def test_a_model_outside_the_defaults_is_a_single_entry(extra, upstream):
    upstream.add("m2", status=500)
    response = _post(extra, KEY_SHORT, model="pb/m2")
    assert response.status_code == 502
    assert response.json()["error"]["message"] == (
        "All 1 model attempt(s) failed (last: pb/m2 \u2014 server_error)"
    )
    ok = _post(extra, KEY_SHORT, model="pc/m3")
    assert "failover" not in ok.json()["omniroute"]


def test_duplicate_entries_collapse_to_the_first(extra, client, upstream):
    response = client.post(
        "/v1/chat/completions",
        json={"models": ["pa/m1", "pa/m1", "pb/m2"], "messages": MESSAGES},
    )
    failover = response.json()["omniroute"]["failover"]
    assert failover["occurred"] is False
    assert [(a["model"], a["status"]) for a in failover["attempts"]] == [
        ("pa/m1", "served")
    ]


def test_a_combo_slot_reports_its_targets_via_the_combo(extra, client, upstream):
    upstream.add("m1", status=500)
    upstream.add("m2", status=500)
    response = client.post(
        "/v1/chat/completions", json={"models": ["team", "pc/m3"], "messages": MESSAGES}
    )
    assert response.status_code == 200
    assert response.headers["x-omniroute-attempts"] == "3"
    attempts = response.json()["omniroute"]["failover"]["attempts"]
    assert [(a["model"], a["slot"], a["via"], a["status"]) for a in attempts] == [
        ("pa/m1", 0, "team", "failed"),
        ("pb/m2", 0, "team", "failed"),
        ("pc/m3", 1, None, "served"),
    ]


def test_a_window_too_small_is_skipped_without_a_call(extra, client, upstream):
    long_text = "word " * 4000  # about 5 000 tokens
    response = client.post(
        "/v1/chat/completions",
        json={
            "models": ["pw/small", "pw/big"],
            "messages": [{"role": "user", "content": long_text}],
        },
    )
    assert response.status_code == 200
    attempts = response.json()["omniroute"]["failover"]["attempts"]
    assert [(a["model"], a["status"], a["reason"], a["calls"]) for a in attempts] == [
        ("pw/small", "skipped", "context_too_large", 0),
        ("pw/big", "served", None, 1),
    ]
    assert [r["model"] for r in upstream.requests()] == ["big"]


def test_nothing_fits_is_400_context_length_exceeded(extra, client, upstream):
    response = client.post(
        "/v1/chat/completions",
        json={
            "model": "pw/small",
            "messages": [{"role": "user", "content": "w " * 4000}],
        },
    )
    assert response.status_code == 400
    error = response.json()["error"]
    assert (error["code"], error["param"]) == ("context_length_exceeded", "messages")
    assert upstream.requests() == []


def test_missing_capability_is_skipped_and_named(extra, client, upstream):
    tools = [{"type": "function", "function": {"name": "f", "parameters": {}}}]
    served = client.post(
        "/v1/chat/completions",
        json={"models": ["pw/small", "pw/big"], "tools": tools, "messages": MESSAGES},
    )
    first = served.json()["omniroute"]["failover"]["attempts"][0]
    assert (first["status"], first["reason"]) == ("skipped", "capability_mismatch")
    refused = client.post(
        "/v1/chat/completions",
        json={"model": "pw/small", "tools": tools, "messages": MESSAGES},
    )
    assert refused.status_code == 400
    error = refused.json()["error"]
    assert (error["code"], error["param"]) == ("capability_mismatch", "tools")
