"""Attempt results, usage and cost (spec 06 §1.2, §1.3; R_in of spec 03 §3)."""

import json
import math
from decimal import Decimal

import pytest

from gateway.kernel.types import ModelInfo
from gateway.pipeline.accounting import (
    cost_usd,
    estimate_prompt_tokens,
    result_of,
    usage_numbers,
)


@pytest.fixture
def make_model():
    """A catalog row with prices in USD per million tokens."""

    def _make(**prices):
        return ModelInfo(provider="pa", model_id="m1", **prices)

    return _make


# --- result_of: the table of spec 06 §1.2 -------------------------------------------


@pytest.mark.parametrize(
    ("reason", "detail", "result"),
    [
        (None, None, "success"),
        (None, "fusion_single_answer", "success"),
        (None, "judge_failed", "success"),
        (None, "stream_interrupted", "stream_interrupted"),
        ("connection_error", None, "connection_error"),
        ("timeout", None, "timeout"),
        ("timeout", "idle", "timeout"),
        ("timeout", "panel_timeout", "timeout"),
        ("timeout", "first_token", "first_token_timeout"),
        ("server_error", None, "server_error"),
        ("server_error", "bad_response", "server_error"),
        ("server_error", "unexpected_status", "server_error"),
        ("server_error", "empty_stream", "empty_response"),
        ("server_error", "empty_output", "empty_response"),
        ("server_error", "auth_failed", "auth_error"),
        ("server_error", "payment_required", "auth_error"),
        ("server_error", "model_not_found", "not_found"),
        ("rate_limit", None, "rate_limit"),
        ("invalid_request", None, "client_error"),
        ("context_length", None, "client_error"),
        ("client_cancelled", None, "cancelled"),
        ("timeout", "straggler_dropped", "cancelled"),
    ],
)
def test_result_follows_the_reason_and_detail_table(reason, detail, result):
    assert result_of(reason, detail) == result


# --- usage_numbers ------------------------------------------------------------------


def test_openai_usage_gives_prompt_completion_cached_and_no_cache_write():
    usage = {
        "prompt_tokens": 1200,
        "completion_tokens": 80,
        "total_tokens": 1280,
        "prompt_tokens_details": {"cached_tokens": 1024},
    }

    assert usage_numbers(usage) == (1200, 80, 1024, 0)


def test_translated_anthropic_usage_keeps_the_cache_write():
    usage = {
        "prompt_tokens": 1000,
        "completion_tokens": 100,
        "prompt_tokens_details": {"cached_tokens": 200},
        "cache_creation_input_tokens": 300,
    }

    assert usage_numbers(usage) == (1000, 100, 200, 300)


def test_usage_with_only_one_count_fills_the_rest_with_zero():
    assert usage_numbers({"completion_tokens": 5}) == (0, 5, 0, 0)
    assert usage_numbers({"prompt_tokens": 7}) == (7, 0, 0, 0)


@pytest.mark.parametrize(
    "usage",
    [
        None,
        [],
        "usage",
        {},
        {"total_tokens": 10},
        {"prompt_tokens": "10", "completion_tokens": None},
        {"prompt_tokens": True, "completion_tokens": False},
        {"prompt_tokens": 1.5},
        {"prompt_tokens": -1},
    ],
)
def test_usage_without_a_token_count_is_unknown(usage):
    assert usage_numbers(usage) is None


def test_malformed_details_count_as_zero():
    usage = {
        "prompt_tokens": 10,
        "completion_tokens": 2,
        "prompt_tokens_details": {"cached_tokens": True},
        "cache_creation_input_tokens": "3",
    }

    assert usage_numbers(usage) == (10, 2, 0, 0)


# --- estimate_prompt_tokens (R_in + tools) ------------------------------------------


def test_estimate_is_the_json_text_length_over_four_rounded_up():
    messages = [{"role": "user", "content": "hi"}]

    # json.dumps(messages) == '[{"role": "user", "content": "hi"}]': 35 characters
    assert estimate_prompt_tokens({"messages": messages}) == 9


def test_estimate_counts_characters_not_bytes():
    messages = [{"role": "user", "content": "ééééé"}]

    # 38 characters; with \u00e9 escapes it would be 63 (16 tokens)
    assert estimate_prompt_tokens({"messages": messages}) == 10


@pytest.mark.parametrize("kind", ["image_url", "input_image", "input_audio", "file"])
def test_each_non_text_part_counts_1000_and_its_payload_never_counts(kind):
    text_part = {"type": "text", "text": "describe"}
    payload = {"type": kind, kind: {"data": "A" * 40_000}}
    with_part = [{"role": "user", "content": [text_part, payload, payload]}]
    without = [{"role": "user", "content": [text_part]}]

    assert estimate_prompt_tokens({"messages": with_part}) == (
        estimate_prompt_tokens({"messages": without}) + 2000
    )


def test_tools_add_their_json_length_over_four_rounded_up():
    messages = [{"role": "user", "content": "hi"}]
    tools = [{"type": "function", "function": {"name": "f"}}]
    tool_chars = len(json.dumps(tools, ensure_ascii=False))

    assert estimate_prompt_tokens({"messages": messages, "tools": tools}) == (
        9 + math.ceil(tool_chars / 4)
    )


def test_body_without_messages_estimates_the_empty_list():
    assert estimate_prompt_tokens({}) == 1  # "[]"


# --- cost_usd -----------------------------------------------------------------------


def test_cost_is_prompt_and_completion_at_their_prices(make_model):
    # Spec 03 §10 example 9: R_in 1000, max_tokens 100 at 0.05 / 0.40 -> $0.00009.
    model = make_model(input_cost=0.05, output_cost=0.40)

    assert cost_usd(model, (1000, 100, 0, 0)) == Decimal("0.0000900000")


def test_cached_and_written_tokens_use_their_own_prices(make_model):
    model = make_model(
        input_cost=3.0, output_cost=15.0, cache_read_cost=0.3, cache_write_cost=3.75
    )

    # (500 * 3 + 200 * 0.3 + 300 * 3.75 + 100 * 15) / 1e6
    assert cost_usd(model, (1000, 100, 200, 300)) == Decimal("0.0041850000")


def test_missing_cache_prices_fall_back_to_the_input_price(make_model):
    model = make_model(input_cost=2.0, output_cost=8.0)

    # (1000 * 2 + 100 * 8) / 1e6: cached and written tokens at the input price
    assert cost_usd(model, (1000, 100, 200, 300)) == Decimal("0.0028000000")


def test_cost_is_exact_decimal_with_ten_places(make_model):
    model = make_model(input_cost=0.1, output_cost=0.2)

    result = cost_usd(model, (3, 3, 0, 0))

    assert result == Decimal("0.0000009000")
    assert result.as_tuple().exponent == -10


def test_zero_tokens_at_a_known_price_cost_zero(make_model):
    assert cost_usd(make_model(input_cost=1.0, output_cost=1.0), (0, 0, 0, 0)) == 0


def test_more_cached_than_prompt_tokens_never_goes_negative(make_model):
    model = make_model(input_cost=1.0, output_cost=0.0, cache_read_cost=0.5)

    assert cost_usd(model, (100, 0, 150, 0)) == Decimal("0.0000750000")


@pytest.mark.parametrize(
    "prices",
    [
        {},
        {"input_cost": 1.0},
        {"output_cost": 1.0},
        {"cache_read_cost": 0.1, "cache_write_cost": 1.0},
    ],
)
def test_unknown_price_gives_none_never_zero(make_model, prices):
    assert cost_usd(make_model(**prices), (1000, 100, 0, 0)) is None


def test_an_answer_without_output_needs_only_the_input_price(make_model):
    """Embeddings (spec 09 §5.1): billed at the input price; with output tokens an
    unknown output price still leaves the cost unknown."""
    model = make_model(input_cost=0.02, output_cost=None)

    assert cost_usd(model, (1000, 0, 0, 0)) == Decimal("0.0000200000")
    assert cost_usd(model, (1000, 5, 0, 0)) is None


def test_an_embeddings_body_is_estimated_from_its_input():
    """An upstream that reports no usage for embeddings (Gemini) is billed from the
    input's size, not as an empty chat."""
    assert estimate_prompt_tokens({"input": ["a" * 400]}) == math.ceil(404 / 4)
