"""Client body -> ChatRequest: spec 01 and spec 02 §3 rows 1-11, in order."""

import json
from types import MappingProxyType

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gateway.inbound.chat import GATEWAY_FIELDS, parse_chat_request
from gateway.kernel.chain import ChainError, EntrySpec, build_chain
from gateway.kernel.exchange import ChainEntry, ChatRequest, Redundancy, RequestError
from gateway.kernel.types import (
    ConnectionInfo,
    KeyPolicy,
    ModelInfo,
    ProviderInfo,
    RoutingTable,
)

MESSAGES = [{"role": "user", "content": "hi"}]
FOUR = ["connection_error", "server_error", "rate_limit", "timeout"]


def _raw(body):
    return json.dumps(body).encode()


@pytest.fixture
def parse():
    """``parse(model="pa/m1", ...)``: a valid body with ``messages`` plus fields."""

    def _parse(**fields):
        return parse_chat_request(_raw({"messages": MESSAGES, **fields}))

    return _parse


@pytest.fixture
def refusal():
    """``refusal(body)`` -> (status, code, param) of the RequestError raised."""

    def _refusal(body, *, with_messages=True):
        if with_messages and isinstance(body, dict):
            body = {"messages": MESSAGES, **body}
        raw = body if isinstance(body, bytes) else _raw(body)
        with pytest.raises(RequestError) as caught:
            parse_chat_request(raw)
        error = caught.value
        assert error.error_type == "invalid_request_error"
        return error.status, error.code, error.param

    return _refusal


# --- row 1 --------------------------------------------------------------------------


def test_models_with_fallback_models_is_conflicting_parameters(refusal):
    body = {"models": ["pa/m1"], "fallback_models": ["pb/m2"], "model": "pa/m1"}

    assert refusal(body) == (400, "conflicting_parameters", "fallback_models")


def test_conflict_is_reported_before_the_lists_are_checked(refusal):
    body = {"models": "bad", "fallback_models": 5}

    assert refusal(body) == (400, "conflicting_parameters", "fallback_models")


# --- rows 2-3 -----------------------------------------------------------------------


@pytest.mark.parametrize(
    "models",
    ["pa/m1", None, {}, 3, [], ["a", "b", "c", "d"]],
)
def test_models_not_a_list_of_one_to_three_is_invalid_value(refusal, models):
    assert refusal({"models": models}) == (400, "invalid_value", "models")


@pytest.mark.parametrize(
    "fallbacks",
    ["pb/m2", None, {}, [], ["a", "b", "c"]],
)
def test_fallback_models_not_a_list_of_one_to_two_is_invalid_value(refusal, fallbacks):
    body = {"model": "pa/m1", "fallback_models": fallbacks}

    assert refusal(body) == (400, "invalid_value", "fallback_models")


def test_fallback_models_problem_is_reported_before_a_missing_model(refusal):
    assert refusal({"fallback_models": []}) == (400, "invalid_value", "fallback_models")


# --- row 4 --------------------------------------------------------------------------


@pytest.mark.parametrize("body", [{}, {"model": None}, {"model": ""}])
def test_missing_or_empty_model_is_missing_parameter(refusal, body):
    assert refusal(body) == (400, "missing_parameter", "model")


@pytest.mark.parametrize("model", [5, ["pa/m1"], {"id": "pa/m1"}, True])
def test_a_model_of_the_wrong_type_is_invalid_type(refusal, model):
    assert refusal({"model": model}) == (400, "invalid_type", "model")


def test_fallback_models_alone_is_missing_parameter_model(refusal):
    assert refusal({"fallback_models": ["pb/m2"]}) == (
        400,
        "missing_parameter",
        "model",
    )


def test_missing_model_is_reported_before_a_bad_fallback_entry(refusal):
    assert refusal({"fallback_models": [5]}) == (400, "missing_parameter", "model")


@pytest.mark.parametrize("model", [None, 5, "", "anything"])
def test_models_makes_model_optional_and_ignored(parse, model):
    fields = {"models": ["pa/m1"]}
    if model is not None:
        fields["model"] = model

    request = parse(**fields)

    assert request.entries == (ChainEntry(model="pa/m1", param="models[0]"),)


# --- rows 5-6 -----------------------------------------------------------------------


@pytest.mark.parametrize("entry", ["", 5, None, [], True, 1.5])
def test_entry_neither_string_nor_object_is_invalid_type(refusal, entry):
    assert refusal({"models": ["pa/m1", entry]}) == (400, "invalid_type", "models[1]")


def test_bad_fallback_entry_is_named_by_its_index(refusal):
    body = {"model": "pa/m1", "fallback_models": ["pb/m2", 7]}

    assert refusal(body) == (400, "invalid_type", "fallback_models[1]")


def test_first_bad_entry_in_index_order_is_reported(refusal):
    assert refusal({"models": ["pa/m1", 5, None]}) == (
        400,
        "invalid_type",
        "models[1]",
    )


@pytest.mark.parametrize("entry", [{}, {"model": ""}, {"model": 5}, {"model": None}])
def test_object_entry_without_a_non_empty_model_is_invalid_type(refusal, entry):
    assert refusal({"models": ["pa/m1", entry]}) == (
        400,
        "invalid_type",
        "models[1].model",
    )


def test_row_five_in_a_later_entry_beats_row_six_in_an_earlier_one(refusal):
    assert refusal({"models": [{"model": ""}, 5]}) == (400, "invalid_type", "models[1]")


# --- row 7 --------------------------------------------------------------------------


@pytest.mark.parametrize("redundancy", [[], "fast", 5, None, True])
def test_redundancy_not_an_object_is_invalid_type(refusal, redundancy):
    assert refusal({"model": "pa/m1", "redundancy": redundancy}) == (
        400,
        "invalid_type",
        "redundancy",
    )


def test_row_six_is_reported_before_row_seven(refusal):
    body = {"models": [{"model": ""}], "redundancy": "x"}

    assert refusal(body) == (400, "invalid_type", "models[0].model")


# --- row 8 --------------------------------------------------------------------------


def test_unknown_key_in_an_entry_object_is_unknown_parameter(refusal):
    body = {"models": ["pa/m1", {"model": "pb/m2", "foo": 1}]}

    assert refusal(body) == (400, "unknown_parameter", "models[1].foo")


def test_unknown_key_in_redundancy_is_unknown_parameter(refusal):
    body = {"model": "pa/m1", "redundancy": {"timeout_ms": 2000, "foo": 1}}

    assert refusal(body) == (400, "unknown_parameter", "redundancy.foo")


def test_row_seven_is_reported_before_row_eight(refusal):
    body = {"models": [{"model": "pa/m1", "foo": 1}], "redundancy": []}

    assert refusal(body) == (400, "invalid_type", "redundancy")


def test_unknown_entry_key_is_reported_before_an_unknown_redundancy_key(refusal):
    body = {
        "model": "pa/m1",
        "fallback_models": [{"model": "pb/m2", "retries": 2}],
        "redundancy": {"bar": 1},
    }

    assert refusal(body) == (400, "unknown_parameter", "fallback_models[0].retries")


def test_unknown_key_is_reported_before_a_bad_timeout(refusal):
    body = {"models": [{"model": "pa/m1", "timeout_ms": 1, "x": 1}]}

    assert refusal(body) == (400, "unknown_parameter", "models[0].x")


# --- rows 9-10: ranges and the integer rule -----------------------------------------


@pytest.mark.parametrize("value", [999, 300_001, 0, -1000, 3000.5, True, "3000", None])
def test_redundancy_timeout_outside_1000_to_300000_is_invalid_value(refusal, value):
    body = {"model": "pa/m1", "redundancy": {"timeout_ms": value}}

    assert refusal(body) == (400, "invalid_value", "redundancy.timeout_ms")


@pytest.mark.parametrize("value", [499, 60_001, 500.5, False, "500", []])
def test_entry_first_token_timeout_outside_500_to_60000_is_invalid_value(
    refusal, value
):
    body = {
        "model": "pa/m1",
        "fallback_models": [
            "pb/m2",
            {"model": "pc/m3", "first_token_timeout_ms": value},
        ],
    }

    assert refusal(body) == (
        400,
        "invalid_value",
        "fallback_models[1].first_token_timeout_ms",
    )


def test_entry_timeout_out_of_range_names_the_entry(refusal):
    body = {"models": [{"model": "pa/m1", "timeout_ms": 300_001}]}

    assert refusal(body) == (400, "invalid_value", "models[0].timeout_ms")


def test_redundancy_first_token_timeout_out_of_range_is_invalid_value(refusal):
    body = {"model": "pa/m1", "redundancy": {"first_token_timeout_ms": 60_001}}

    assert refusal(body) == (400, "invalid_value", "redundancy.first_token_timeout_ms")


def test_bad_timeout_is_reported_before_a_bad_first_token_timeout(refusal):
    body = {
        "models": [{"model": "pa/m1", "first_token_timeout_ms": 1}],
        "redundancy": {"timeout_ms": 1},
    }

    assert refusal(body) == (400, "invalid_value", "redundancy.timeout_ms")


def test_entry_timeouts_are_checked_in_index_order_before_redundancy(refusal):
    body = {
        "models": ["pa/m1", {"model": "pb/m2", "timeout_ms": 1}],
        "redundancy": {"timeout_ms": 1},
    }

    assert refusal(body) == (400, "invalid_value", "models[1].timeout_ms")


@pytest.mark.parametrize(
    ("timeout", "first"),
    [(1000, 500), (300_000, 60_000), (3000, 3000), (3000.0, 1000.0)],
)
def test_integers_at_the_bounds_and_integral_floats_pass(parse, timeout, first):
    request = parse(
        models=[
            {"model": "pa/m1", "timeout_ms": timeout, "first_token_timeout_ms": first}
        ],
        redundancy={"timeout_ms": timeout, "first_token_timeout_ms": first},
    )

    assert request.entries[0].timeout_ms == int(timeout)
    assert type(request.entries[0].timeout_ms) is int
    assert request.entries[0].first_token_timeout_ms == int(first)
    assert request.redundancy == Redundancy(
        timeout_ms=int(timeout), first_token_timeout_ms=int(first), on=None
    )
    assert type(request.redundancy.first_token_timeout_ms) is int


# --- row 11 -------------------------------------------------------------------------


@pytest.mark.parametrize(
    "on",
    [
        "timeout",
        None,
        {"timeout": True},
        ["timeout", "context_length"],
        ["invalid_request"],
        ["client_cancelled"],
        ["TIMEOUT"],
        [1],
        [["timeout"]],
    ],
)
def test_on_not_a_list_of_the_four_reasons_is_invalid_value(refusal, on):
    body = {"model": "pa/m1", "redundancy": {"on": on}}

    assert refusal(body) == (400, "invalid_value", "redundancy.on")


def test_bad_first_token_timeout_is_reported_before_a_bad_on(refusal):
    body = {
        "model": "pa/m1",
        "redundancy": {"on": "x", "first_token_timeout_ms": 1},
    }

    assert refusal(body) == (400, "invalid_value", "redundancy.first_token_timeout_ms")


def test_empty_on_is_allowed(parse):
    assert parse(model="pa/m1", redundancy={"on": []}).redundancy.on == ()


def test_repeated_on_values_are_ignored(parse):
    request = parse(
        model="pa/m1",
        redundancy={"on": ["timeout", "rate_limit", "timeout", "rate_limit"]},
    )

    assert request.redundancy.on == ("timeout", "rate_limit")


def test_every_one_of_the_four_reasons_is_accepted(parse):
    assert parse(model="pa/m1", redundancy={"on": FOUR}).redundancy.on == tuple(FOUR)


def test_absent_redundancy_gives_no_options(parse):
    assert parse(model="pa/m1").redundancy == Redundancy()


# --- the chain ----------------------------------------------------------------------


def test_models_is_the_chain_with_entry_paths_and_timeouts(parse):
    request = parse(
        model="ignored",
        models=[
            "pa/m1",
            {"model": "pb/m2", "timeout_ms": 2000, "first_token_timeout_ms": 700},
        ],
    )

    assert request.entries == (
        ChainEntry(model="pa/m1", param="models[0]"),
        ChainEntry(
            model="pb/m2",
            param="models[1].model",
            timeout_ms=2000,
            first_token_timeout_ms=700,
        ),
    )
    assert request.explicit_chain is True
    assert request.model == "ignored"


def test_model_and_fallback_models_chain_model_first(parse):
    request = parse(
        model="pa/m1",
        fallback_models=["pb/m2", {"model": "pc/m3", "timeout_ms": 5000}],
    )

    assert request.entries == (
        ChainEntry(model="pa/m1", param="model"),
        ChainEntry(model="pb/m2", param="fallback_models[0]"),
        ChainEntry(model="pc/m3", param="fallback_models[1].model", timeout_ms=5000),
    )
    assert request.explicit_chain is True


def test_model_alone_is_a_single_entry_that_defaults_may_extend(parse):
    request = parse(model="pb/m2")

    assert request.entries == (ChainEntry(model="pb/m2", param="model"),)
    assert request.explicit_chain is False
    assert request.model == "pb/m2"


# --- body, messages, options --------------------------------------------------------


@pytest.mark.parametrize(
    "raw", [b"", b"{", b"nul", b'{"model": }', b"\xff\xfe", b"{}x"]
)
def test_malformed_json_is_invalid_json(refusal, raw):
    assert refusal(raw) == (400, "invalid_json", None)


@pytest.mark.parametrize("raw", [b"[]", b'"x"', b"1", b"null", b"true"])
def test_body_that_is_not_an_object_is_invalid_type(refusal, raw):
    assert refusal(raw) == (400, "invalid_type", None)


def test_missing_messages_is_missing_parameter(refusal):
    assert refusal({"model": "pa/m1"}, with_messages=False) == (
        400,
        "missing_parameter",
        "messages",
    )


@pytest.mark.parametrize("messages", ["hi", None, {}, 5])
def test_messages_not_a_list_is_invalid_type(refusal, messages):
    body = {"model": "pa/m1", "messages": messages}

    assert refusal(body, with_messages=False) == (400, "invalid_type", "messages")


def test_an_empty_messages_list_is_invalid_value(refusal):
    # the right type, a value not allowed (spec 01 error codes)
    body = {"model": "pa/m1", "messages": []}

    assert refusal(body, with_messages=False) == (400, "invalid_value", "messages")


def test_message_that_is_not_an_object_is_named_by_index(refusal):
    body = {"model": "pa/m1", "messages": [MESSAGES[0], "hi"]}

    assert refusal(body, with_messages=False) == (400, "invalid_type", "messages[1]")


def test_message_without_a_string_role_is_invalid_type(refusal):
    body = {"model": "pa/m1", "messages": [{"content": "hi"}]}

    assert refusal(body, with_messages=False) == (
        400,
        "invalid_type",
        "messages[0].role",
    )


def test_chain_problems_are_reported_before_message_problems(refusal):
    body = {"models": [], "messages": "bad"}

    assert refusal(body, with_messages=False) == (400, "invalid_value", "models")


@pytest.mark.parametrize(
    ("field", "value", "code"),
    [
        ("stream", "yes", "invalid_type"),
        ("stream", 1, "invalid_type"),
        ("temperature", "0.5", "invalid_type"),
        ("temperature", True, "invalid_type"),
        ("temperature", 2.5, "invalid_value"),
        ("temperature", -0.1, "invalid_value"),
        ("top_p", 1.5, "invalid_value"),
        ("presence_penalty", -3, "invalid_value"),
        ("frequency_penalty", 2.1, "invalid_value"),
        ("max_tokens", 0, "invalid_value"),
        ("max_tokens", 1.5, "invalid_type"),
        ("max_completion_tokens", "10", "invalid_type"),
        ("n", 129, "invalid_value"),
        ("n", 0, "invalid_value"),
        ("stream_options", [], "invalid_type"),
        ("tools", {}, "invalid_type"),
    ],
)
def test_obviously_bad_standard_option_is_a_400_naming_it(refusal, field, value, code):
    assert refusal({"model": "pa/m1", field: value}) == (400, code, field)


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("stream", None),
        ("stream", False),
        ("temperature", None),
        ("temperature", 0),
        ("temperature", 2),
        ("max_tokens", 100.0),
        ("n", 128),
        ("tools", []),
        ("stream_options", None),
    ],
)
def test_valid_standard_option_passes(parse, field, value):
    assert parse(model="pa/m1", **{field: value}).body[field] == value


def test_gateway_fields_are_removed_from_the_upstream_body(parse):
    request = parse(
        model="pa/m1",
        fallback_models=["pb/m2"],
        redundancy={"timeout_ms": 2000},
        session_id="s1",
        litellm_session_id="s2",
        temperature=0.2,
        user="u",
        metadata={"k": "v"},
    )

    assert request.body == {
        "messages": MESSAGES,
        "model": "pa/m1",
        "temperature": 0.2,
        "user": "u",
        "metadata": {"k": "v"},
    }


def test_models_field_is_removed_from_the_upstream_body(parse):
    assert "models" not in parse(models=["pa/m1"]).body


def test_gateway_fields_are_exactly_the_spec_list():
    assert GATEWAY_FIELDS == (
        "models",
        "fallback_models",
        "redundancy",
        "session_id",
        "litellm_session_id",
    )


@pytest.mark.parametrize(
    ("fields", "stream", "include_usage"),
    [
        ({}, False, False),
        ({"stream": True}, True, False),
        ({"stream": True, "stream_options": {"include_usage": True}}, True, True),
        ({"stream": True, "stream_options": {"include_usage": False}}, True, False),
        ({"stream": True, "stream_options": {}}, True, False),
        ({"stream": None}, False, False),
    ],
)
def test_stream_and_include_usage_are_detected(parse, fields, stream, include_usage):
    request = parse(model="pa/m1", **fields)

    assert (request.stream, request.include_usage) == (stream, include_usage)


# --- spec 02 §14 acceptance example 5 -----------------------------------------------


def _example_table():
    providers = {}
    for slug, model_id in (("pa", "m1"), ("pb", "m2"), ("pc", "m3")):
        providers[slug] = ProviderInfo(
            slug=slug,
            kind="mock",
            base_url="http://mock/v1",
            connections=(ConnectionInfo(provider=slug, name="main"),),
            models=MappingProxyType(
                {model_id: ModelInfo(provider=slug, model_id=model_id)}
            ),
            models_lower=MappingProxyType({model_id: (model_id,)}),
        )
    return RoutingTable(
        providers=MappingProxyType(providers),
        bare_models=MappingProxyType(
            {m: ((s, m),) for s, m in (("pa", "m1"), ("pb", "m2"), ("pc", "m3"))}
        ),
    )


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        (
            {"models": ["pa/m1"], "fallback_models": ["pb/m2"]},
            (400, "conflicting_parameters", "fallback_models"),
        ),
        (
            {"model": "pa/m1", "redundancy": {"timeout_ms": 999}},
            (400, "invalid_value", "redundancy.timeout_ms"),
        ),
        (
            {"models": [{"model": "pa/m1", "first_token_timeout_ms": 70000}]},
            (400, "invalid_value", "models[0].first_token_timeout_ms"),
        ),
        (
            {"models": ["pa/m1", "pb/m2", "pc/m3", "pa/m1"]},
            (400, "invalid_value", "models"),
        ),
    ],
)
def test_acceptance_example_five_validation_rows(refusal, body, expected):
    assert refusal(body) == expected


@pytest.mark.parametrize(
    ("models", "param"),
    [(["pa/nope"], "models[0]"), (["pa/m1", {"model": "pa/nope"}], "models[1].model")],
)
def test_acceptance_example_five_unknown_model_is_404_naming_the_entry(
    parse, models, param
):
    request = parse(models=models)
    entries = tuple(EntrySpec(model=e.model, param=e.param) for e in request.entries)

    with pytest.raises(ChainError) as caught:
        build_chain(
            _example_table(),
            KeyPolicy(id=1, name="k", prefix="p"),
            entries,
            explicit=request.explicit_chain,
            warnings=[],
        )

    assert (caught.value.status, caught.value.code, caught.value.param) == (
        404,
        "model_not_found",
        param,
    )


# --- property: nothing but RequestError ---------------------------------------------

_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=6),
)
_json = st.recursive(
    _scalars,
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.dictionaries(st.text(max_size=6), inner, max_size=4)
    ),
    max_leaves=8,
)
_ints = st.one_of(st.integers(min_value=-10, max_value=400_000), _json)
_entry = st.one_of(
    st.sampled_from(["pa/m1", "auto", ""]),
    _json,
    st.fixed_dictionaries(
        {},
        optional={
            "model": st.one_of(st.just("pb/m2"), _json),
            "timeout_ms": _ints,
            "first_token_timeout_ms": _ints,
            "foo": _json,
        },
    ),
)
_entries = st.one_of(st.lists(_entry, max_size=4), _json)
_redundancy = st.one_of(
    _json,
    st.fixed_dictionaries(
        {},
        optional={
            "timeout_ms": _ints,
            "first_token_timeout_ms": _ints,
            "on": st.one_of(st.lists(st.sampled_from([*FOUR, "x"])), _json),
            "foo": _json,
        },
    ),
)
_message = st.one_of(
    st.fixed_dictionaries({"role": st.sampled_from(["user", "system"])}), _json
)
_bodies = st.fixed_dictionaries(
    {},
    optional={
        "model": st.one_of(st.just("pa/m1"), _json),
        "models": _entries,
        "fallback_models": _entries,
        "redundancy": _redundancy,
        "messages": st.one_of(st.lists(_message, max_size=3), _json),
        "stream": _json,
        "stream_options": _json,
        "temperature": _json,
        "max_tokens": _ints,
        "n": _ints,
        "tools": _json,
        "session_id": _json,
    },
)


REFUSAL_CODES = {
    "invalid_json",
    "invalid_type",
    "invalid_value",
    "missing_parameter",
    "unknown_parameter",
    "conflicting_parameters",
}


def _outcome(raw):
    """The parsed request, or the RequestError it raised (anything else escapes)."""
    try:
        return parse_chat_request(raw)
    except RequestError as error:
        return error


@settings(max_examples=300, deadline=None, database=None)
@given(body=st.one_of(_bodies, _json))
def test_any_json_body_gives_a_request_or_a_request_error(body):
    outcome = _outcome(_raw(body))

    if isinstance(outcome, RequestError):
        assert (outcome.status, outcome.code in REFUSAL_CODES) == (400, True)
    else:
        assert isinstance(outcome, ChatRequest)
        assert not set(GATEWAY_FIELDS) & set(outcome.body)
        assert 1 <= len(outcome.entries) <= 3
        assert all(isinstance(e.model, str) and e.model for e in outcome.entries)


@settings(max_examples=100, deadline=None, database=None)
@given(raw=st.binary(max_size=40))
def test_any_bytes_give_a_request_or_a_request_error(raw):
    outcome = _outcome(raw)

    assert isinstance(outcome, ChatRequest | RequestError)
