"""The embeddings reply's shaping (spec 09 §5.1): base64 vectors when asked, and a
usage even where the upstream reports none (#14, D3 and D4).  Pure: no server."""

from __future__ import annotations

import base64
import json
import struct

import pytest

from gateway.inbound.embeddings import as_base64, ordered, parse_embeddings_request
from gateway.pipeline.accounting import estimate_prompt_tokens


def _request(**fields):
    body = {"model": "m", "input": ["a cat", "a dog"], **fields}
    return parse_embeddings_request(json.dumps(body).encode())


def _reply(usage=None):
    data = [
        {"object": "embedding", "index": 1, "embedding": [0.5, -2.0]},
        {"object": "embedding", "index": 0, "embedding": [1.0, 0.25]},
    ]
    reply = {"object": "list", "data": data}
    if usage is not None:
        reply["usage"] = usage
    return reply


def test_a_float_vector_is_base64_of_little_endian_float32():
    encoded = as_base64([1.0, -0.5, 3])
    assert struct.unpack("<3f", base64.b64decode(encoded)) == (1.0, -0.5, 3.0)


def test_floats_are_encoded_when_the_client_asked_base64():
    answer = ordered(_reply(), _request(encoding_format="base64"))
    assert [item["index"] for item in answer["data"]] == [0, 1]
    vectors = [
        struct.unpack("<2f", base64.b64decode(item["embedding"]))
        for item in answer["data"]
    ]
    assert vectors == [(1.0, 0.25), (0.5, -2.0)]


@pytest.mark.parametrize("fields", [{}, {"encoding_format": "float"}])
def test_floats_stay_floats_otherwise(fields):
    answer = ordered(_reply(), _request(**fields))
    assert answer["data"][0]["embedding"] == [1.0, 0.25]


def test_an_upstream_base64_vector_is_left_as_it_came():
    reply = {"data": [{"index": 0, "embedding": "AACAPw=="}]}
    answer = ordered(reply, _request(encoding_format="base64"))
    assert answer["data"][0]["embedding"] == "AACAPw=="


def test_a_missing_usage_is_the_estimate_the_log_uses():
    request = _request()
    estimate = estimate_prompt_tokens(request.body)
    assert estimate > 0
    assert ordered(_reply(), request)["usage"] == {
        "prompt_tokens": estimate,
        "total_tokens": estimate,
    }


def test_an_upstream_usage_is_kept():
    answer = ordered(_reply({"prompt_tokens": 7}), _request())
    assert answer["usage"] == {"prompt_tokens": 7, "total_tokens": 7}


def test_the_list_has_no_id_as_openai_s_embeddings_reply_has_none():
    reply = {**_reply({"prompt_tokens": 3}), "id": "chatcmpl-0123"}
    answer = ordered(reply, _request())
    assert set(answer) == {"object", "data", "usage"}
