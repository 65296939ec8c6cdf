"""``kind: vertex`` (spec 10 §1–§3) through a real gateway process and the mock's
Vertex wire and token endpoint: a service account made at test time signs the
JWT-bearer grant, the mock verifies it with the account's public key and issues
the bearer token every call must carry.  Gemini and Claude models with the openai
and anthropic SDKs (chat, streams, tool calls, Messages and Responses), embeddings,
failures, the token's cache and refresh, Test connection and discovery, and the
validation of the credential."""

from __future__ import annotations

import json
import time

import anthropic
import httpx
import openai
import pytest
import yaml

from providers.mock_upstream.wire_vertex import authority
from tests.integration.conftest import KEY_ALL
from tests.vertex_accounts import ServiceAccount, make_account

pytestmark = pytest.mark.integration

GEMINI = "gemini-2.5-flash"
CLAUDE = "claude-sonnet-4@20250514"
EMBED = "text-embedding-005"
PROJECT = "test-project"
REGION = "us-central1"
WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "The weather of a city",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string"}},
            "required": ["city"],
        },
    },
}
MODELS_PATH = f"/v1/projects/{PROJECT}/locations/{REGION}/publishers"


def _token_uri(mock) -> str:
    return mock.url.removesuffix("/v1") + "/token"


def _account(mock, name: str, *, register: bool = True) -> ServiceAccount:
    account = make_account(_token_uri(mock), name)
    if register:
        authority(mock.state).register(account.client_email, account.public_pem)
    return account


def _provider(slug: str, mock, account: ServiceAccount, models: list) -> dict:
    return {
        "slug": slug,
        "kind": "vertex",
        "base_url": mock.url,
        "project": PROJECT,
        "region": REGION,
        "connections": [{"name": "main", "service_account_json": account.json_text}],
        "models": models,
    }


@pytest.fixture(scope="module")
def accounts(mock) -> dict[str, ServiceAccount]:
    return {
        name: _account(mock, name, register=name != "unknown")
        for name in ("main", "revoked", "cached", "fresh", "unknown")
    }


@pytest.fixture(scope="module")
def vertex(gateway, mock, accounts):
    config = {
        "providers": [
            _provider(
                "vx",
                mock,
                accounts["main"],
                [
                    {"id": GEMINI, "input_cost": 1.0, "output_cost": 2.0},
                    {"id": "gemini-2.5-pro", "capabilities": ["reasoning"]},
                    {"id": CLAUDE, "input_cost": 3.0, "output_cost": 15.0},
                    {"id": EMBED, "input_cost": 0.1, "capabilities": ["embeddings"]},
                ],
            ),
            _provider("vxrevoked", mock, accounts["revoked"], [{"id": GEMINI}]),
            _provider("vxcached", mock, accounts["cached"], [{"id": GEMINI}]),
            _provider("vxfresh", mock, accounts["fresh"], [{"id": GEMINI}]),
            _provider("vxunknown", mock, accounts["unknown"], [{"id": GEMINI}]),
            {
                "slug": "vxb",
                "kind": "openai",
                "base_url": mock.url,
                "connections": [{"name": "main", "api_key": "sk-upstream-vxb-12345"}],
                "models": [{"id": "vfb"}],
            },
        ],
        "combos": [
            {
                "name": "claude-chain",
                "strategy": "priority",
                "targets": [
                    {"model": f"vx/{CLAUDE}", "connection": "main"},
                    {"model": "vxb/vfb"},
                ],
            }
        ],
    }
    result = gateway.apply(yaml.safe_dump(config))
    assert result.returncode == 0, result.stderr
    return gateway


@pytest.fixture
def oai(vertex):
    return openai.OpenAI(base_url=f"{vertex.url}/v1", api_key=KEY_ALL, max_retries=0)


@pytest.fixture
def claude_client(vertex):
    return anthropic.Anthropic(base_url=vertex.url, api_key=KEY_ALL, max_retries=0)


def _admin(gateway) -> dict[str, str]:
    return {"Authorization": f"Bearer {gateway.admin_token}"}


def _health(gateway, slug: str) -> dict:
    rows = httpx.get(
        f"{gateway.url}/api/connections", headers=_admin(gateway), timeout=10
    ).json()
    return next(r for r in rows if r["provider"] == slug)["health"]


def _chat(gateway, **body) -> httpx.Response:
    return httpx.post(
        f"{gateway.url}/v1/chat/completions",
        headers={"Authorization": f"Bearer {KEY_ALL}"},
        json={"messages": [{"role": "user", "content": "hi"}], **body},
        timeout=30,
    )


def _calls(upstream) -> list[dict]:
    return [r for r in upstream.requests() if r["path"] != "/token"]


def _mints(upstream, account: ServiceAccount) -> list[dict]:
    return [
        r
        for r in upstream.requests()
        if r["path"] == "/token" and r["body"]["iss"] == account.client_email
    ]


# --- Gemini models --------------------------------------------------------------------


def test_a_gemini_chat_goes_to_googles_publisher_with_a_minted_token(oai, upstream):
    answer = oai.chat.completions.create(
        model=f"vx/{GEMINI}",
        messages=[
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": "hello"},
        ],
        max_tokens=50,
    )
    assert answer.choices[0].message.content == f"Hello from mock {GEMINI}."
    assert answer.usage.completion_tokens > 0
    sent = _calls(upstream)[-1]
    assert sent["path"] == f"{MODELS_PATH}/google/models/{GEMINI}:generateContent"
    assert sent["headers"]["authorization"].startswith("Bearer ya29.mock-")
    assert "x-goog-api-key" not in sent["headers"]
    assert sent["body"] == {
        "contents": [{"role": "user", "parts": [{"text": "hello"}]}],
        "systemInstruction": {"parts": [{"text": "Be brief."}]},
        "generationConfig": {"maxOutputTokens": 50},
    }


def test_a_gemini_stream_and_tool_call_read_with_the_sdk(oai, upstream):
    stream = oai.chat.completions.create(
        model=f"vx/{GEMINI}",
        messages=[{"role": "user", "content": "hi"}],
        stream=True,
        stream_options={"include_usage": True},
    )
    text = "".join(c.choices[0].delta.content or "" for c in stream if c.choices)
    assert text == f"Hello from mock {GEMINI}."
    assert _calls(upstream)[-1]["path"].endswith(":streamGenerateContent?alt=sse")
    upstream.add(
        GEMINI, tool_calls=[{"name": "get_weather", "arguments": {"city": "Oslo"}}]
    )
    with oai.chat.completions.stream(
        model=f"vx/{GEMINI}",
        messages=[{"role": "user", "content": "weather?"}],
        tools=[WEATHER],
    ) as streamed:
        final = streamed.get_final_completion()
    call = final.choices[0].message.tool_calls[0]
    assert final.choices[0].finish_reason == "tool_calls"
    assert (call.function.name, json.loads(call.function.arguments)) == (
        "get_weather",
        {"city": "Oslo"},
    )


def test_a_messages_request_is_translated_for_a_gemini_model(claude_client, upstream):
    message = claude_client.messages.create(
        model=f"vx/{GEMINI}",
        max_tokens=64,
        messages=[{"role": "user", "content": "hello"}],
    )
    assert message.content[0].text == f"Hello from mock {GEMINI}."
    assert _calls(upstream)[-1]["path"].endswith(
        f"/google/models/{GEMINI}:generateContent"
    )


def test_a_messages_thinking_budget_reaches_a_vertex_gemini_model(
    claude_client, upstream
):
    claude_client.messages.create(
        model="vx/gemini-2.5-pro",
        max_tokens=8000,
        thinking={"type": "enabled", "budget_tokens": 6000},
        messages=[{"role": "user", "content": "hello"}],
    )
    sent = _calls(upstream)[-1]
    assert sent["path"].endswith("/google/models/gemini-2.5-pro:generateContent")
    assert sent["body"]["generationConfig"]["thinkingConfig"] == {
        "thinkingBudget": 6000,
        "includeThoughts": True,
    }
    claude_client.messages.create(
        model=f"vx/{GEMINI}",
        max_tokens=64,
        thinking={"type": "disabled"},
        messages=[{"role": "user", "content": "hello"}],
    )
    off = _calls(upstream)[-1]["body"]["generationConfig"]
    assert off["thinkingConfig"] == {"thinkingBudget": 0}


def test_a_messages_count_for_a_gemini_model_asks_count_tokens(
    claude_client, upstream, vertex
):
    from providers.mock_upstream.wire_gemini import count_of

    counted = claude_client.messages.with_raw_response.count_tokens(
        model=f"vx/{GEMINI}",
        system="Be brief.",
        messages=[{"role": "user", "content": "hello " * 50}],
    )
    assert "x-omniroute-token-count" not in counted.http_response.headers
    sent = _calls(upstream)[-1]
    assert sent["path"].endswith(f"/google/models/{GEMINI}:countTokens")
    assert sent["headers"]["authorization"].startswith("Bearer ya29.mock-")
    assert sent["body"]["systemInstruction"] == {"parts": [{"text": "Be brief."}]}
    assert "generationConfig" not in sent["body"]
    assert counted.parse().input_tokens == count_of(sent["body"])
    assert vertex.requests_log()[-1]["endpoint"] == "count_tokens"


def test_embeddings_go_to_predict(oai, upstream, vertex):
    answer = oai.embeddings.create(model=f"vx/{EMBED}", input=["a", "bb"], dimensions=4)
    assert [len(item.embedding) for item in answer.data] == [4, 4]
    assert answer.usage.prompt_tokens == 2
    sent = _calls(upstream)[-1]
    assert sent["path"] == f"{MODELS_PATH}/google/models/{EMBED}:predict"
    assert sent["body"] == {
        "instances": [{"content": "a"}, {"content": "bb"}],
        "parameters": {"outputDimensionality": 4},
    }
    assert vertex.requests_log()[-1]["endpoint"] == "embeddings"


# --- Claude models --------------------------------------------------------------------


def test_a_claude_chat_goes_to_raw_predict_without_a_model_field(oai, upstream):
    answer = oai.chat.completions.create(
        model=f"vx/{CLAUDE}", messages=[{"role": "user", "content": "hello"}]
    )
    assert answer.choices[0].message.content == f"Hello from mock {CLAUDE}."
    assert answer.model == f"vx/{CLAUDE}"
    sent = _calls(upstream)[-1]
    assert sent["path"] == f"{MODELS_PATH}/anthropic/models/{CLAUDE}:rawPredict"
    assert sent["body"]["anthropic_version"] == "vertex-2023-10-16"
    assert "model" not in sent["body"]
    assert sent["headers"]["authorization"].startswith("Bearer ya29.mock-")
    assert "x-api-key" not in sent["headers"]


def test_a_claude_stream_with_a_tool_call_reads_with_the_sdk(oai, upstream):
    upstream.add(
        CLAUDE, tool_calls=[{"name": "get_weather", "arguments": {"city": "Rome"}}]
    )
    with oai.chat.completions.stream(
        model=f"vx/{CLAUDE}",
        messages=[{"role": "user", "content": "weather?"}],
        tools=[WEATHER],
    ) as streamed:
        final = streamed.get_final_completion()
    call = final.choices[0].message.tool_calls[0]
    assert final.choices[0].finish_reason == "tool_calls"
    assert json.loads(call.function.arguments) == {"city": "Rome"}
    sent = _calls(upstream)[-1]
    assert sent["path"].endswith(f"/{CLAUDE}:streamRawPredict")
    assert sent["body"]["stream"] is True


def test_a_messages_client_reaches_claude_by_passthrough(claude_client, upstream):
    with claude_client.messages.stream(
        model=f"vx/{CLAUDE}",
        max_tokens=64,
        messages=[{"role": "user", "content": "hello"}],
        extra_headers={"anthropic-beta": "tools-2024-04-04"},
    ) as stream:
        final = stream.get_final_message()
    assert final.content[0].text == f"Hello from mock {CLAUDE}."
    sent = _calls(upstream)[-1]
    assert sent["path"].endswith(f"/{CLAUDE}:streamRawPredict")
    assert sent["body"] == {
        "max_tokens": 64,
        "messages": [{"role": "user", "content": "hello"}],
        "stream": True,
        "anthropic_version": "vertex-2023-10-16",
    }
    assert sent["headers"]["anthropic-beta"] == "tools-2024-04-04"
    counted = claude_client.messages.count_tokens(
        model=f"vx/{CLAUDE}", messages=[{"role": "user", "content": "hello"}]
    )
    assert counted.input_tokens >= 1
    sent = _calls(upstream)[-1]
    assert sent["path"].endswith("/anthropic/models/count-tokens:rawPredict")
    assert sent["body"]["model"] == CLAUDE


def test_a_responses_request_reaches_claude(oai, upstream):
    response = oai.responses.create(
        model=f"vx/{CLAUDE}", input="hello", instructions="Be brief.", store=False
    )
    assert response.output_text == f"Hello from mock {CLAUDE}."
    assert _calls(upstream)[-1]["body"]["system"] == "Be brief."


def test_each_publisher_names_what_its_wire_cannot_carry(vertex, upstream):
    """Spec 09 §2.6 per attempt: Google's wire takes a seed and a JSON mode,
    Anthropic's neither; a failover from one to the other names them on the
    answer of the attempt that served it."""
    asked = {"seed": 11, "response_format": {"type": "json_object"}}
    gemini = _chat(vertex, model=f"vx/{GEMINI}", **asked)
    assert gemini.status_code == 200, gemini.text
    assert "x-omniroute-dropped" not in gemini.headers
    config = _calls(upstream)[-1]["body"]["generationConfig"]
    assert config == {"seed": 11, "responseMimeType": "application/json"}
    claude = _chat(vertex, model=f"vx/{CLAUDE}", **asked)
    assert claude.status_code == 200, claude.text
    assert claude.headers["x-omniroute-dropped"] == "seed,response_format"
    upstream.add(GEMINI, status=500, times=1)
    failed_over = _chat(
        vertex, model=f"vx/{GEMINI}", fallback_models=[f"vx/{CLAUDE}"], **asked
    )
    assert failed_over.status_code == 200, failed_over.text
    assert failed_over.json()["model"] == f"vx/{CLAUDE}"
    assert failed_over.headers["x-omniroute-dropped"] == "seed,response_format"
    row = vertex.requests_log()[-1]
    assert [a["dropped"] for a in vertex.attempts_log(row["id"])] == [
        "[]",
        '["seed", "response_format"]',
    ]


def test_a_claude_id_with_an_at_sign_works_in_a_combo_and_a_fallback_list(
    vertex, upstream
):
    upstream.add(CLAUDE, status=503, times=1)
    answer = _chat(vertex, model="claude-chain")
    assert answer.status_code == 200, answer.text
    assert answer.json()["model"] == "vxb/vfb"
    row = vertex.requests_log()[-1]
    first, second = vertex.attempts_log(row["id"])
    assert (first["provider"], first["model"], first["connection"]) == (
        "vx",
        CLAUDE,
        "main",
    )
    assert first["target"] == f"vx/{CLAUDE}@main"
    assert (first["reason"], first["http_status"]) == ("server_error", 503)
    assert second["target"] == "vxb/vfb@main"
    listed = _chat(vertex, models=[f"vx/{CLAUDE}", "vxb/vfb"])
    assert listed.json()["model"] == f"vx/{CLAUDE}"


# --- failures -------------------------------------------------------------------------


def test_resource_exhausted_cools_the_connection(vertex, upstream):
    upstream.add(GEMINI, status=429, times=1)
    first = _chat(vertex, model=f"vx/{GEMINI}")
    assert first.status_code == 429
    assert _calls(upstream)[-1]["outcome"] == "error"
    assert _health(vertex, "vx")["cooldown_until"] is not None
    again = _chat(vertex, model=f"vx/{GEMINI}")
    assert again.json()["error"]["attempts"][0]["reason"] == "cooldown"


def test_a_revoked_token_is_unauthenticated_and_disables_the_connection(
    vertex, upstream, accounts
):
    assert _chat(vertex, model=f"vxrevoked/{GEMINI}").status_code == 200
    token = _calls(upstream)[-1]["headers"]["authorization"].split()[1]
    authority(upstream.state).tokens.pop(token)
    refused = _chat(vertex, models=[f"vxrevoked/{GEMINI}", "vxb/vfb"])
    assert refused.status_code == 200
    attempt = refused.json()["omniroute"]["failover"]["attempts"][0]
    assert (attempt["reason"], attempt["detail"], attempt["http_status"]) == (
        "server_error",
        "auth_failed",
        401,
    )
    assert _health(vertex, "vxrevoked")["auth_disabled_until"] is not None
    # the refused token left the cache (#14): after a reset the next call mints anew
    # instead of resending it until its own expiry
    minted = len(_mints(upstream, accounts["revoked"]))
    vertex.reset_health()
    again = _chat(vertex, model=f"vxrevoked/{GEMINI}")
    assert again.status_code == 200, again.text
    assert len(_mints(upstream, accounts["revoked"])) == minted + 1
    sent = _calls(upstream)[-1]["headers"]["authorization"].split()[1]
    assert sent != token


def test_a_key_the_token_endpoint_refuses_disables_the_connection(
    vertex, upstream, accounts
):
    answer = _chat(vertex, models=[f"vxunknown/{GEMINI}", "vxb/vfb"])
    assert answer.status_code == 200
    attempt = answer.json()["omniroute"]["failover"]["attempts"][0]
    assert (attempt["reason"], attempt["detail"]) == ("server_error", "auth_failed")
    logged = vertex.attempts_log(vertex.requests_log()[-1]["id"])[0]
    assert "invalid_grant" in logged["error_message"]
    assert "PRIVATE KEY" not in logged["error_message"]
    assert "PRIVATE KEY" not in answer.text
    assert len(_mints(upstream, accounts["unknown"])) == 1
    assert not [r for r in _calls(upstream) if "/google/" in r["path"]]
    assert _health(vertex, "vxunknown")["auth_disabled_until"] is not None


# --- the token ------------------------------------------------------------------------


def test_one_token_serves_many_requests(vertex, upstream, accounts):
    for _ in range(5):
        assert _chat(vertex, model=f"vxcached/{GEMINI}").status_code == 200
    assert len(_mints(upstream, accounts["cached"])) == 1
    tokens = {r["headers"]["authorization"] for r in _calls(upstream)}
    assert len(tokens) == 1


def test_a_token_near_its_expiry_is_refreshed_in_the_background(
    vertex, upstream, accounts
):
    auth = authority(upstream.state)
    auth.token_lifetime_s = 300  # within the 5 minute margin from the start
    try:
        assert _chat(vertex, model=f"vxfresh/{GEMINI}").status_code == 200
        first = _calls(upstream)[-1]["headers"]["authorization"]
        assert _chat(vertex, model=f"vxfresh/{GEMINI}").status_code == 200
        deadline = time.monotonic() + 10
        while len(_mints(upstream, accounts["fresh"])) < 2:
            assert time.monotonic() < deadline, "no background refresh"
            time.sleep(0.05)
    finally:
        auth.token_lifetime_s = 3600
    # the request that found it near expiry was served with the old token
    assert _calls(upstream)[-1]["headers"]["authorization"] == first
    deadline = time.monotonic() + 10
    while True:
        assert _chat(vertex, model=f"vxfresh/{GEMINI}").status_code == 200
        if _calls(upstream)[-1]["headers"]["authorization"] != first:
            break
        assert time.monotonic() < deadline, "the refreshed token was never used"
        time.sleep(0.05)


# --- operator calls and config --------------------------------------------------------


def test_test_connection_and_discovery_use_the_token(vertex, upstream):
    listed = httpx.get(
        f"{vertex.url}/api/connections", headers=_admin(vertex), timeout=10
    ).json()
    pk = next(c["id"] for c in listed if c["provider"] == "vx")
    probe = httpx.post(
        f"{vertex.url}/api/connections/{pk}/test", headers=_admin(vertex), timeout=30
    )
    assert probe.status_code == 200, probe.text
    assert probe.json()["ok"] is True
    sent = _calls(upstream)[-1]
    assert sent["path"] == "/v1beta1/publishers/google/models?pageSize=1000"
    assert sent["headers"]["authorization"].startswith("Bearer ya29.mock-")
    upstream.add("gemini-3-pro", content="x")
    found = httpx.post(
        f"{vertex.url}/api/providers/vx/discover", headers=_admin(vertex), timeout=30
    )
    assert found.status_code == 200, found.text
    ids = [m["id"] for m in found.json()["models"]]
    assert "gemini-3-pro" in ids
    assert GEMINI not in ids
    assert "PRIVATE KEY" not in found.text


def test_the_credential_is_write_only_and_checked_at_save(vertex, mock):
    headers = _admin(vertex)
    listed = httpx.get(f"{vertex.url}/api/connections", headers=headers, timeout=10)
    row = next(c for c in listed.json() if c["provider"] == "vx")
    assert row["secrets_set"] == ["service_account_json"]
    assert "PRIVATE KEY" not in listed.text
    bad = httpx.post(
        f"{vertex.url}/api/connections",
        headers=headers,
        json={"provider": "vx", "name": "broken", "service_account_json": "{nope"},
        timeout=10,
    )
    assert bad.status_code == 400
    assert "service_account_json" in bad.text
    assert "nope" not in bad.text.replace("service_account_json", "")
    missing = vertex.apply(
        yaml.safe_dump(
            {
                "providers": [
                    {
                        "slug": "vxnoregion",
                        "preset": "vertex",
                        "project": PROJECT,
                        "connections": [
                            {"name": "main", "service_account_json": "env:VX_SA"}
                        ],
                    }
                ]
            }
        )
    )
    assert missing.returncode != 0
    assert "connections[0].region: is required for kind 'vertex'" in missing.stderr
