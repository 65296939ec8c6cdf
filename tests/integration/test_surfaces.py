"""What every client surface shares (spec 09 §1, §2, §4.5) through a real gateway
process: a wrong method is a 405 with ``Allow`` in the surface's own envelope, a
trailing slash is the same path, ``X-OmniRoute-Strict`` refuses a drop before any
call, and ``count_tokens`` asks an Anthropic-kind upstream before counting locally."""

from __future__ import annotations

import anthropic
import httpx
import pytest

from tests.integration.conftest import KEY_ALL

pytestmark = pytest.mark.integration

OPENAI_SHAPED = (
    "/v1/chat/completions",
    "/v1/responses",
    "/v1/embeddings",
    "/v1/completions",
)


@pytest.fixture
def claude(gateway):
    return anthropic.Anthropic(base_url=gateway.url, api_key=KEY_ALL, max_retries=0)


@pytest.mark.parametrize("path", [*OPENAI_SHAPED, "/v1/messages"])
@pytest.mark.parametrize("slash", ["", "/"])
def test_a_wrong_method_is_a_405_with_allow_in_the_surfaces_envelope(
    gateway, path, slash
):
    response = httpx.put(
        f"{gateway.url}{path}{slash}",
        headers={"Authorization": f"Bearer {KEY_ALL}"},
        timeout=10,
    )
    assert response.status_code == 405
    assert response.headers["allow"] == "POST"
    body = response.json()
    if path == "/v1/messages":
        assert body["type"] == "error"
        assert body["error"]["type"] == "invalid_request_error"
    else:
        assert body["error"]["code"] == "method_not_allowed"


@pytest.mark.parametrize(
    "path", ["/v1/messages/", "/v1/embeddings/", "/v1/completions/"]
)
def test_a_trailing_slash_is_the_same_surface(gateway, upstream, path):
    bodies = {
        "/v1/messages/": {
            "model": "pa/m1",
            "max_tokens": 8,
            "messages": [{"role": "user", "content": "hi"}],
        },
        "/v1/embeddings/": {"model": "pa/m1", "input": "x"},
        "/v1/completions/": {"model": "pa/m1", "prompt": "hi"},
    }
    response = httpx.post(
        f"{gateway.url}{path}",
        headers={"Authorization": f"Bearer {KEY_ALL}"},
        json=bodies[path],
        timeout=30,
    )
    assert response.status_code == 200, response.text


def test_strict_refuses_a_responses_drop_before_any_call(gateway, upstream):
    body = {
        "model": "pa/m1",
        "input": "hi",
        "tools": [{"type": "web_search"}],
    }
    refused = httpx.post(
        f"{gateway.url}/v1/responses",
        headers={"Authorization": f"Bearer {KEY_ALL}", "X-OmniRoute-Strict": "true"},
        json=body,
        timeout=30,
    )
    assert refused.status_code == 400
    error = refused.json()["error"]
    assert (error["code"], error["param"]) == ("unsupported_parameter", "tools[0]")
    assert upstream.requests() == []
    lenient = httpx.post(
        f"{gateway.url}/v1/responses",
        headers={"Authorization": f"Bearer {KEY_ALL}"},
        json=body,
        timeout=30,
    )
    assert lenient.status_code == 200
    assert lenient.headers["x-omniroute-dropped"] == "tools[0]"


def test_count_tokens_asks_an_anthropic_upstream_by_passthrough(
    claude, upstream, gateway
):
    counted = claude.messages.with_raw_response.count_tokens(
        model="pc/m3",
        messages=[{"role": "user", "content": "hello " * 50}],
        extra_headers={"anthropic-beta": "token-counting-2024-11-01"},
    )
    assert counted.parse().input_tokens > 0
    assert "x-omniroute-token-count" not in counted.http_response.headers
    assert counted.http_response.headers["x-omniroute-served-model"] == "pc/m3"
    sent = upstream.requests()[-1]
    assert sent["path"].endswith("/messages/count_tokens")
    assert sent["body"]["model"] == "m3"
    assert sent["headers"]["anthropic-beta"] == "token-counting-2024-11-01"
    assert sent["headers"]["x-api-key"] == "sk-ant-upstream-secret-pc-123456"
    headers = counted.http_response.headers
    assert (headers["x-omniroute-route"], headers["x-omniroute-attempts"]) == (
        "direct",
        "1",
    )
    # logged (endpoint count_tokens), never billed (09 §4.5)
    row = gateway.requests_log()[-1]
    assert (row["endpoint"], row["served_model"], row["cost_usd"]) == (
        "count_tokens",
        "pc/m3",
        None,
    )
    attempt = gateway.attempts_log(row["id"])[-1]
    assert (attempt["passthrough"], attempt["billable"]) == (1, 0)
    metrics = httpx.get(f"{gateway.url}/metrics", timeout=10).text
    assert 'omniroute_requests_total{endpoint="count_tokens"' in metrics


def test_count_tokens_fails_over_then_counts_locally(claude, upstream, gateway):
    upstream.add("m3", status=500)
    counted = claude.messages.with_raw_response.count_tokens(
        model="pc/m3", messages=[{"role": "user", "content": "hello " * 50}]
    )
    assert counted.parse().input_tokens > 50
    assert counted.http_response.headers["x-omniroute-token-count"] == "estimated"
    assert counted.http_response.headers["x-omniroute-attempts"] == "1"
    assert len(upstream.requests()) == 1
    row = gateway.requests_log()[-1]
    assert (row["endpoint"], row["status"], row["served_model"]) == (
        "count_tokens",
        "success",
        None,
    )
    assert gateway.attempts_log(row["id"])[-1]["result"] == "server_error"
