"""What each translated dialect carries of a canonical chat body, and what it names
(spec 09 §2.6): ``gateway.dialects.carry`` and every dialect's declaration.

Each declaration is held to its translation: a field a dialect names is absent from
the upstream body it builds, a field it carries is present in it.
"""

from __future__ import annotations

import json
from types import MappingProxyType
from typing import Any

import pytest

from gateway.dialects import (
    REGISTRY,
    WIRES,
    carry_of,
    dialect_for,
    odd_elements,
    unsent,
)
from gateway.dialects.bedrock import parse_embed_reply
from gateway.dialects.carry import Odd
from gateway.kernel.exchange import ChatRequest, Redundancy
from gateway.kernel.types import Auth

HELLO = [{"role": "user", "content": "hello"}]
VERTEX_AUTH = Auth(
    kind="vertex",
    settings=MappingProxyType({"project": "p", "region": "us-central1"}),
    token="t",
)
BEDROCK_AUTH = Auth(
    kind="bedrock",
    secrets=MappingProxyType(
        {"aws_access_key_id": "AKIAX", "aws_secret_access_key": "secret"}
    ),
    settings=MappingProxyType({"region": "us-east-1"}),
)
#: (kind, wire) of every dialect that translates the canonical body
TRANSLATED = (
    ("anthropic", "chat"),
    ("gemini", "chat"),
    ("vertex", "chat"),
    ("vertex", "messages"),
    ("bedrock", "chat"),
    ("openai", "responses"),
    ("azure", "responses"),
)
#: fields set to the value that asks for nothing
DEFAULTS: dict[str, Any] = {
    "n": 1,
    "logprobs": False,
    "top_logprobs": 0,
    "response_format": {"type": "text"},
    "presence_penalty": 0,
    "frequency_penalty": 0.0,
    "logit_bias": {},
    "functions": [],
    "modalities": ["text"],
    "verbosity": "medium",
    "parallel_tool_calls": True,
    "reasoning_effort": "none",
    "tool_choice": "auto",
    "user": "u-1",
    "metadata": {"a": "b"},
    "store": True,
    "service_tier": "flex",
    "prompt_cache_key": "k",
}
#: a value of each field that asks for something, distinctive enough to be found in
#: an upstream body that carries it
ASKED: dict[str, Any] = {
    "n": 3,
    "seed": 987_654_321,
    "presence_penalty": 0.625,
    "frequency_penalty": 0.375,
    "logprobs": True,
    "top_logprobs": 17,
    "logit_bias": {"50256": -100},
    "response_format": {"type": "json_object"},
    "functions": [{"name": "legacy_fn", "parameters": {"type": "object"}}],
    "web_search_options": {"search_context_size": "low"},
    "audio": {"voice": "alloy", "format": "wav"},
    "modalities": ["text", "audio"],
    "verbosity": "low",
}
#: what each translated dialect names of ``ASKED`` (the rest it translates)
NAMED = {
    ("anthropic", "chat"): set(ASKED),
    ("vertex", "messages"): set(ASKED),
    ("bedrock", "chat"): set(ASKED),
    ("gemini", "chat"): set(ASKED)
    - {"n", "seed", "presence_penalty", "frequency_penalty", "response_format"},
    ("vertex", "chat"): set(ASKED)
    - {"n", "seed", "presence_penalty", "frequency_penalty", "response_format"},
    ("openai", "responses"): set(ASKED) - {"response_format"},
    ("azure", "responses"): set(ASKED) - {"response_format"},
}


def _marker(value: Any) -> str:
    """What of ``value`` a body that carried it would hold."""
    text = json.dumps(value)
    return text[1:-1] if isinstance(value, dict | list) else f": {text}"


def _upstream(kind: str, wire: str, body: dict) -> dict:
    dialect = dialect_for(kind, wire)
    auth = {"vertex": VERTEX_AUTH, "bedrock": BEDROCK_AUTH}.get(kind)
    call = dialect.build_request(
        base_url="https://upstream.example" if kind != "azure" else "https://r.example",
        api_key="k",
        model="m",
        body=body,
        stream=False,
        auth=auth,
    )
    return call.body


@pytest.mark.parametrize(("kind", "wire"), TRANSLATED)
def test_a_field_left_at_its_default_is_not_named(kind, wire):
    body = {"messages": HELLO, **DEFAULTS}
    assert unsent(dialect_for(kind, wire), body) == ()


@pytest.mark.parametrize(("kind", "wire"), TRANSLATED)
def test_what_a_dialect_names_its_translation_leaves_out(kind, wire):
    dialect = dialect_for(kind, wire)
    for name, value in ASKED.items():
        body = {"messages": HELLO, name: value}
        named = unsent(dialect, body)
        sent = json.dumps(_upstream(kind, wire, body))
        if name in NAMED[(kind, wire)]:
            assert named == (name,), name
            if not isinstance(value, bool):
                assert _marker(value) not in sent, name
        else:
            assert named == (), name
            # carried under the upstream's own name (Gemini's JSON mode is a MIME
            # type, checked below)
            if kind not in ("gemini", "vertex") or name != "response_format":
                assert _marker(value) in sent, name


def test_gemini_translates_the_sampling_fields_it_has():
    config = _upstream("gemini", "chat", {"messages": HELLO, **ASKED})[
        "generationConfig"
    ]
    assert config["seed"] == ASKED["seed"]
    assert config["presencePenalty"] == ASKED["presence_penalty"]
    assert config["frequencyPenalty"] == ASKED["frequency_penalty"]
    assert config["candidateCount"] == 3
    assert config["responseMimeType"] == "application/json"
    # no logprobs: the reply's would not be mapped back
    assert "responseLogprobs" not in config


def test_the_fields_only_some_upstreams_take():
    body = {
        "messages": HELLO,
        "reasoning_effort": "high",
        "parallel_tool_calls": False,
        "tool_choice": "none",
        "tools": [{"type": "function", "function": {"name": "f"}}],
    }
    assert unsent(REGISTRY["bedrock"], body) == (
        "reasoning_effort",
        "parallel_tool_calls",
        "tool_choice",
    )
    assert unsent(REGISTRY["gemini"], body) == ("parallel_tool_calls",)
    # Anthropic has thinking, disable_parallel_tool_use and a "none" choice
    assert unsent(REGISTRY["anthropic"], body) == ()
    upstream = _upstream("anthropic", "chat", body)
    assert upstream["tool_choice"] == {"type": "none"}


def test_stop_sequences_past_what_gemini_takes_are_named():
    stops = [f"s{i}" for i in range(7)]
    body = {"messages": HELLO, "stop": stops}
    assert unsent(REGISTRY["gemini"], body) == ("stop[5]", "stop[6]")
    assert (
        _upstream("gemini", "chat", body)["generationConfig"]["stopSequences"]
        == (stops[:5])
    )
    assert unsent(REGISTRY["gemini"], {"messages": HELLO, "stop": stops[:5]}) == ()
    assert unsent(REGISTRY["anthropic"], body) == ()
    # the Responses API has no stop sequences at all, nor top-k
    assert unsent(dialect_for("openai", "responses"), body) == ("stop",)
    with_top_k = {"messages": HELLO, "top_k": 40}
    assert unsent(dialect_for("openai", "responses"), with_top_k) == ("top_k",)
    assert "top_k" not in _upstream("openai", "responses", with_top_k)
    for kind in ("anthropic", "gemini", "bedrock"):
        assert unsent(REGISTRY[kind], with_top_k) == (), kind
        assert "40" in json.dumps(_upstream(kind, "chat", with_top_k)), kind


def test_parts_and_tools_a_translation_cannot_send_are_named():
    body = {
        "messages": [
            {
                "role": "system",
                "content": [
                    {"type": "text", "text": "s"},
                    {"type": "image_url", "image_url": {"url": "https://x/a.png"}},
                ],
            },
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": "t"},
                    {"type": "image_url", "image_url": {"url": "https://x/a.png"}},
                    {"type": "input_audio", "input_audio": {"data": "UklG"}},
                    {"type": "file", "file": {"file_id": "file-1"}},
                    {"type": "file", "file": {"file_data": "data:application/pdf,x"}},
                ],
            },
            {"role": "function", "name": "f", "content": "legacy"},
        ],
        "tools": [
            {"type": "function", "function": {"name": "f"}},
            {"type": "custom", "custom": {"name": "c"}},
        ],
    }
    system_image = "messages[0].content[1]"
    url_image, audio, file_id, file_data = (
        f"messages[1].content[{j}]" for j in (1, 2, 3, 4)
    )
    legacy, custom = "messages[2]", "tools[1]"
    assert unsent(REGISTRY["gemini"], body) == (system_image, file_id, legacy, custom)
    assert unsent(REGISTRY["anthropic"], body) == (
        system_image,
        audio,
        file_id,
        file_data,
        legacy,
        custom,
    )
    # Converse takes the PDF as a ``document`` block
    assert unsent(REGISTRY["bedrock"], body) == (
        system_image,
        url_image,
        audio,
        file_id,
        legacy,
        custom,
    )
    assert unsent(dialect_for("openai", "responses"), body) == (
        system_image,
        audio,
        legacy,
        custom,
    )


def test_the_elements_to_check_are_read_once_per_request():
    """``odd_elements`` finds what a part or tool test must look at; a text-only
    conversation with function tools has nothing, so each attempt's check is the
    top-level fields only."""
    plain = {
        "messages": [
            {"role": "system", "content": [{"type": "text", "text": "s"}]},
            {"role": "user", "content": [{"type": "text", "text": "t"}]},
            {"role": "assistant", "content": "a", "tool_calls": []},
        ],
        "tools": [{"type": "function", "function": {"name": "f"}}, {"function": {}}],
    }
    assert odd_elements(plain) == ()
    image = {"type": "image_url", "image_url": {"url": "https://x/a.png"}}
    body = {
        "messages": [
            {"role": "system", "content": [image]},
            {"role": "user", "content": [{"type": "text", "text": "t"}, image]},
            {"role": "function", "content": "x"},
        ],
        "tools": [{"type": "custom"}],
    }
    assert odd_elements(body) == (
        Odd("messages[0].content[0]", image, True),
        Odd("messages[1].content[1]", image, False),
        Odd("messages[2]"),
        Odd("tools[0]", tool="custom"),
    )
    odd = odd_elements(body)
    for dialect in WIRES.values():
        assert unsent(dialect, body, odd) == unsent(dialect, body)
        assert carry_of(dialect) is None or unsent(dialect, body) != ()


def test_a_tool_message_is_sent_as_text():
    body = {
        "messages": [
            *HELLO,
            {
                "role": "tool",
                "tool_call_id": "c1",
                "content": [
                    {"type": "text", "text": "ok"},
                    {"type": "image_url", "image_url": {"url": "data:image/png,x"}},
                ],
            },
        ]
    }
    for kind in ("anthropic", "gemini", "bedrock"):
        assert unsent(REGISTRY[kind], body) == ("messages[1].content[1]",), kind


@pytest.mark.parametrize("kind", ["openai", "azure", "mock"])
def test_the_chat_completions_wire_carries_everything(kind):
    body = {"messages": HELLO, **ASKED, "stop": ["a"] * 9}
    assert unsent(REGISTRY[kind], body) == ()


def test_every_translated_dialect_has_a_declaration():
    chat_wire = {(k, "chat") for k in ("openai", "azure", "mock")}
    for key, dialect in WIRES.items():
        left = unsent(dialect, {"messages": HELLO, "logit_bias": {"1": 1}})
        assert left == (() if key in chat_wire else ("logit_bias",)), key


def _request(renamed: dict[str, str]) -> ChatRequest:
    return ChatRequest(
        body={},
        stream=False,
        model="m",
        entries=(),
        explicit_chain=False,
        redundancy=Redundancy(),
        include_usage=False,
        renamed=MappingProxyType(renamed),
    )


def test_a_path_is_named_in_the_clients_terms():
    from gateway.inbound.messages import NAMES as MESSAGES
    from gateway.inbound.responses import NAMES as RESPONSES

    responses = _request(dict(RESPONSES))
    assert responses.client_path("response_format") == "text.format"
    assert responses.client_path("reasoning_effort") == "reasoning.effort"
    assert responses.client_path("seed") == "seed"
    assert responses.client_path("tools[3]") == "tools[3]"
    messages = _request(dict(MESSAGES))
    assert messages.client_path("stop[5]") == "stop_sequences[5]"
    assert messages.client_path("parallel_tool_calls") == (
        "tool_choice.disable_parallel_tool_use"
    )
    assert messages.client_path("reasoning_effort") == "thinking"
    assert messages.client_path("messages[1].content[0]") == "messages[1].content[0]"
    assert _request({}).client_path("response_format") == "response_format"


# --- operations a dialect does not serve ----------------------------------------------


def test_the_declarations_of_the_mixins_are_the_kinds_own():
    flags = {
        key: (d.embeddings, d.counts_tokens, sorted(d.surfaces))
        for key, d in WIRES.items()
    }
    assert flags == {
        ("openai", "chat"): (True, False, ["chat", "completions"]),
        ("anthropic", "chat"): (False, True, ["messages"]),
        ("gemini", "chat"): (True, True, []),
        ("azure", "chat"): (True, False, ["chat"]),
        ("vertex", "chat"): (True, True, []),
        ("bedrock", "chat"): (True, False, []),
        ("mock", "chat"): (True, False, ["chat", "completions"]),
        ("openai", "responses"): (True, False, ["responses"]),
        ("mock", "responses"): (True, False, ["responses"]),
        ("azure", "responses"): (True, False, ["responses"]),
        ("vertex", "messages"): (False, True, ["messages"]),
    }


def test_an_operation_a_dialect_does_not_serve_is_refused():
    from gateway.dialects.base import BadUpstreamResponse

    common = {"base_url": "https://u.example", "api_key": "k", "model": "m"}
    for key in (("anthropic", "chat"), ("vertex", "messages")):
        dialect = WIRES[key]
        with pytest.raises(NotImplementedError):
            dialect.embeddings_request(**common, body={"input": "x"})
        with pytest.raises(BadUpstreamResponse):
            dialect.parse_embeddings({"data": []})
    for key in (("gemini", "chat"), ("vertex", "chat"), ("bedrock", "chat")):
        with pytest.raises(NotImplementedError):
            WIRES[key].passthrough_request(
                **common, body={}, stream=False, forward=(), surface="chat"
            )
    for key in (("openai", "chat"), ("azure", "chat"), ("bedrock", "chat")):
        with pytest.raises(NotImplementedError):
            WIRES[key].count_tokens_request(**common, body={}, forward=())


# --- Bedrock embeddings usage ---------------------------------------------------------


def test_a_cohere_embedding_counts_its_input_from_the_reply_header():
    reply = {"embeddings": {"float": [[0.1], [0.2]]}}
    counted = REGISTRY["bedrock"].parse_embeddings(
        reply, {"X-Amzn-Bedrock-Input-Token-Count": "12"}
    )
    assert counted["usage"] == {"prompt_tokens": 12, "total_tokens": 12}
    assert "usage" not in parse_embed_reply(reply)
    assert "usage" not in parse_embed_reply(
        reply, {"x-amzn-bedrock-input-token-count": "many"}
    )


def test_titans_body_count_comes_first():
    reply = {"embedding": [0.1], "inputTextTokenCount": 4}
    counted = parse_embed_reply(reply, {"x-amzn-bedrock-input-token-count": "9"})
    assert counted["usage"] == {"prompt_tokens": 4, "total_tokens": 4}
    without = parse_embed_reply(
        {"embedding": [0.1]}, {"x-amzn-bedrock-input-token-count": "9"}
    )
    assert without["usage"] == {"prompt_tokens": 9, "total_tokens": 9}


def test_the_other_dialects_take_the_reply_headers_and_ignore_them():
    headers = {"x-amzn-bedrock-input-token-count": "9"}
    gemini = REGISTRY["gemini"].parse_embeddings(
        {"embeddings": [{"values": [0.1]}]}, headers
    )
    assert "usage" not in gemini
    openai = REGISTRY["openai"].parse_embeddings(
        {"object": "list", "data": [{"embedding": [0.1], "index": 0}]}, headers
    )
    assert openai["data"][0]["embedding"] == [0.1]
