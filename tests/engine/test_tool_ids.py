"""Tool-call ids another upstream made, sent to a dialect with id rules (#14):
Gemini's signed ids are too long for OpenAI and Bedrock, other hosts' ids hold
characters Bedrock and Anthropic refuse.  Pure: translation only."""

from __future__ import annotations

import base64
import copy
import re

import pytest

from gateway.dialects import REGISTRY, WIRES
from gateway.dialects.gemini import call_id
from gateway.dialects.tool_ids import (
    BEDROCK_IDS,
    OPENAI_IDS,
    fit_body,
    fit_id,
)

SIGNATURE = base64.b64encode(bytes(range(256)) * 2).decode()
#: what a Gemini reply's call id looks like with its thought signature (~700 chars)
SIGNED = call_id(0, SIGNATURE, tag="r1abc")
DOTTED = "functions.get_weather:0"
PLAIN = re.compile(r"call_[0-9a-f]{32}")


def _conversation(ident: str) -> dict:
    return {
        "messages": [
            {"role": "user", "content": "weather?"},
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": ident,
                        "type": "function",
                        "function": {"name": "get_weather", "arguments": "{}"},
                    },
                    {
                        "id": "call_short",
                        "type": "function",
                        "function": {"name": "get_time", "arguments": "{}"},
                    },
                ],
            },
            {"role": "tool", "tool_call_id": ident, "content": "sunny"},
            {"role": "tool", "tool_call_id": "call_short", "content": "noon"},
        ]
    }


def _build(kind: str, body: dict, wire: str = "chat"):
    return WIRES[(kind, wire)].build_request(
        base_url="https://upstream.test/v1",
        api_key="k",
        model="m",
        body=body,
        stream=False,
        auth=None,
    )


def test_a_signed_gemini_id_is_far_over_openai_s_limit():
    assert len(SIGNED) > 600
    assert not OPENAI_IDS.fits(SIGNED)


def test_an_id_that_breaks_a_rule_becomes_a_short_digest_and_one_that_fits_stays():
    fitted = fit_id(SIGNED, OPENAI_IDS)
    assert PLAIN.fullmatch(fitted)
    assert fit_id(SIGNED, OPENAI_IDS) == fitted  # deterministic
    assert fit_id(SIGNED + "x", OPENAI_IDS) != fitted
    assert fit_id("call_short", OPENAI_IDS) == "call_short"
    assert fit_id(DOTTED, OPENAI_IDS) == DOTTED  # OpenAI takes any character
    assert PLAIN.fullmatch(fit_id(DOTTED, BEDROCK_IDS))


def test_the_canonical_body_is_never_changed():
    body = _conversation(SIGNED)
    before = copy.deepcopy(body)
    assert fit_body(body, OPENAI_IDS) is not body
    assert body == before
    plain = _conversation("call_1")
    assert fit_body(plain, OPENAI_IDS) is plain


@pytest.mark.parametrize("kind", ["openai", "azure", "mock"])
def test_openai_wires_get_the_call_and_its_result_under_one_short_id(kind):
    sent = _build(kind, _conversation(SIGNED)).body["messages"]
    call_ids = [c["id"] for c in sent[1]["tool_calls"]]
    assert PLAIN.fullmatch(call_ids[0])
    assert call_ids[1] == "call_short"
    assert [m["tool_call_id"] for m in sent[2:]] == call_ids


def test_the_responses_wire_gets_one_short_call_id_per_call():
    sent = _build("openai", _conversation(SIGNED), wire="responses").body["input"]
    ids = [item["call_id"] for item in sent if "call_id" in item]
    assert len(ids) == 4
    assert ids[0] == ids[2]
    assert PLAIN.fullmatch(ids[0])
    assert ids[1] == ids[3] == "call_short"


@pytest.mark.parametrize("ident", [SIGNED, DOTTED])
def test_bedrock_gets_tool_use_ids_its_pattern_takes(ident):
    sent = _build("bedrock", _conversation(ident)).body["messages"]
    uses = [b["toolUse"]["toolUseId"] for b in sent[1]["content"]]
    results = [b["toolResult"]["toolUseId"] for b in sent[2]["content"]]
    assert uses == results
    assert all(re.fullmatch(r"[a-zA-Z0-9_-]{1,64}", u) for u in uses)
    assert uses[1] == "call_short"


@pytest.mark.parametrize("ident", [SIGNED, DOTTED])
def test_anthropic_gets_tool_use_ids_its_pattern_takes(ident):
    sent = _build("anthropic", _conversation(ident)).body["messages"]
    uses = [b["id"] for b in sent[1]["content"] if b["type"] == "tool_use"]
    results = [b["tool_use_id"] for b in sent[2]["content"]]
    assert uses == results
    assert all(re.fullmatch(r"[a-zA-Z0-9_-]{1,64}", u) for u in uses)


def test_gemini_still_reads_its_signature_from_the_canonical_id():
    sent = (
        REGISTRY["gemini"]
        .build_request(
            base_url="https://upstream.test",
            api_key="k",
            model="gemini-2.5-pro",
            body=_conversation(SIGNED),
            stream=False,
        )
        .body
    )
    parts = sent["contents"][1]["parts"]
    assert parts[0]["thoughtSignature"] == SIGNATURE
    assert "thoughtSignature" not in parts[1]
