"""The auto engine through the real gateway (spec 04): variants, headers, budget,
overrides, failover inside the pool, chaos, the effort header and the endpoints."""

from __future__ import annotations

import itertools
import time
from collections.abc import Iterator

import httpx
import pytest

pytestmark = pytest.mark.integration
_turns = itertools.count()
#: this module's key: its allow-list holds the auto pool to the providers the tests
#: script (pa, pb, pc, pr), whatever other modules add to the shared gateway
KEY_AUTO = "sk-or-test-auto-pool-00000000000000000000000000000"


@pytest.fixture
def client(auto_gateway) -> Iterator[httpx.Client]:
    with httpx.Client(
        base_url=auto_gateway.url,
        timeout=30,
        headers={"Authorization": f"Bearer {KEY_AUTO}"},
    ) as http:
        yield http


@pytest.fixture(scope="module")
def auto_gateway(gateway, mock):
    result = gateway.apply(f"""
providers:
  - slug: pr
    kind: openai
    base_url: {mock.url}
    connections:
      - name: main
        api_key: sk-upstream-secret-pr-1234567890
    models:
      - id: r1
        input_cost: 2.0
        output_cost: 8.0
        context_window: 200000
        capabilities: [reasoning, tools, json]
api_keys:
  - name: auto-pool
    key: {KEY_AUTO}
    allowed_models: ["auto*", "thrifty", "pa/*", "pb/*", "pc/*", "pr/*"]
candidate_overrides:
  - api_key: auto-pool
    channel: offline
    exclude: ["pa/m1@main"]
settings:
  exploration_rate: 0
""")
    assert result.returncode == 0, result.stderr
    yield gateway
    gateway.apply("settings: {}\n")


def _messages(text: str = "hello") -> list[dict]:
    # a new conversation each time: no LKGP record steers the pick
    return [{"role": "user", "content": f"{text} #{next(_turns)}"}]


def _ask(client, model: str, *, headers=None, **body):
    return client.post(
        "/v1/chat/completions",
        headers=headers or {},
        json={"model": model, "messages": _messages(), **body},
    )


def test_auto_with_the_cheap_mode_serves_the_cheapest(auto_gateway, client, upstream):
    response = _ask(client, "auto", headers={"X-OmniRoute-Mode": "cheap"})
    assert response.status_code == 200, response.text
    omni = response.json()["omniroute"]
    assert omni["route"] == "auto"
    assert omni["served_model"] == "pa/m1"
    assert omni["strategy"] == "rules"


def test_auto_cheap_variant_and_the_decision_in_the_log(auto_gateway, client, upstream):
    response = _ask(client, "auto/cheap")
    assert response.status_code == 200, response.text
    assert response.json()["omniroute"]["served_model"] == "pa/m1"
    deadline = time.monotonic() + 3
    while True:
        row = auto_gateway.requests_log()[-1]
        if row["auto_decision"] or time.monotonic() > deadline:
            break
        time.sleep(0.05)
    assert '"route":"auto/cheap"' in row["auto_decision"].replace(" ", "")


def test_a_failing_candidate_fails_over_inside_the_pool(auto_gateway, client, upstream):
    upstream.add("m1", status=500)
    response = _ask(client, "auto/cheap")
    assert response.status_code == 200, response.text
    assert response.json()["omniroute"]["served_model"] != "pa/m1"
    assert response.headers["x-omniroute-attempts"] == "2"


@pytest.mark.parametrize("value", ["abc", "-1", "0", "1e999", "inf"])
def test_a_bad_budget_is_a_400(auto_gateway, client, upstream, value):
    response = _ask(client, "auto", headers={"X-OmniRoute-Budget": value})
    assert response.status_code == 400
    error = response.json()["error"]
    assert error["code"] == "invalid_budget"
    assert error["param"] == "X-OmniRoute-Budget"
    assert upstream.requests() == []


def test_a_strict_budget_nothing_fits_is_a_402(auto_gateway, client, upstream):
    response = _ask(
        client,
        "auto",
        headers={
            "X-OmniRoute-Budget": "0.0000001",
            "X-OmniRoute-Budget-Fallback": "strict",
        },
    )
    assert response.status_code == 402
    error = response.json()["error"]
    assert error["code"] == "budget_exceeded"
    assert error["type"] == "budget_error"
    assert error["message"].startswith("No candidate fits the budget of $0.000000")
    assert upstream.requests() == []


def test_a_budget_keeps_expensive_models_out(auto_gateway, client, upstream):
    upstream.add("m1", status=500)
    upstream.add("m2", status=500)
    upstream.add("r1", content="expensive")
    response = _ask(client, "auto", headers={"X-OmniRoute-Budget": "0.001"})
    # r1 (2.0/8.0 per 1M) costs more than $0.001 for this request: never called
    assert "r1" not in {r["model"] for r in upstream.requests()}
    assert response.status_code in (502, 503)


def test_the_budget_header_is_ignored_outside_auto(auto_gateway, client, upstream):
    response = _ask(client, "pa/m1", headers={"X-OmniRoute-Budget": "abc"})
    assert response.status_code == 200


def test_overrides_exclude_a_candidate_for_their_channel(
    auto_gateway, client, upstream
):
    for _ in range(3):
        response = _ask(client, "auto/offline", headers={"X-OmniRoute-Mode": "cheap"})
        assert response.status_code == 200, response.text
        assert response.json()["omniroute"]["served_model"] != "pa/m1"


def test_reasoning_category_prefers_a_reasoning_model(auto_gateway, client, upstream):
    response = _ask(client, "auto/reasoning")
    assert response.json()["omniroute"]["served_model"] == "pr/r1"


def test_chaos_fans_out_and_the_first_good_answer_wins(auto_gateway, client, upstream):
    upstream.add("m1", latency_ms=3000, content="slow")
    upstream.add("m2", content="fast")
    upstream.add("m3", latency_ms=3000, content="slow")
    upstream.add("r1", latency_ms=3000, content="slow")
    started = time.monotonic()
    response = _ask(client, "auto/chaos")
    assert response.status_code == 200, response.text
    assert time.monotonic() - started < 2.5
    data = response.json()
    assert data["choices"][0]["message"]["content"] == "fast"
    assert data["omniroute"]["strategy"] == "chaos"
    assert response.headers["x-omniroute-attempts"] == "4"
    assert {r["model"] for r in upstream.requests()} == {"m1", "m2", "m3", "r1"}


def test_chaos_streams_the_first_stream_with_content(auto_gateway, client, upstream):
    upstream.add("m1", ttft_ms=3000)
    upstream.add("m2", content="streamed fast")
    upstream.add("m3", ttft_ms=3000)
    upstream.add("r1", ttft_ms=3000)
    response = _ask(client, "auto/chaos", stream=True)
    assert response.status_code == 200
    assert "streamed" in response.text
    assert response.text.endswith("data: [DONE]\n\n")


def test_chaos_all_failing_is_all_models_failed(auto_gateway, client, upstream):
    for model in ("m1", "m2", "m3", "r1"):
        upstream.add(model, status=500)
    response = _ask(client, "auto/chaos")
    assert response.status_code == 502
    assert response.json()["error"]["code"] == "all_models_failed"


def test_effort_auto_sets_reasoning_effort_for_reasoning_models(
    auto_gateway, client, upstream
):
    response = _ask(client, "pr/r1", headers={"X-OmniRoute-Effort": "auto"})
    assert response.status_code == 200
    assert upstream.requests()[-1]["body"]["reasoning_effort"] == "low"
    _ask(client, "pa/m1", headers={"X-OmniRoute-Effort": "auto"})
    assert "reasoning_effort" not in upstream.requests()[-1]["body"]
    _ask(
        client,
        "pr/r1",
        headers={"X-OmniRoute-Effort": "auto"},
        reasoning_effort="high",
    )
    assert upstream.requests()[-1]["body"]["reasoning_effort"] == "high"


# --- endpoints ---------------------------------------------------------------------


def test_candidates_endpoint_scores_the_pool(auto_gateway, client, upstream):
    response = client.get("/v1/auto-combo/coding/candidates")
    assert response.status_code == 200, response.text
    data = response.json()
    assert data["route"] == "auto/coding"
    assert data["task_type"] == "coding"
    assert data["weights_source"] == "quality-first"
    keys = [c["key"] for c in data["candidates"]]
    assert {"pa/m1@main", "pb/m2@main", "pr/r1@main"} <= set(keys)
    first = data["candidates"][0]
    assert first["rank"] == 1
    assert first["eligible"] is True
    assert len(first["factors"]) == 16
    assert 0 <= first["score"] <= 1


def test_candidates_endpoint_flags_overrides(auto_gateway, client, upstream):
    data = client.get("/v1/auto-combo/offline/candidates").json()
    flagged = {c["key"]: c for c in data["candidates"]}
    assert flagged["pa/m1@main"]["excluded"] is True
    assert flagged["pa/m1@main"]["eligible"] is False


@pytest.mark.parametrize(
    ("path", "status", "code"),
    [
        ("/v1/auto-combo/bad%20channel/candidates", 400, "invalid_auto_channel"),
        ("/v1/auto-combo/turbo/candidates", 404, "model_not_found"),
        ("/v1/auto-combo/auto/candidates?task=poetry", 400, "invalid_value"),
    ],
)
def test_candidates_endpoint_errors(auto_gateway, client, path, status, code):
    response = client.get(path)
    assert response.status_code == status
    assert response.json()["error"]["code"] == code


def test_candidates_endpoint_needs_a_key(auto_gateway):
    response = httpx.get(f"{auto_gateway.url}/v1/auto-combo/auto/candidates")
    assert response.status_code == 401


def test_api_combos_auto_lists_the_builtin_ids(auto_gateway):
    response = httpx.get(
        f"{auto_gateway.url}/api/combos/auto",
        headers={"Authorization": f"Bearer {auto_gateway.admin_token}"},
    )
    assert response.status_code == 200, response.text
    combos = response.json()["combos"]
    # spec 04 §10: first the 8 ids of §1.2, in its table's order
    assert [c["id"] for c in combos][:8] == [
        "auto",
        "auto/lkgp",
        "auto/coding",
        "auto/fast",
        "auto/cheap",
        "auto/offline",
        "auto/smart",
        "auto/chaos",
    ]
    assert combos[-1]["id"] == "auto/reasoning:pro"
    first = combos[0]
    assert first["kind"] == "variant"
    assert first["router_strategy"] == "lkgp"
    assert first["context_length"] >= 200_000
    assert first["candidate_pool"]
    forbidden = httpx.get(
        f"{auto_gateway.url}/api/combos/auto",
        headers={"Authorization": f"Bearer {KEY_AUTO}"},
    )
    assert forbidden.status_code in (401, 403)


def test_models_list_has_auto_ids_with_limits(auto_gateway, client):
    data = client.get("/v1/models").json()["data"]
    auto = {m["id"]: m for m in data if m["owned_by"] == "omniroute"}
    assert "auto/reasoning:pro" in auto
    assert auto["auto"]["context_length"] >= 200_000
    assert auto["auto"]["max_output_tokens"] > 0


def test_auto_keeps_a_session_on_its_last_good_candidate(
    auto_gateway, client, upstream
):
    session = {"X-Session-Id": f"auto-session-{next(_turns)}"}
    first = _ask(client, "auto", headers={**session, "X-OmniRoute-Mode": "cheap"})
    assert first.json()["omniroute"]["strategy"] == "rules"
    served = first.json()["omniroute"]["served_model"]
    # a different mode would pick another model; the session's record wins
    second = _ask(client, "auto", headers={**session, "X-OmniRoute-Mode": "quality"})
    omni = second.json()["omniroute"]
    assert omni["strategy"] == "lkgp"
    assert omni["served_model"] == served


def test_a_persisted_auto_combo(auto_gateway, client, upstream):
    result = auto_gateway.apply("""
combos:
  - name: thrifty
    strategy: auto
    config: {auto: {modePack: cost-saver, maxAttempts: 2}}
    targets: [{model: pb/m2}, {model: pr/r1}]
""")
    assert result.returncode == 0, result.stderr
    response = _ask(client, "thrifty")
    assert response.status_code == 200, response.text
    omni = response.json()["omniroute"]
    assert omni["route"] == "combo:thrifty"
    assert omni["served_model"] == "pb/m2"
    assert omni["strategy"] == "rules"
