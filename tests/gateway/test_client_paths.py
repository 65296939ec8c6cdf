"""A path a translated attempt leaves out is named in the client's own terms
(spec 09 §2.6): the Messages and Responses wires map their canonical chat bodies
back to where the client sent each field and each media part."""

from __future__ import annotations

import json

from gateway.dialects import REGISTRY, unsent
from gateway.inbound.messages import parse_messages_request
from gateway.inbound.responses import Exchange, parse_responses_request

IMAGE_URL = "https://example.com/cat.png"


def _messages(body: dict):
    return parse_messages_request(json.dumps(body).encode(), {})


def _responses(body: dict):
    return parse_responses_request(
        json.dumps(body).encode(), Exchange(response_id="resp_1")
    )


def _named(request, kind: str = "bedrock") -> list[str]:
    return [request.client_path(p) for p in unsent(REGISTRY[kind], request.body)]


def test_a_messages_image_is_named_at_its_block():
    request = _messages(
        {
            "model": "m",
            "max_tokens": 64,
            "system": "Be brief.",
            "messages": [
                {
                    "role": "user",
                    "content": [
                        {"type": "tool_result", "tool_use_id": "t1", "content": "ok"},
                        {"type": "text", "text": "and this?"},
                        {"type": "image", "source": {"type": "url", "url": IMAGE_URL}},
                    ],
                }
            ],
        }
    )
    # canonically the system, the tool result and the user turn are three messages
    assert [m["role"] for m in request.body["messages"]] == ["system", "tool", "user"]
    assert unsent(REGISTRY["bedrock"], request.body) == ("messages[2].content[1]",)
    assert _named(request) == ["messages[0].content[2]"]


def test_a_messages_document_and_its_fields_are_named_as_sent():
    # Converse takes PDFs (a ``document`` block), not RTF
    pdf = {"type": "base64", "media_type": "application/rtf", "data": "e1xydGY="}
    request = _messages(
        {
            "model": "m",
            "max_tokens": 64,
            "messages": [
                {"role": "user", "content": "first"},
                {"role": "assistant", "content": "ok"},
                {
                    "role": "user",
                    "content": [
                        {"type": "document", "source": pdf},
                        {"type": "text", "text": "summarise"},
                    ],
                },
            ],
            "tools": [{"name": "f", "input_schema": {"type": "object"}}],
            "tool_choice": {"type": "auto", "disable_parallel_tool_use": True},
            "stop_sequences": [f"s{i}" for i in range(6)],
        }
    )
    assert _named(request) == [
        "tool_choice.disable_parallel_tool_use",
        "messages[2].content[0]",
    ]
    assert _named(request, "gemini") == [
        "tool_choice.disable_parallel_tool_use",
        "stop_sequences[5]",
    ]


def test_a_responses_image_is_named_at_its_input_part():
    request = _responses(
        {
            "model": "m",
            "instructions": "Be brief.",
            "input": [
                {"role": "user", "content": "hello"},
                {
                    "role": "user",
                    "content": [
                        {"type": "input_text", "text": "what is it?"},
                        {"type": "input_image", "image_url": IMAGE_URL},
                    ],
                },
            ],
            "text": {"format": {"type": "json_object"}},
        }
    )
    assert _named(request) == ["text.format", "input[1].content[1]"]


def test_a_text_only_request_keeps_the_wires_names_only():
    from gateway.inbound.messages import NAMES

    request = _messages(
        {"model": "m", "max_tokens": 8, "messages": [{"role": "user", "content": "x"}]}
    )
    assert request.renamed is NAMES
