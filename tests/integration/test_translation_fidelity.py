"""What a translation carries and names (spec 09 §2.6, §4.2, §3.4), through a real
gateway process: reasoning settings go to models that reason and are named where
they cannot go, ``cache_control`` never reaches an OpenAI upstream, unknown
Messages fields are named, a stop sequence is Anthropic's ``stop_sequence``, stored
passthrough responses carry the gateway's own id, and type errors say so."""

from __future__ import annotations

import anthropic
import httpx
import openai
import pytest

from tests.integration.conftest import KEY_ALL

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def reasoning_models(gateway, mock):
    result = gateway.apply(f"""
providers:
  - slug: px
    kind: openai
    base_url: {mock.url}
    connections: [{{name: main, api_key: sk-upstream-secret-px-1234567890}}]
    models:
      - {{id: thinker, capabilities: [reasoning]}}
      - {{id: plain, capabilities: [tools]}}
  - slug: pt
    kind: anthropic
    base_url: {mock.url}
    connections: [{{name: main, api_key: sk-ant-upstream-secret-pt-123456}}]
    models: [{{id: claude-think, capabilities: [reasoning, tools]}}]
  - slug: pq
    kind: openai
    wire: responses
    base_url: {mock.url}
    connections: [{{name: main, api_key: sk-upstream-secret-pq-1234567890}}]
    models: [{{id: rq}}]
""")
    assert result.returncode == 0, result.stderr
    return gateway


def _post(gateway, path: str, body: dict, **headers: str) -> httpx.Response:
    return httpx.post(
        f"{gateway.url}{path}",
        headers={"Authorization": f"Bearer {KEY_ALL}", **headers},
        json=body,
        timeout=30,
    )


def _messages(model: str, **extra) -> dict:
    return {
        "model": model,
        "max_tokens": 64,
        "messages": [{"role": "user", "content": "hi"}],
        **extra,
    }


THINKING = {"type": "enabled", "budget_tokens": 2048}


def test_thinking_reaches_a_reasoning_model_as_its_effort(reasoning_models, upstream):
    response = _post(
        reasoning_models, "/v1/messages", _messages("px/thinker", thinking=THINKING)
    )
    assert response.status_code == 200
    assert "x-omniroute-dropped" not in response.headers
    assert upstream.requests()[-1]["body"]["reasoning_effort"] == "low"


def test_thinking_to_a_model_without_reasoning_is_left_out_and_named(
    reasoning_models, upstream
):
    for model in ("px/plain", "pa/m1"):  # known to lack it, and unknown
        response = _post(
            reasoning_models, "/v1/messages", _messages(model, thinking=THINKING)
        )
        assert response.headers["x-omniroute-dropped"] == "thinking"
        assert "reasoning_effort" not in upstream.requests()[-1]["body"]
    refused = _post(
        reasoning_models,
        "/v1/messages",
        _messages("px/plain", thinking=THINKING),
        **{"X-OmniRoute-Strict": "true"},
    )
    assert refused.status_code == 400
    assert refused.json()["error"]["param"] == "thinking"


def test_a_failover_names_what_the_serving_attempt_left_out(reasoning_models, upstream):
    upstream.add("thinker", status=500, times=1)
    response = _post(
        reasoning_models,
        "/v1/messages",
        _messages("px/thinker", thinking=THINKING, fallback_models=["px/plain"]),
    )
    assert response.status_code == 200
    assert response.json()["model"] == "px/plain"
    assert response.headers["x-omniroute-dropped"] == "thinking"
    bodies = [r["body"] for r in upstream.requests()]
    assert bodies[0]["reasoning_effort"] == "low"
    assert "reasoning_effort" not in bodies[1]
    row = reasoning_models.requests_log()[-1]
    attempts = reasoning_models.attempts_log(row["id"])
    assert [a["dropped"] for a in attempts] == ["[]", '["thinking"]']


def test_reasoning_effort_becomes_thinking_for_an_anthropic_model_that_reasons(
    reasoning_models, upstream
):
    response = _post(
        reasoning_models,
        "/v1/chat/completions",
        {
            "model": "pt/claude-think",
            "messages": [{"role": "user", "content": "hi"}],
            "reasoning_effort": "high",
            "max_tokens": 24000,
            "temperature": 0.3,
        },
    )
    assert response.status_code == 200
    sent = upstream.requests()[-1]["body"]
    assert sent["thinking"] == {"type": "enabled", "budget_tokens": 16384}
    assert "temperature" not in sent  # thinking refuses it: left out and named
    assert response.headers["x-omniroute-dropped"] == "temperature"


def test_reasoning_effort_is_named_where_it_cannot_go(reasoning_models, upstream):
    anthropic_kind = _post(
        reasoning_models,
        "/v1/chat/completions",
        {
            "model": "pc/m3",
            "messages": [{"role": "user", "content": "hi"}],
            "reasoning_effort": "high",
        },
    )
    assert anthropic_kind.headers["x-omniroute-dropped"] == "reasoning_effort"
    assert "thinking" not in upstream.requests()[-1]["body"]
    own_wire = _post(
        reasoning_models,
        "/v1/chat/completions",
        {
            "model": "pa/m1",
            "messages": [{"role": "user", "content": "hi"}],
            "reasoning_effort": "high",
        },
    )
    # the client's own field on its own wire, to a model of unknown capabilities
    assert "x-omniroute-dropped" not in own_wire.headers
    assert upstream.requests()[-1]["body"]["reasoning_effort"] == "high"
    responses = _post(
        reasoning_models,
        "/v1/responses",
        {"model": "pa/m1", "input": "hi", "reasoning": {"effort": "high"}},
    )
    assert responses.headers["x-omniroute-dropped"] == "reasoning.effort"
    assert "reasoning_effort" not in upstream.requests()[-1]["body"]


def test_chat_fields_a_translated_wire_has_no_counterpart_for_are_named(
    reasoning_models, upstream
):
    """Spec 09 §2.6 for every translated dialect, not only Bedrock's images: the
    Responses wire has no stop sequences, seed or penalties, Anthropic's no JSON
    mode; the Chat Completions wire carries them all; a value that asks for nothing
    is not named."""
    asked = {
        "messages": [{"role": "user", "content": "hi"}],
        "seed": 5,
        "stop": ["END"],
        "presence_penalty": 0.5,
        "frequency_penalty": 0,
        "n": 1,
    }
    responses_wire = _post(
        reasoning_models, "/v1/chat/completions", {"model": "pq/rq", **asked}
    )
    assert responses_wire.status_code == 200, responses_wire.text
    assert responses_wire.headers["x-omniroute-dropped"] == (
        "seed,stop,presence_penalty"
    )
    sent = upstream.requests()[-1]
    assert sent["path"].endswith("/responses")
    assert not {"seed", "stop", "presence_penalty"} & set(sent["body"])
    chat_wire = _post(
        reasoning_models, "/v1/chat/completions", {"model": "px/plain", **asked}
    )
    assert "x-omniroute-dropped" not in chat_wire.headers
    assert upstream.requests()[-1]["body"]["seed"] == 5
    json_mode = _post(
        reasoning_models,
        "/v1/responses",
        {
            "model": "pc/m3",
            "input": "hi",
            "store": False,
            "text": {"format": {"type": "json_object"}},
        },
    )
    assert json_mode.status_code == 200, json_mode.text
    assert json_mode.headers["x-omniroute-dropped"] == "text.format"
    assert "json" not in str(upstream.requests()[-1]["body"])


def test_cache_control_never_reaches_an_openai_upstream(reasoning_models, upstream):
    marker = {"type": "ephemeral"}
    body = _messages(
        "pa/m1",
        system=[{"type": "text", "text": "S", "cache_control": marker}],
        messages=[
            {
                "role": "user",
                "content": [{"type": "text", "text": "x", "cache_control": marker}],
            }
        ],
    )
    response = _post(reasoning_models, "/v1/messages", body)
    assert response.headers["x-omniroute-dropped"] == (
        "messages[0].content[0].cache_control,system[0].cache_control"
    )
    assert "cache_control" not in str(upstream.requests()[-1]["body"])
    strict = _post(
        reasoning_models, "/v1/messages", body, **{"X-OmniRoute-Strict": "true"}
    )
    assert strict.status_code == 400
    upstream.reset()
    kept = _post(reasoning_models, "/v1/messages", {**body, "model": "pc/m3"})
    assert "x-omniroute-dropped" not in kept.headers
    assert upstream.requests()[-1]["body"]["system"][0]["cache_control"] == marker


def test_unknown_messages_fields_are_named(reasoning_models, upstream):
    response = _post(reasoning_models, "/v1/messages", _messages("pa/m1", frob=1))
    assert response.headers["x-omniroute-dropped"] == "frob"
    assert "frob" not in upstream.requests()[-1]["body"]
    passthrough = _post(reasoning_models, "/v1/messages", _messages("pc/m3", frob=1))
    assert upstream.requests()[-1]["body"]["frob"] == 1
    assert "x-omniroute-dropped" not in passthrough.headers


@pytest.mark.parametrize("stream", [False, True])
def test_a_stop_sequence_is_reported_as_anthropic_reports_it(
    reasoning_models, upstream, stream
):
    upstream.add("m1", content="hello END")
    client = anthropic.Anthropic(
        base_url=reasoning_models.url, api_key=KEY_ALL, max_retries=0
    )
    kwargs = {
        "model": "pa/m1",
        "max_tokens": 64,
        "stop_sequences": ["END"],
        "messages": [{"role": "user", "content": "hi"}],
    }
    if stream:
        with client.messages.stream(**kwargs) as events:
            message = events.get_final_message()
    else:
        message = client.messages.create(**kwargs)
    assert (message.stop_reason, message.stop_sequence) == ("stop_sequence", "END")


def test_a_stored_passthrough_response_has_the_gateways_own_id(
    reasoning_models, upstream
):
    client = openai.OpenAI(
        base_url=f"{reasoning_models.url}/v1", api_key=KEY_ALL, max_retries=0
    )
    first = client.responses.create(model="pq/rq", input="one")
    assert not first.id.startswith("resp_mock_")
    assert client.responses.retrieve(first.id).output_text == first.output_text
    second = client.responses.create(
        model="pq/rq", input="two", previous_response_id=first.id
    )
    assert second.id != first.id
    with client.responses.stream(model="pq/rq", input="three") as events:
        final = events.get_final_response()
    assert not final.id.startswith("resp_mock_")
    assert client.responses.retrieve(final.id).id == final.id


@pytest.mark.parametrize(
    ("path", "body", "param"),
    [
        ("/v1/messages", _messages("pa/m1", max_tokens="10"), "max_tokens"),
        (
            "/v1/responses",
            {"model": "pa/m1", "input": "x", "max_output_tokens": "9"},
            "max_output_tokens",
        ),
        (
            "/v1/embeddings",
            {"model": "pa/m1", "input": "x", "dimensions": "4"},
            "dimensions",
        ),
    ],
)
def test_a_wrong_type_is_invalid_type(reasoning_models, upstream, path, body, param):
    response = _post(reasoning_models, path, body)
    assert response.status_code == 400
    error = response.json()["error"]
    assert (error["code"], error["param"]) == ("invalid_type", param)


def test_a_message_of_unreadable_blocks_names_the_block(reasoning_models, upstream):
    response = _post(
        reasoning_models,
        "/v1/messages",
        _messages("pa/m1", messages=[{"role": "user", "content": [{"type": "bogus"}]}]),
    )
    assert response.status_code == 400
    assert response.json()["error"]["param"] == "messages[0].content[0]"


def test_an_unknown_model_in_the_anthropic_shape_is_an_anthropic_error(
    reasoning_models,
):
    response = httpx.get(
        f"{reasoning_models.url}/v1/models/nope",
        headers={"x-api-key": KEY_ALL, "anthropic-version": "2023-06-01"},
        timeout=10,
    )
    assert response.status_code == 404
    body = response.json()
    assert body["type"] == "error"
    assert body["error"]["type"] == "not_found_error"
