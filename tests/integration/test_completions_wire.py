"""The legacy Completions wire (spec 09 §6) through a real gateway process with the
openai SDK: passthrough to an OpenAI-kind upstream's ``/completions``, translation to
an Anthropic-kind one (what it cannot carry named in ``X-OmniRoute-Dropped``),
streams, several prompts, failover and errors."""

from __future__ import annotations

import json

import httpx
import openai
import pytest

from tests.integration.conftest import KEY_ALL

pytestmark = pytest.mark.integration


@pytest.fixture
def oai(gateway):
    return openai.OpenAI(base_url=f"{gateway.url}/v1", api_key=KEY_ALL, max_retries=0)


def _post(gateway, body: dict, **headers: str) -> httpx.Response:
    return httpx.post(
        f"{gateway.url}/v1/completions",
        headers={"Authorization": f"Bearer {KEY_ALL}", **headers},
        json=body,
        timeout=30,
    )


def test_an_openai_upstream_gets_the_body_as_sent(oai, upstream, gateway):
    raw = oai.completions.with_raw_response.create(
        model="pa/m1", prompt="Say hi", max_tokens=20, echo=True, suffix="!"
    )
    answer = raw.parse()
    assert answer.object == "text_completion"
    assert answer.choices[0].text == "Hello from mock m1."
    assert answer.model == "pa/m1"
    assert "x-omniroute-dropped" not in raw.http_response.headers
    sent = upstream.requests()[-1]
    assert sent["path"].endswith("/completions")
    assert not sent["path"].endswith("/chat/completions")
    assert sent["body"] == {
        "model": "m1",
        "prompt": "Say hi",
        "max_tokens": 20,
        "echo": True,
        "suffix": "!",
    }
    body = json.loads(raw.http_response.text)
    assert body["omniroute"]["served_model"] == "pa/m1"
    row = gateway.requests_log()[-1]
    assert row["endpoint"] == "completions"
    assert gateway.attempts_log(row["id"])[-1]["passthrough"] == 1


def test_an_anthropic_upstream_gets_a_translated_call(oai, upstream):
    raw = oai.completions.with_raw_response.create(
        model="pc/m3", prompt="Say hi", max_tokens=20, suffix="!", logprobs=2
    )
    answer = raw.parse()
    assert answer.choices[0].text == "Hello from mock m3."
    assert answer.choices[0].finish_reason == "stop"
    assert answer.id.startswith("cmpl-")
    assert raw.http_response.headers["x-omniroute-dropped"] == "suffix,logprobs"
    sent = upstream.requests()[-1]
    assert sent["path"].endswith("/messages")
    assert sent["body"]["messages"] == [
        {"role": "user", "content": [{"type": "text", "text": "Say hi"}]}
    ]
    assert sent["body"]["max_tokens"] == 20


@pytest.mark.parametrize("model", ["pa/m1", "pc/m3"])
def test_a_stream_is_text_completion_chunks_then_done(oai, upstream, model):
    stream = oai.completions.create(model=model, prompt="hi", stream=True)
    chunks = list(stream)
    text = "".join(c.choices[0].text for c in chunks if c.choices)
    assert text == f"Hello from mock {model[3:]}."
    assert all(c.object == "text_completion" for c in chunks)
    # a naive client indexes choices[0] on every chunk (09 §7)
    assert all(c.choices for c in chunks)


def test_the_report_rides_on_the_finish_chunk(gateway, upstream):
    response = _post(gateway, {"model": "pc/m3", "prompt": "hi", "stream": True})
    frames = [
        line[6:] for line in response.text.splitlines() if line.startswith("data: ")
    ]
    assert frames[-1] == "[DONE]"
    last = json.loads(frames[-2])
    assert last["choices"][0]["finish_reason"] == "stop"
    assert last["omniroute"]["served_model"] == "pc/m3"


def test_several_prompts_go_only_where_a_passthrough_carries_them(gateway, upstream):
    answer = _post(gateway, {"models": ["pc/m3", "pa/m1"], "prompt": ["a", "b"]}).json()
    assert [c["index"] for c in answer["choices"]] == [0, 1]
    assert answer["model"] == "pa/m1"
    skipped = answer["omniroute"]["failover"]["attempts"][0]
    assert (skipped["model"], skipped["reason"]) == ("pc/m3", "capability_mismatch")
    assert len(upstream.requests()) == 1


def test_failover_before_an_answer(oai, upstream):
    upstream.add("m1", status=500, times=1)
    answer = oai.completions.create(
        model="pa/m1", prompt="hi", extra_body={"fallback_models": ["pc/m3"]}
    )
    assert answer.model == "pc/m3"
    assert answer.choices[0].text == "Hello from mock m3."


def test_strict_refuses_what_translation_would_drop(gateway, upstream):
    response = _post(
        gateway,
        {"model": "pc/m3", "prompt": "hi", "echo": True},
        **{"X-OmniRoute-Strict": "true"},
    )
    assert response.status_code == 400
    error = response.json()["error"]
    assert (error["code"], error["param"]) == ("unsupported_parameter", "echo")
    assert upstream.requests() == []
    carried = _post(
        gateway,
        {"model": "pa/m1", "prompt": "hi", "echo": True},
        **{"X-OmniRoute-Strict": "true"},
    )
    assert carried.status_code == 200


@pytest.mark.parametrize(
    ("body", "code", "param"),
    [
        ({"model": "pa/m1"}, "missing_parameter", "prompt"),
        ({"model": "pa/m1", "prompt": 3}, "invalid_type", "prompt"),
        ({"model": "pa/m1", "prompt": ["a", 1]}, "invalid_type", "prompt[1]"),
        ({"model": "pa/m1", "prompt": "x", "logprobs": 9}, "invalid_value", "logprobs"),
        ({"model": "pa/m1", "prompt": "x", "echo": "yes"}, "invalid_type", "echo"),
        (
            {"model": "pa/m1", "prompt": "x", "temperature": 5},
            "invalid_value",
            "temperature",
        ),
        ({"prompt": "x"}, "missing_parameter", "model"),
    ],
)
def test_bad_requests_name_the_field(gateway, upstream, body, code, param):
    response = _post(gateway, body)
    assert response.status_code == 400
    error = response.json()["error"]
    assert (error["code"], error["param"]) == (code, param)
