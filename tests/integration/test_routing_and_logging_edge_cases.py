"""Routing, refusal and logging cases of spec 01-06 through the real gateway.

Each case is one behaviour a client sees: the upstream is called at most once per
target (02 §5), the serving combo's strategy is reported also through a combo-ref
(01) and carried by the log row, an ``auto`` pool the engine let fall open is called
rather than skipped (04 §2.3 F6), an ``auto`` pool that leaves nothing to call answers
with ``error.attempts`` (01 "When nothing was served"), the ``model_failover`` log line
names the key (02 §12), a client that leaves a committed stream is logged with the
model that served it (06 §1.1) and a cancelled stream attempt keeps the status it got;
refusals are counted and logged with the model sent, their route and the chain; new
credentials from an import clear an auth disable; the last chunk repeats the usage a
client asked for; budget-fallback combos, chaos slots and smart aliases route in a
chain; an interrupted Anthropic stream bills what it delivered.
"""

from __future__ import annotations

import json
import time
import uuid

import httpx
import pytest

from tests.integration.conftest import KEY_PA_ONLY, post_chat

pytestmark = pytest.mark.integration
KEY_NARROW = "sk-or-test-narrow-pool-00000000000000000000000000"
KEY_DEFAULTS = "sk-or-test-defaults-alias-000000000000000000000"


@pytest.fixture(scope="module")
def extended(gateway, mock):
    result = gateway.apply(f"""
providers:
  - slug: pv
    kind: openai
    base_url: {mock.url}
    connections:
      - name: main
        api_key: sk-upstream-secret-pv-1234567890
    models:
      - id: v1
        context_window: 8000
        capabilities: [tools]
combos:
  - name: audit-inner
    strategy: round-robin
    targets: [{{model: pa/m1}}]
  - name: audit-outer
    strategy: priority
    targets: [{{combo: audit-inner}}, {{model: pb/m2}}]
smart_routes:
  - alias: audit-smart
    easy: pa/m1
    hard: pb/m2
api_keys:
  - name: narrow
    key: {KEY_NARROW}
    allowed_models: ["auto*", "pv/*"]
  - name: defaults-alias
    key: {KEY_DEFAULTS}
    failover_defaults: {{models: [audit-smart, pb/m2]}}
""")
    assert result.returncode == 0, result.stderr
    yield gateway
    # the extra provider and key must not join other modules' auto pools
    admin = {"Authorization": f"Bearer {gateway.admin_token}"}
    for resource, field, value in (
        ("providers", "slug", "pv"),
        ("api-keys", "name", "narrow"),
        ("api-keys", "name", "defaults-alias"),
        ("smart-routes", "alias", "audit-smart"),
        ("combos", "name", "audit-thrifty"),
        ("combos", "name", "audit-strict"),
        ("combos", "name", "audit-outer"),
        ("combos", "name", "audit-inner"),
    ):
        rows = httpx.get(f"{gateway.url}/api/{resource}", headers=admin).json()
        for row in rows:
            if row[field] == value:
                url = f"{gateway.url}/api/{resource}/{row['id']}"
                assert httpx.delete(url, headers=admin).status_code == 204


def test_an_upstream_reset_on_a_reused_connection_is_not_sent_again(
    extended, client, upstream
):
    assert post_chat(extended, model="pa/m1").status_code == 200  # pools a connection
    upstream.reset()
    upstream.add("m1", reset="before_headers")
    response = post_chat(extended, models=["pa/m1", "pb/m2"])
    assert response.status_code == 200
    assert [r["model"] for r in upstream.requests()] == ["m1", "m2"]


def test_the_strategy_of_a_combo_reached_through_a_ref_is_reported(
    extended, client, upstream
):
    response = post_chat(extended, model="audit-outer")
    assert response.status_code == 200, response.text
    omni = response.json()["omniroute"]
    assert (omni["route"], omni["served_model"], omni["strategy"]) == (
        "combo:audit-outer",
        "pa/m1",
        "round-robin",
    )


def test_an_auto_pool_with_the_vision_filter_fallen_open_is_called(extended, upstream):
    image = {"type": "image_url", "image_url": {"url": "https://x.test/y.png"}}
    response = post_chat(
        extended,
        key=KEY_NARROW,
        model="auto",
        messages=[
            {"role": "user", "content": [{"type": "text", "text": "see"}, image]}
        ],
    )
    assert response.status_code == 200, response.text
    assert response.headers["x-omniroute-served-model"] == "pv/v1"
    assert [r["model"] for r in upstream.requests()] == ["v1"]


def test_an_auto_pool_too_small_for_the_request_lists_the_attempts(extended, upstream):
    response = post_chat(extended, key=KEY_NARROW, model="auto", max_tokens=20_000)
    assert response.status_code == 400, response.text
    error = response.json()["error"]
    assert (error["code"], error["param"]) == ("context_length_exceeded", "messages")
    assert error["attempts"] == []
    assert response.headers["x-omniroute-attempts"] == "0"
    assert response.headers["x-omniroute-route"] == "auto"
    assert upstream.requests() == []


def _new_row(gateway, before: int, status: str):
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        rows = [r for r in gateway.requests_log()[before:] if r["status"] == status]
        if rows:
            return rows[-1]
        time.sleep(0.05)
    raise AssertionError(f"no new request log row with status {status}")


def test_the_model_failover_log_line_names_the_key(extended, client, upstream):
    upstream.add("m1", status=503, times=1)
    before = len(extended.requests_log())
    response = client.post(
        "/v1/chat/completions",
        json={
            "models": ["pa/m1", "pb/m2"],
            "messages": [{"role": "user", "content": uuid.uuid4().hex}],
        },
    )
    assert response.status_code == 200
    request_id = str(_new_row(extended, before, "success")["id"]).replace("-", "")
    events = [
        json.loads(text[text.index("{") :])
        for text in extended.log.read_text("utf-8", "replace").splitlines()
        if "model_failover {" in text
    ]
    mine = [e for e in events if e["request_id"].replace("-", "") == request_id]
    assert [e["api_key"] for e in mine] == ["all"]


def test_a_client_leaving_a_committed_stream_is_logged_with_the_served_model(
    extended, client, upstream
):
    upstream.add("m1", tokens=50, token_delay_ms=100)
    before = len(extended.requests_log())
    body = {
        "models": ["pa/m1", "pb/m2"],
        "stream": True,
        "messages": [{"role": "user", "content": uuid.uuid4().hex}],
    }
    with client.stream("POST", "/v1/chat/completions", json=body) as response:
        assert response.status_code == 200
        lines = response.iter_lines()
        for _ in range(3):
            next(lines)
    row = _new_row(extended, before, "client_closed")
    assert (row["served_model"], row["failover"]) == ("pa/m1", 1)


def _metric(gateway, series: str) -> float:
    for line in httpx.get(f"{gateway.url}/metrics").text.splitlines():
        if line.startswith(series + " "):
            return float(line.split()[-1])
    return 0.0


def test_the_log_row_carries_the_strategy_of_the_response(extended, client, upstream):
    before = len(extended.requests_log())
    response = post_chat(extended, model="team")
    assert response.json()["omniroute"]["strategy"] == "priority"
    assert _new_row(extended, before, "success")["strategy"] == "priority"


def test_a_refusal_decided_in_the_attempt_loop_is_counted(extended, client, upstream):
    series = 'omniroute_refusals_total{code="no_healthy_candidate"}'
    upstream.add("m1", status=429, headers={"retry-after": "60"}, times=1)
    assert post_chat(extended, model="pa/m1").status_code == 429
    counted = _metric(extended, series)
    response = post_chat(extended, model="pa/m1")  # cooling: nothing to call
    assert response.json()["error"]["code"] == "no_healthy_candidate"
    assert _metric(extended, series) == counted + 1


def test_a_body_refused_by_validation_keeps_the_model_sent(extended, client):
    before = len(extended.requests_log())
    response = client.post(
        "/v1/chat/completions", json={"model": "pa/m1", "messages": []}
    )
    assert response.status_code == 400
    assert _new_row(extended, before, "refused")["requested_model"] == "pa/m1"


def test_a_stream_waiting_for_its_first_token_is_in_flight_as_a_stream(
    extended, client, upstream
):
    upstream.add("m1", ttft_ms=1500)
    series = 'omniroute_requests_in_flight{stream="true"}'
    with httpx.Client(
        base_url=extended.url, headers=client.headers, timeout=30
    ) as other:
        import threading

        done = threading.Event()

        def ask() -> None:
            post_chat(extended, model="pa/m1", stream=True)
            done.set()

        threading.Thread(target=ask, daemon=True).start()
        deadline = time.monotonic() + 1.2
        seen = 0.0
        while time.monotonic() < deadline and not done.is_set() and not seen:
            seen = _metric(extended, series)
            time.sleep(0.05)
        other.close()
        assert seen == 1.0
        assert done.wait(10)


def test_a_cancelled_stream_attempt_keeps_the_status_it_got(extended, upstream):
    upstream.add("m1", ttft_ms=3000)  # 200 and headers at once, tokens much later
    before = len(extended.requests_log())
    with pytest.raises(httpx.ReadTimeout):
        post_chat(extended, model="pa/m1", stream=True, timeout=0.8)
    row = _new_row(extended, before, "client_closed")
    [attempt] = extended.attempts_log(str(row["id"]))
    assert (attempt["result"], attempt["http_status"]) == ("cancelled", 200)
    assert attempt["ttfb_ms"] is not None


def _pa_key(mock_url: str, key: str) -> str:
    return f"""
providers:
  - slug: pa
    kind: openai
    base_url: {mock_url}
    connections:
      - name: main
        api_key: {key}
    models:
      - id: m1
        input_cost: 0.05
        output_cost: 0.40
        context_window: 400000
"""


def test_new_credentials_from_an_import_clear_an_auth_disable(extended, mock, upstream):
    upstream.add("m1", status=401, times=1)
    assert post_chat(extended, model="pa/m1").status_code == 502
    skipped = post_chat(extended, model="pa/m1")
    assert skipped.json()["error"]["attempts"][0]["reason"] == "auth_disabled"
    try:
        result = extended.apply(_pa_key(mock.url, "sk-upstream-secret-pa-rotated-0001"))
        assert result.returncode == 0, result.stderr
        assert post_chat(extended, model="pa/m1").status_code == 200
    finally:
        restored = extended.apply(_pa_key(mock.url, "sk-upstream-secret-pa-1234567890"))
        assert restored.returncode == 0, restored.stderr


def _stream_events(response: httpx.Response) -> list:
    return [
        json.loads(line[6:])
        for line in response.text.splitlines()
        if line.startswith("data: ") and line != "data: [DONE]"
    ]


def test_the_report_rides_on_the_usage_chunk_a_client_asked_for(extended, upstream):
    asked = post_chat(
        extended, model="pa/m1", stream=True, stream_options={"include_usage": True}
    )
    events = _stream_events(asked)
    assert "omniroute" in events[-1]
    assert events[-1]["choices"] == []  # the usage chunk, once (spec 09 §7)
    assert [e for e in events if "usage" in e] == [events[-1]]
    plain = _stream_events(post_chat(extended, model="pa/m1", stream=True))
    assert all("usage" not in event for event in plain)
    assert all(event["choices"] for event in plain)
    assert plain[-1]["choices"][0]["finish_reason"] == "stop"
    assert "omniroute" in plain[-1]


def test_a_budget_fallback_alias_in_a_combo_routes(extended, upstream):
    result = extended.apply("""
combos:
  - name: audit-thrifty
    strategy: auto
    config: {auto: {budgetCap: 0.000000001, budgetFallback: soft, maxAttempts: 2.0}}
  - name: audit-strict
    strategy: auto
    config: {auto: {budgetCap: 0.000000001, budgetFallback: hard}}
""")
    assert result.returncode == 0, result.stderr
    cheap = post_chat(extended, model="audit-thrifty")
    assert cheap.status_code == 200, cheap.text  # soft = cheapest
    strict = post_chat(extended, model="audit-strict")
    assert strict.status_code == 402, strict.text  # hard = strict
    assert strict.json()["error"]["code"] == "budget_exceeded"


def test_a_chaos_slots_items_add_up_to_the_attempts_header(extended, upstream):
    upstream.add("m1", status=500)
    upstream.add("m2", latency_ms=300)  # loses the race, is cancelled
    response = post_chat(extended, models=["pa/m1", "auto/chaos"])
    assert response.status_code == 200, response.text
    attempts = response.json()["omniroute"]["failover"]["attempts"]
    assert sum(a["calls"] for a in attempts) == int(
        response.headers["x-omniroute-attempts"]
    )
    assert any(a["reason"] == "client_cancelled" for a in attempts)


def test_a_smart_alias_is_its_own_chain_entry(extended, upstream):
    # spec 05 §2.1: the chain is built with the alias as sent, then substituted
    response = post_chat(extended, models=["audit-smart", "pa/m1"])
    assert response.status_code == 200, response.text
    omni = response.json()["omniroute"]
    assert (omni["route"], omni["served_model"]) == ("chain", "pa/m1")
    assert response.headers["x-omniroute-tier"] == "easy"


def test_a_smart_alias_in_failover_defaults_extends_the_chain(extended, upstream):
    upstream.add("m1", status=500)
    response = post_chat(extended, key=KEY_DEFAULTS, model="audit-smart")
    assert response.status_code == 200, response.text
    omni = response.json()["omniroute"]
    assert (omni["route"], omni["served_model"]) == ("chain", "pb/m2")
    assert [a["model"] for a in omni["failover"]["attempts"]] == ["pa/m1", "pb/m2"]


def test_a_refusal_mid_chain_carries_the_headers_and_logs_the_chain(extended, upstream):
    upstream.add("m1", status=500)
    before = len(extended.requests_log())
    response = post_chat(
        extended,
        models=["pa/m1", "auto"],
        headers={
            "X-OmniRoute-Budget": "0.0000001",
            "X-OmniRoute-Budget-Fallback": "strict",
        },
    )
    assert response.status_code == 402, response.text
    assert response.headers["x-omniroute-attempts"] == "1"
    assert response.headers["x-omniroute-route"] == "chain"
    row = _new_row(extended, before, "refused")
    assert (row["route"], row["failover"]) == ("chain", 1)


def test_a_refusal_of_a_resolved_model_logs_its_route(extended, upstream):
    before = len(extended.requests_log())
    response = post_chat(extended, key=KEY_PA_ONLY, model="team")
    assert response.status_code == 403
    assert _new_row(extended, before, "refused")["route"] == "combo:team"


def test_an_interrupted_anthropic_stream_bills_what_it_delivered(extended, upstream):
    upstream.add("m3", drop_after_tokens=3)
    before = len(extended.requests_log())
    response = post_chat(extended, model="pc/m3", stream=True)
    assert "stream_interrupted" in response.text
    row = _new_row(extended, before, "interrupted")
    assert row["prompt_tokens"] > 0
    assert row["completion_tokens"] > 0  # at least characters / 4 of the tokens sent
