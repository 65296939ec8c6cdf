"""Outcome classification: every row of spec 02 §6.1."""

import pytest

from gateway.kernel.errors import (
    RETRYABLE_REASONS,
    Classification,
    FailureDetail,
    FailureReason,
    TransportFailure,
    UpstreamError,
    bad_response,
    classify_status,
    classify_stream_error,
    classify_transport,
    empty_stream,
)

NO_ERROR = UpstreamError()


def _status(status, message="", code=None):
    return classify_status(status, UpstreamError(message=message, code=code))


def _pair(classification):
    return (
        classification.reason.value,
        classification.detail.value if classification.detail else None,
    )


# --- transport failures -------------------------------------------------------------


@pytest.mark.parametrize(
    ("failure", "expected"),
    [
        (TransportFailure.CONNECT, ("connection_error", None)),
        (TransportFailure.RESET, ("connection_error", None)),
        (TransportFailure.TIMEOUT, ("timeout", None)),
        (TransportFailure.FIRST_TOKEN_TIMEOUT, ("timeout", "first_token")),
        (TransportFailure.IDLE_TIMEOUT, ("timeout", "idle")),
    ],
)
def test_transport_failure_maps_to_its_reason_and_detail(failure, expected):
    assert _pair(classify_transport(failure)) == expected


# --- HTTP statuses ------------------------------------------------------------------


@pytest.mark.parametrize("status", [500, 501, 502, 503, 504, 529, 599])
def test_5xx_is_server_error_without_detail(status):
    assert classify_status(status, NO_ERROR) == Classification(
        FailureReason.SERVER_ERROR
    )


def test_5xx_is_server_error_whatever_its_message_says():
    assert _pair(_status(503, "model does not exist; context length")) == (
        "server_error",
        None,
    )


def test_429_is_rate_limit():
    assert _pair(_status(429, "slow down")) == ("rate_limit", None)


@pytest.mark.parametrize("status", [401, 403])
def test_401_and_403_are_auth_failed(status):
    assert _pair(_status(status)) == ("server_error", "auth_failed")


def test_402_is_payment_required():
    assert _pair(_status(402)) == ("server_error", "payment_required")


@pytest.mark.parametrize("status", [404, 410])
def test_404_and_410_are_model_not_found(status):
    assert _pair(_status(status, "no route")) == ("server_error", "model_not_found")


def test_408_is_timeout():
    assert _pair(_status(408)) == ("timeout", None)


def test_413_is_context_length():
    assert _pair(_status(413)) == ("context_length", None)


@pytest.mark.parametrize("status", [400, 422])
def test_rejection_with_code_model_not_found_is_model_not_found(status):
    assert _pair(_status(status, "whatever", code="model_not_found")) == (
        "server_error",
        "model_not_found",
    )


@pytest.mark.parametrize("status", [400, 422])
@pytest.mark.parametrize(
    "message",
    [
        "The model `gpt-9` does not exist or you do not have access to it.",
        "model gpt-9 does not exist",
        "Model not found: gpt-9",
        "models/gemini-9 is not found for API version v1beta",
        "The requested model is not supported.",
        "The model is unsupported in this region",
        "This model is currently unavailable",
        "The model gpt-3 has been deprecated",
        "The model `text-davinci-003` has been decommissioned",
        "The model is not available on your plan",
        "Unknown model: gpt-9",
        "Invalid model 'gpt-9'",
        "unsupported model",
        "No such model",
        "MODEL DOES NOT EXIST",
    ],
)
def test_rejection_saying_the_model_is_missing_is_model_not_found(status, message):
    assert _pair(_status(status, message)) == ("server_error", "model_not_found")


@pytest.mark.parametrize("status", [400, 422])
def test_rejection_with_code_context_length_exceeded_is_context_length(status):
    assert _pair(_status(status, "nope", code="context_length_exceeded")) == (
        "context_length",
        None,
    )


@pytest.mark.parametrize("status", [400, 422])
@pytest.mark.parametrize(
    "message",
    [
        "This model's maximum context length is 8192 tokens. However, your messages "
        "resulted in 9000 tokens. Please reduce the length of the messages.",
        "prompt is too long: 210000 tokens > 200000 maximum",
        "input length and `max_tokens` exceed context limit: 197626 + 8192 > 200000",
        "The input exceeds the context window of this model",
        "Too many tokens in the request",
        "Input is too long for requested model.",
        "CONTEXT LENGTH EXCEEDED",
        "Prompt too long",
        "The input token count (1200000) exceeds the maximum number of tokens "
        "allowed (1048576).",
    ],
)
def test_rejection_about_the_context_window_is_context_length(status, message):
    assert _pair(_status(status, message)) == ("context_length", None)


def test_explicit_code_outranks_the_wording_of_the_message():
    assert _pair(
        _status(
            400,
            "This model's maximum context length is not supported here",
            code="context_length_exceeded",
        )
    ) == ("context_length", None)
    assert _pair(
        _status(400, "maximum context length exceeded", code="MODEL_NOT_FOUND")
    ) == ("server_error", "model_not_found")


@pytest.mark.parametrize("status", [400, 422])
@pytest.mark.parametrize(
    "message",
    [
        "Invalid 'temperature': decimal above maximum value.",
        "Unsupported parameter: 'max_tokens' is not supported with this model. "
        "Use 'max_completion_tokens' instead.",
        "Unsupported value: 'temperature' does not support 0.5 with this model.",
        "messages: roles must alternate",
        "max_tokens is too large: 50000. This model supports at most 16384 "
        "completion tokens, whereas you provided 50000.",
        "",
    ],
)
def test_other_rejection_is_invalid_request(status, message):
    assert _pair(_status(status, message)) == ("invalid_request", None)


@pytest.mark.parametrize("status", [405, 406, 409, 411, 415, 418, 451, 499])
def test_other_4xx_is_unexpected_status(status):
    assert _pair(_status(status, "model does not exist")) == (
        "server_error",
        "unexpected_status",
    )


@pytest.mark.parametrize("status", [300, 301, 302, 304, 307, 308])
def test_3xx_is_unexpected_status(status):
    assert _pair(_status(status)) == ("server_error", "unexpected_status")


# --- stream errors and malformed replies --------------------------------------------


@pytest.mark.parametrize(
    "error",
    [
        UpstreamError(type="rate_limit_error", message="slow down"),
        UpstreamError(code="rate_limit_exceeded"),
        UpstreamError(type="error", code="RATE_LIMIT"),
    ],
)
def test_stream_error_about_rate_limits_is_rate_limit(error):
    assert _pair(classify_stream_error(error)) == ("rate_limit", None)


@pytest.mark.parametrize(
    "error",
    [
        UpstreamError(type="overloaded_error", message="Overloaded"),
        UpstreamError(type="server_error", code="context_length_exceeded"),
        UpstreamError(message="rate_limit mentioned only in the message"),
        UpstreamError(),
    ],
)
def test_other_stream_error_is_bad_response(error):
    assert _pair(classify_stream_error(error)) == ("server_error", "bad_response")


def test_unusable_200_is_bad_response_and_empty_stream_is_empty_stream():
    assert _pair(bad_response()) == ("server_error", "bad_response")
    assert _pair(empty_stream()) == ("server_error", "empty_stream")


def test_only_the_four_retryable_reasons_may_appear_in_on():
    assert [r.value for r in RETRYABLE_REASONS] == [
        "connection_error",
        "server_error",
        "rate_limit",
        "timeout",
    ]


def test_reason_and_detail_vocabularies_match_the_spec():
    assert sorted(r.value for r in FailureReason) == [
        "client_cancelled",
        "connection_error",
        "context_length",
        "invalid_request",
        "rate_limit",
        "server_error",
        "timeout",
    ]
    assert {
        "bad_response",
        "empty_stream",
        "empty_output",
        "auth_failed",
        "payment_required",
        "model_not_found",
        "unexpected_status",
        "first_token",
        "idle",
    } <= {d.value for d in FailureDetail}


@pytest.mark.parametrize("code", ["API_KEY_INVALID", "invalid_api_key"])
def test_a_400_whose_code_says_the_key_is_wrong_is_auth_failed(code):
    """Gemini answers a wrong key with 400 INVALID_ARGUMENT, reason API_KEY_INVALID:
    an auth failure (disable), not the client's bad request."""
    assert classify_status(
        400, UpstreamError(message="API key not valid", code=code)
    ) == (Classification(FailureReason.SERVER_ERROR, FailureDetail.AUTH_FAILED))
