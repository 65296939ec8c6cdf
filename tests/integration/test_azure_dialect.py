"""``kind: azure`` (spec 10 §1, §2, §3) through a real gateway process and the mock's
Azure wire: chat and streams (text and tool calls) with the openai SDK on the v1 API
and the deployment form, the Responses surface (translated, and passthrough on
``wire: responses``), embeddings, the Messages surface with the anthropic SDK, a 429
cooling the connection, a wrong key disabling it, an Entra token minted once and
reused, Test connection and discovery over REST."""

from __future__ import annotations

import json

import anthropic
import httpx
import openai
import pytest

from providers.mock_upstream.wire_azure import API_KEY, CLIENT_SECRET, token_valid
from tests.integration.conftest import KEY_ALL

pytestmark = pytest.mark.integration

WRONG_KEY = "azure-wrong-key-000000000000"
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


@pytest.fixture(scope="module")
def azure(gateway, mock):
    origin = mock.url.removesuffix("/v1")
    result = gateway.apply(f"""
providers:
  - slug: az
    preset: azure
    base_url: {origin}
    resource: contoso
    connections:
      - name: main
        api_key: {API_KEY}
    models:
      - id: gpt-4o
        deployment: prod-4o
        input_cost: 1.0
        output_cost: 2.0
      - id: text-embedding-3-small
        deployment: emb-small
        capabilities: [embeddings]
  - slug: azv
    kind: azure
    base_url: {origin}
    resource: contoso
    api_version: 2024-10-21
    connections:
      - name: main
        api_key: {API_KEY}
    models:
      - id: gpt-4o
        deployment: prod-4o
      - id: emb
        capabilities: [embeddings]
  - slug: azr
    kind: azure
    wire: responses
    base_url: {origin}
    resource: contoso
    connections:
      - name: main
        api_key: {API_KEY}
    models:
      - id: resp-dep
  - slug: aze
    kind: azure
    base_url: {origin}
    resource: contoso
    authority_host: {origin}
    connections:
      - name: entra
        tenant_id: tenant-once
        client_id: app-1
        client_secret: {CLIENT_SECRET}
    models:
      - id: entra-dep
  - slug: azbad
    kind: azure
    base_url: {origin}
    resource: contoso
    connections:
      - name: main
        api_key: {WRONG_KEY}
    models:
      - id: bad-dep
  - slug: azfb
    kind: openai
    base_url: {mock.url}
    connections:
      - name: main
        api_key: sk-upstream-secret-azfb-1234567890
    models:
      - id: fb
""")
    assert result.returncode == 0, result.stderr
    return gateway


@pytest.fixture
def oai(azure):
    return openai.OpenAI(base_url=f"{azure.url}/v1", api_key=KEY_ALL, max_retries=0)


def _admin(gateway, method: str, path: str) -> httpx.Response:
    return httpx.request(
        method,
        f"{gateway.url}/api/{path}",
        headers={"Authorization": f"Bearer {gateway.admin_token}"},
        timeout=30,
    )


def _health(gateway, slug: str) -> dict:
    rows = _admin(gateway, "GET", "connections").json()
    return next(r for r in rows if r["provider"] == slug)["health"]


def _chat(gateway, **body) -> httpx.Response:
    return httpx.post(
        f"{gateway.url}/v1/chat/completions",
        headers={"Authorization": f"Bearer {KEY_ALL}"},
        json={"messages": [{"role": "user", "content": "hi"}], **body},
        timeout=30,
    )


# --- chat -----------------------------------------------------------------------------


def test_a_chat_goes_to_the_v1_api_with_the_deployment_as_model(oai, upstream):
    answer = oai.chat.completions.create(
        model="az/gpt-4o", messages=[{"role": "user", "content": "hello"}]
    )
    assert answer.choices[0].message.content == "Hello from mock prod-4o."
    assert answer.model == "az/gpt-4o"
    sent = upstream.requests()[-1]
    assert sent["path"] == "/openai/v1/chat/completions"
    assert sent["model"] == "prod-4o"
    assert sent["headers"]["api-key"] == API_KEY
    assert "authorization" not in sent["headers"]


def test_with_api_version_a_chat_goes_to_the_deployment_form(oai, upstream):
    answer = oai.chat.completions.create(
        model="azv/gpt-4o", messages=[{"role": "user", "content": "hello"}]
    )
    assert answer.choices[0].message.content == "Hello from mock prod-4o."
    sent = upstream.requests()[-1]
    assert sent["path"] == (
        "/openai/deployments/prod-4o/chat/completions?api-version=2024-10-21"
    )


def test_a_streamed_chat_reads_with_the_sdk(oai, upstream):
    stream = oai.chat.completions.create(
        model="azv/gpt-4o",
        messages=[{"role": "user", "content": "hi"}],
        stream=True,
        stream_options={"include_usage": True},
    )
    text, finish, usage = "", None, None
    for chunk in stream:
        if chunk.choices:
            text += chunk.choices[0].delta.content or ""
            finish = chunk.choices[0].finish_reason or finish
        usage = chunk.usage or usage
    assert text == "Hello from mock prod-4o."
    assert finish == "stop"
    assert usage is not None
    assert usage.completion_tokens == 4
    sent = upstream.requests()[-1]
    assert sent["stream"] is True
    assert sent["outcome"] == "completed"


def test_a_streamed_tool_call_round_trips(oai, upstream):
    upstream.add(
        "prod-4o", tool_calls=[{"name": "get_weather", "arguments": {"city": "Oslo"}}]
    )
    with oai.chat.completions.stream(
        model="az/gpt-4o",
        messages=[{"role": "user", "content": "weather?"}],
        tools=[WEATHER],
    ) as stream:
        final = stream.get_final_completion()
    choice = final.choices[0]
    call = choice.message.tool_calls[0]
    assert choice.finish_reason == "tool_calls"
    assert call.function.name == "get_weather"
    assert json.loads(call.function.arguments) == {"city": "Oslo"}
    assert upstream.requests()[-1]["body"]["tools"] == [WEATHER]


# --- the other surfaces ---------------------------------------------------------------


def test_a_responses_request_is_translated_to_azure_chat(oai, upstream):
    response = oai.responses.create(
        model="az/gpt-4o", input="hello", instructions="Be brief.", store=False
    )
    assert response.output_text == "Hello from mock prod-4o."
    sent = upstream.requests()[-1]
    assert sent["path"] == "/openai/v1/chat/completions"
    assert sent["body"]["messages"][0] == {"role": "system", "content": "Be brief."}


def test_a_responses_request_passes_through_on_the_responses_wire(oai, upstream):
    response = oai.responses.create(model="azr/resp-dep", input="hello", store=False)
    assert response.output_text == "Hello from mock resp-dep."
    with oai.responses.stream(model="azr/resp-dep", input="hi", store=False) as stream:
        final = stream.get_final_response()
    assert final.output_text == "Hello from mock resp-dep."
    sent = upstream.requests()[-1]
    assert sent["path"] == "/openai/v1/responses"
    assert sent["body"]["store"] is False
    chat = oai.chat.completions.create(
        model="azr/resp-dep", messages=[{"role": "user", "content": "hi"}]
    )
    assert chat.choices[0].message.content == "Hello from mock resp-dep."
    assert upstream.requests()[-1]["path"] == "/openai/v1/responses"


def test_a_messages_request_is_served_by_azure(azure, upstream):
    client = anthropic.Anthropic(base_url=azure.url, api_key=KEY_ALL, max_retries=0)
    message = client.messages.create(
        model="az/gpt-4o",
        max_tokens=64,
        system="Be brief.",
        messages=[{"role": "user", "content": "hello"}],
    )
    assert message.content[0].text == "Hello from mock prod-4o."
    assert message.stop_reason == "end_turn"
    upstream.add(
        "prod-4o", tool_calls=[{"name": "get_weather", "arguments": {"city": "Oslo"}}]
    )
    with client.messages.stream(
        model="azv/gpt-4o",
        max_tokens=64,
        messages=[{"role": "user", "content": "weather?"}],
        tools=[
            {"name": "get_weather", "input_schema": WEATHER["function"]["parameters"]}
        ],
    ) as stream:
        final = stream.get_final_message()
    block = next(b for b in final.content if b.type == "tool_use")
    assert (block.name, block.input) == ("get_weather", {"city": "Oslo"})
    assert final.stop_reason == "tool_use"
    assert upstream.requests()[-1]["path"].startswith(
        "/openai/deployments/prod-4o/chat/completions?api-version="
    )


def test_embeddings_take_both_forms(oai, upstream):
    answer = oai.embeddings.create(model="az/text-embedding-3-small", input=["a", "b"])
    assert [item.index for item in answer.data] == [0, 1]
    assert answer.model == "az/text-embedding-3-small"
    sent = upstream.requests()[-1]
    assert (sent["path"], sent["model"]) == ("/openai/v1/embeddings", "emb-small")
    oai.embeddings.create(model="azv/emb", input="a")
    assert upstream.requests()[-1]["path"] == (
        "/openai/deployments/emb/embeddings?api-version=2024-10-21"
    )


# --- credentials ----------------------------------------------------------------------


def test_an_entra_token_is_minted_once_and_reused(oai, upstream):
    for _ in range(3):
        answer = oai.chat.completions.create(
            model="aze/entra-dep", messages=[{"role": "user", "content": "hi"}]
        )
        assert answer.choices[0].message.content == "Hello from mock entra-dep."
    sent = upstream.requests()
    minted = [r for r in sent if r["path"].endswith("/oauth2/v2.0/token")]
    assert [r["path"] for r in minted] == ["/tenant-once/oauth2/v2.0/token"]
    calls = [r for r in sent if r["path"] == "/openai/v1/chat/completions"]
    tokens = {r["headers"]["authorization"] for r in calls}
    assert len(calls) == 3
    assert len(tokens) == 1
    scheme, token = tokens.pop().split(" ")
    assert scheme == "Bearer"
    assert token_valid(token)
    assert all("api-key" not in r["headers"] for r in calls)


def test_a_wrong_key_disables_the_connection(azure, upstream):
    first = _chat(azure, models=["azbad/bad-dep", "azfb/fb"])
    assert first.status_code == 200
    attempt = first.json()["omniroute"]["failover"]["attempts"][0]
    assert (attempt["reason"], attempt["detail"], attempt["http_status"]) == (
        "server_error",
        "auth_failed",
        401,
    )
    health = _health(azure, "azbad")
    assert health["auth_status"] == "auth_failed"
    assert health["auth_disabled_until"] is not None
    second = _chat(azure, models=["azbad/bad-dep", "azfb/fb"])
    skipped = second.json()["omniroute"]["failover"]["attempts"][0]
    assert (skipped["status"], skipped["reason"]) == ("skipped", "auth_disabled")
    assert WRONG_KEY not in first.text


# --- failures -------------------------------------------------------------------------


def test_a_429_cools_the_connection_honouring_retry_after(azure, upstream):
    upstream.add("prod-4o", status=429, headers={"Retry-After": "7"}, times=1)
    first = _chat(azure, model="az/gpt-4o")
    assert first.status_code == 429
    assert _health(azure, "az")["cooldown_until"] is not None
    again = _chat(azure, model="az/gpt-4o")
    assert again.status_code == 503
    assert again.json()["error"]["attempts"][0]["reason"] == "cooldown"
    assert len(upstream.requests()) == 1


def test_a_content_filter_refusal_is_not_failed_over(azure, upstream):
    upstream.add(
        "prod-4o",
        status=400,
        error_body={
            "error": {
                "message": "The response was filtered due to the prompt triggering "
                "Azure OpenAI's content management policy.",
                "type": None,
                "param": "prompt",
                "code": "content_filter",
                "status": 400,
                "innererror": {"code": "ResponsibleAIPolicyViolation"},
            }
        },
        times=1,
    )
    response = _chat(azure, models=["az/gpt-4o", "azfb/fb"])
    assert response.status_code == 400
    error = response.json()["error"]
    # spec 02 §10 rule 2 wraps the upstream's message; the dialect names the filter
    assert error["message"].startswith(
        "Upstream rejected the request: Azure content filter: The response was"
    )
    assert error["code"] == "upstream_invalid_request"
    assert [r["path"] for r in upstream.requests()] == ["/openai/v1/chat/completions"]
    assert _health(azure, "az")["cooldown_until"] is None


def test_a_missing_deployment_is_model_not_found_and_fails_over(azure, upstream):
    upstream.add(
        "prod-4o",
        status=404,
        error_body={
            "error": {
                "code": "DeploymentNotFound",
                "message": "The API deployment for this resource does not exist.",
            }
        },
        times=1,
    )
    response = _chat(azure, models=["azv/gpt-4o", "azfb/fb"])
    assert response.status_code == 200
    first = response.json()["omniroute"]["failover"]["attempts"][0]
    assert (first["reason"], first["detail"], first["http_status"]) == (
        "server_error",
        "model_not_found",
        404,
    )


# --- Test connection and discovery ----------------------------------------------------


def _connection_id(gateway, provider: str, name: str) -> int:
    listed = _admin(gateway, "GET", "connections").json()
    return next(
        c["id"] for c in listed if (c["provider"], c["name"]) == (provider, name)
    )


def test_test_connection_lists_the_deployments_with_each_credential(azure, upstream):
    good = _admin(
        azure, "POST", f"connections/{_connection_id(azure, 'az', 'main')}/test"
    )
    assert good.status_code == 200, good.text
    assert good.json()["ok"] is True
    sent = upstream.requests()[-1]
    assert sent["path"] == "/openai/deployments?api-version=2023-03-15-preview"
    assert sent["headers"]["api-key"] == API_KEY
    entra = _admin(
        azure, "POST", f"connections/{_connection_id(azure, 'aze', 'entra')}/test"
    )
    assert entra.json()["ok"] is True
    assert upstream.requests()[-1]["headers"]["authorization"].startswith("Bearer ")
    bad = _admin(
        azure, "POST", f"connections/{_connection_id(azure, 'azbad', 'main')}/test"
    )
    assert bad.json()["ok"] is False
    assert (bad.json()["http_status"], bad.json()["detail"]) == (401, "auth_failed")
    assert WRONG_KEY not in bad.text
    assert CLIENT_SECRET not in entra.text


def test_discovery_offers_the_deployments_not_configured(azure, upstream):
    upstream.add("new-deployment", content="x")  # the mock lists scripted models
    upstream.add("prod-4o", content="x")
    answer = _admin(azure, "POST", "providers/az/discover")
    assert answer.status_code == 200, answer.text
    ids = [m["id"] for m in answer.json()["models"]]
    assert "new-deployment" in ids
    assert "prod-4o" not in ids  # configured as gpt-4o's deployment
    assert API_KEY not in answer.text


def test_azures_prompt_filter_chunk_is_not_relayed(azure, upstream):
    response = httpx.post(
        f"{azure.url}/v1/chat/completions",
        headers={"Authorization": f"Bearer {KEY_ALL}"},
        json={
            "model": "az/gpt-4o",
            "messages": [{"role": "user", "content": "hi"}],
            "stream": True,
        },
        timeout=30,
    )
    chunks = [
        json.loads(line[len("data: ") :])
        for line in response.text.splitlines()
        if line.startswith("data: {")
    ]
    assert {c["object"] for c in chunks} == {"chat.completion.chunk"}
    assert "prompt_filter_results" not in response.text
    assert upstream.requests()[-1]["outcome"] == "completed"
