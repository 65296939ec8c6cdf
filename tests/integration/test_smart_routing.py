"""Smart tier routing through the real gateway (spec 05 §2, examples E1-E2)."""

from __future__ import annotations

import itertools
import time

import httpx
import pytest

pytestmark = pytest.mark.integration
_ids = itertools.count()
SNIPPET = "```python\n" + "x = 1\n" * 150 + "```"


@pytest.fixture(scope="module")
def smart_gateway(gateway):
    result = gateway.apply("""
combos:
  - name: normal-easy
    strategy: priority
    targets: [{model: pa/m1}]
  - name: normal-hard
    strategy: priority
    targets: [{model: pb/m2}]
smart_routes:
  - alias: normal
    easy: normal-easy
    hard: normal-hard
    threshold: 4
    session_ttl_seconds: 1800
""")
    assert result.returncode == 0, result.stderr
    yield gateway
    gateway.apply("settings: {}\n")


def _ask(client, content: str, *, headers=None, session=None, **body):
    headers = dict(headers or {})
    if session:
        headers["X-Session-Id"] = session
    return client.post(
        "/v1/chat/completions",
        headers=headers,
        json={
            "model": "normal",
            "messages": [{"role": "user", "content": content}],
            **body,
        },
    )


def test_an_easy_request_goes_to_the_easy_target(smart_gateway, client, upstream):
    response = _ask(client, f"thanks! {next(_ids)}")
    assert response.status_code == 200, response.text
    assert response.headers["x-omniroute-tier"] == "easy"
    assert response.headers["x-omniroute-tier-target"] == "normal-easy"
    assert response.headers["x-omniroute-tier-score"] == "0"
    omni = response.json()["omniroute"]
    assert omni["requested_model"] == "normal"
    assert omni["route"] == "combo:normal-easy"
    assert omni["served_model"] == "pa/m1"


def test_an_effort_keyword_is_hard(smart_gateway, client, upstream):
    response = _ask(client, f"Find the ROOT-CAUSE of this flaky test {next(_ids)}")
    assert response.headers["x-omniroute-tier"] == "hard"
    assert response.headers["x-omniroute-tier-score"] == "4"
    assert response.json()["omniroute"]["served_model"] == "pb/m2"


def test_explicit_reasoning_is_hard(smart_gateway, client, upstream):
    response = _ask(client, "hi", reasoning_effort="high")
    assert response.headers["x-omniroute-tier"] == "hard"
    assert response.headers["x-omniroute-tier-score"] == "0"


def test_the_session_pin_never_downgrades(smart_gateway, client, upstream):
    session = f"smart-{next(_ids)}"
    first = _ask(client, "please think step by step", session=session)
    assert first.headers["x-omniroute-tier"] == "hard"
    thanks = _ask(client, "thanks!", session=session)
    assert thanks.headers["x-omniroute-tier"] == "hard"
    assert thanks.json()["omniroute"]["served_model"] == "pb/m2"
    forced = _ask(
        client, "thanks!", session=session, headers={"X-OmniRoute-Tier": "easy"}
    )
    assert forced.headers["x-omniroute-tier"] == "easy"
    assert forced.json()["omniroute"]["served_model"] == "pa/m1"
    bypass = _ask(
        client, "thanks!", session=session, headers={"X-OmniRoute-Smart-Routing": "off"}
    )
    assert bypass.headers["x-omniroute-tier"] == "hard"  # the pin's tier
    assert "x-omniroute-tier-score" not in bypass.headers


def test_the_request_log_keeps_the_verdict(smart_gateway, client, upstream):
    _ask(client, f"debug this deadlock {next(_ids)}")
    deadline = time.monotonic() + 3
    while True:
        row = smart_gateway.requests_log()[-1]
        if row["smart_alias"] or time.monotonic() > deadline:
            break
        time.sleep(0.05)
    assert row["smart_alias"] == "normal"
    assert row["tier"] == "hard"
    assert row["tier_source"] == "classifier"
    assert row["tier_score"] == 4
    assert row["tier_target"] == "normal-hard"
    assert row["smart_mode"] == "enforce"
    assert "effort_keyword" in row["tier_signals"]


def test_metrics_show_the_split_and_the_scores(smart_gateway, client, upstream):
    _ask(client, f"hello {next(_ids)}")
    text = httpx.get(f"{smart_gateway.url}/metrics").text
    assert 'omniroute_smartroute_requests_total{alias="normal"' in text
    assert 'omniroute_smartroute_score_bucket{alias="normal"' in text


def test_observe_mode_reports_but_always_sends_hard(smart_gateway, client, upstream):
    result = smart_gateway.apply("settings: {smart_routing_mode: observe}\n")
    assert result.returncode == 0, result.stderr
    response = _ask(client, f"thanks {next(_ids)}")
    assert response.headers["x-omniroute-tier"] == "easy"
    assert response.headers["x-omniroute-tier-mode"] == "observe"
    assert response.json()["omniroute"]["served_model"] == "pb/m2"


def test_off_mode_sends_hard_without_headers(smart_gateway, client, upstream):
    result = smart_gateway.apply("settings: {smart_routing_mode: off}\n")
    assert result.returncode == 0, result.stderr
    response = _ask(client, f"thanks {next(_ids)}")
    assert "x-omniroute-tier" not in response.headers
    assert response.json()["omniroute"]["served_model"] == "pb/m2"
