"""The Embeddings wire (spec 09 §5) through a real gateway process with the openai
SDK: vectors in input order, failover across connections of the same model, only
where the client listed another model, and the refusals of what would pick a model
on its own."""

from __future__ import annotations

import base64
import struct

import httpx
import openai
import pytest

from tests.integration.conftest import KEY_ALL

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def embedding_models(gateway, mock):
    result = gateway.apply(f"""
providers:
  - slug: pe
    kind: openai
    base_url: {mock.url}
    connections:
      - name: one
        api_key: sk-upstream-secret-pe-1111111111
        priority: 1
      - name: two
        api_key: sk-upstream-secret-pe-2222222222
        priority: 2
    models:
      - id: e1
        input_cost: 0.02
        capabilities: [embeddings]
      - id: e2
        capabilities: [embeddings]
      - id: chatty
        capabilities: [tools]
  - slug: pz
    kind: anthropic
    base_url: {mock.url}
    connections: [{{name: main, api_key: sk-ant-upstream-secret-pz-1234}}]
    models: [{{id: e1, capabilities: [embeddings]}}]
  - slug: pg
    kind: gemini
    base_url: {mock.url.rsplit("/v1", 1)[0]}
    connections: [{{name: main, api_key: gemini-upstream-secret-pg-1234}}]
    models: [{{id: gemb, capabilities: [embeddings]}}]
combos:
  - name: vectors
    strategy: priority
    targets: [{{model: pe/e1}}, {{model: pe/e2}}]
  - name: vector-fusion
    strategy: fusion
    targets: [{{model: pe/e1}}, {{model: pe/e2}}]
""")
    assert result.returncode == 0, result.stderr
    return gateway


@pytest.fixture
def oai(embedding_models):
    return openai.OpenAI(
        base_url=f"{embedding_models.url}/v1", api_key=KEY_ALL, max_retries=0
    )


def _post(gateway, body: dict) -> httpx.Response:
    return httpx.post(
        f"{gateway.url}/v1/embeddings",
        headers={"Authorization": f"Bearer {KEY_ALL}"},
        json=body,
        timeout=30,
    )


def test_vectors_come_back_in_input_order_with_the_report(
    embedding_models, oai, upstream
):
    raw = oai.embeddings.with_raw_response.create(model="pe/e1", input=["a", "b", "c"])
    answer = raw.parse()
    assert [item.index for item in answer.data] == [0, 1, 2]
    assert len({tuple(item.embedding) for item in answer.data}) == 3
    assert answer.model == "pe/e1"
    assert answer.usage.prompt_tokens > 0
    assert raw.http_response.headers["x-omniroute-served-model"] == "pe/e1"
    sent = upstream.requests()[-1]
    assert sent["path"].endswith("/embeddings")
    # the SDK asks for base64 by default and decodes it itself
    assert sent["body"] == {
        "model": "e1",
        "input": ["a", "b", "c"],
        "encoding_format": "base64",
    }
    row = embedding_models.requests_log()[-1]
    assert row["endpoint"] == "embeddings"
    assert row["served_model"] == "pe/e1"
    # billed at the input price alone (09 §5.1; e1 has no output price)
    expected = answer.usage.prompt_tokens * 0.02 / 1e6
    assert float(row["cost_usd"]) == pytest.approx(expected)


def test_base64_and_dimensions_pass_through(oai, upstream):
    answer = oai.embeddings.create(
        model="pe/e1", input="x", dimensions=4, encoding_format="base64"
    )
    # asked for explicitly, base64 reaches the caller as the upstream encoded it
    encoded = answer.data[0].embedding
    assert len(struct.unpack("<4f", base64.b64decode(encoded))) == 4
    sent = upstream.requests()[-1]["body"]
    assert sent["dimensions"] == 4
    assert sent["encoding_format"] == "base64"


def test_token_id_input_is_one_batch(oai, upstream):
    oai.embeddings.create(model="pe/e1", input=[[1, 2, 3], [4, 5]])
    assert len(upstream.requests()) == 1
    assert upstream.requests()[-1]["body"]["input"] == [[1, 2, 3], [4, 5]]


def test_a_500_fails_over_to_the_next_connection_of_the_same_model(oai, upstream):
    """Spec 09 §8 example 6, second half."""
    upstream.add("e1", status=500, times=1)
    answer = oai.embeddings.create(model="pe/e1", input="x")
    assert answer.model == "pe/e1"
    keys = [r["headers"]["authorization"][-4:] for r in upstream.requests()]
    assert keys == ["1111", "2222"]


def test_another_model_only_where_the_client_listed_it(oai, upstream):
    upstream.add("e1", status=500)
    with pytest.raises(openai.InternalServerError):
        oai.embeddings.create(model="pe/e1", input="x")
    assert {r["body"]["model"] for r in upstream.requests()} == {"e1"}
    upstream.reset()
    upstream.add("e1", status=500)
    answer = oai.embeddings.create(
        model="pe/e1", input="x", extra_body={"fallback_models": ["pe/e2"]}
    )
    assert answer.model == "pe/e2"
    upstream.reset()
    upstream.add("e1", status=500)
    assert oai.embeddings.create(model="vectors", input="x").model == "pe/e2"


def test_a_chat_model_and_a_dialect_without_embeddings_are_skipped(
    embedding_models, upstream
):
    response = _post(embedding_models, {"models": ["pe/chatty", "pz/e1"], "input": "x"})
    assert response.status_code == 400
    attempts = response.json()["error"]["attempts"]
    # one skip per connection of each
    assert [(a["model"], a["connection"], a["reason"]) for a in attempts] == [
        ("pe/chatty", "one", "capability_mismatch"),
        ("pe/chatty", "two", "capability_mismatch"),
        ("pz/e1", "main", "capability_mismatch"),
    ]
    assert upstream.requests() == []


def test_token_ids_skip_a_text_only_dialect(embedding_models, upstream):
    """Gemini embeds text only: token ids would be embedded as their JSON text,
    so its attempts skip (``capability_mismatch`` on ``input``) and the next
    model that takes them serves."""
    alone = _post(embedding_models, {"model": "pg/gemb", "input": [[1, 2, 3], [4]]})
    assert alone.status_code == 400
    error = alone.json()["error"]
    assert error["code"] == "capability_mismatch"
    assert error["param"] == "input"
    assert upstream.requests() == []
    served = _post(embedding_models, {"models": ["pg/gemb", "pe/e1"], "input": [7, 8]})
    assert served.status_code == 200, served.text
    assert served.json()["model"] == "pe/e1"
    assert [r["body"]["input"] for r in upstream.requests()] == [[7, 8]]
    text = _post(embedding_models, {"model": "pg/gemb", "input": ["seven", "eight"]})
    assert text.status_code == 200, text.text


@pytest.mark.parametrize("model", ["auto", "auto/coding", "vector-fusion"])
def test_what_would_pick_a_model_itself_is_refused(oai, upstream, model):
    """Spec 09 §8 example 6, first half."""
    with pytest.raises(openai.BadRequestError) as caught:
        oai.embeddings.create(model=model, input="x")
    assert caught.value.body["code"] == "unsupported_for_endpoint"
    assert caught.value.body["param"] == "model"
    assert upstream.requests() == []


@pytest.mark.parametrize(
    ("body", "code", "param"),
    [
        ({"model": "pe/e1"}, "missing_parameter", "input"),
        ({"model": "pe/e1", "input": ""}, "invalid_value", "input"),
        ({"model": "pe/e1", "input": [1.5]}, "invalid_type", "input[0]"),
        ({"model": "pe/e1", "input": ["x"] * 2049}, "invalid_value", "input"),
        (
            {"model": "pe/e1", "input": "x", "encoding_format": "hex"},
            "invalid_value",
            "encoding_format",
        ),
        (
            {"model": "pe/e1", "input": "x", "dimensions": 0},
            "invalid_value",
            "dimensions",
        ),
        ({"input": "x"}, "missing_parameter", "model"),
    ],
)
def test_bad_requests_name_the_field(embedding_models, upstream, body, code, param):
    response = _post(embedding_models, body)
    assert response.status_code == 400
    error = response.json()["error"]
    assert (error["code"], error["param"]) == (code, param)


def test_the_vector_decodes_as_the_upstream_sent_it(embedding_models, upstream):
    response = _post(
        embedding_models, {"model": "pe/e1", "input": "x", "encoding_format": "base64"}
    )
    encoded = response.json()["data"][0]["embedding"]
    assert len(struct.unpack("<8f", base64.b64decode(encoded))) == 8
