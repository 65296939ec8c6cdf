"""The one sanitiser for stored, published and returned messages (spec 06 §1.4)."""

import logging

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from telemetry.sanitize import (
    MAX_MESSAGE_CHARS,
    RedactingFilter,
    sanitize,
    set_known_secrets,
)

KEY = "sk-" + "a1B2c3D4e5F6g7H8"  # 16 key characters after the prefix


@pytest.fixture
def known_secrets():
    """``known_secrets("v1", ...)`` configures provider secrets for one test."""
    yield set_known_secrets
    set_known_secrets(())


# --- masking ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("message", "expected"),
    [
        (
            "Authorization failed for Bearer abc.DEF-123_~+/=",
            "Authorization failed for Bearer ***",
        ),
        ("bearer    tok123 rejected", "Bearer *** rejected"),
        ("BEARER tok", "Bearer ***"),
    ],
)
def test_bearer_tokens_are_masked(message, expected):
    assert sanitize(message) == expected


@pytest.mark.parametrize(
    ("message", "expected"),
    [
        (f"Incorrect API key provided: {KEY}.", "Incorrect API key provided: ***."),
        ("key sk-or-v1-0123456789abcdef0123 invalid", "key *** invalid"),
        ("sk-proj-AbCdEfGhIjKlMnOpQrSt", "***"),
        ("sk-ant-api03-" + "x" * 40, "***"),
        (f'{{"api_key": "{KEY}"}}', '{"api_key": "***"}'),
    ],
)
def test_api_key_shaped_values_are_masked(message, expected):
    assert sanitize(message) == expected


@pytest.mark.parametrize(
    "message",
    [
        "sk-short123",  # fewer than 16 key characters
        "task-abcdefghijklmnopqrstuvwxyz",  # sk- inside a word
        "risk-free",
    ],
)
def test_values_not_shaped_like_keys_are_kept(message):
    assert sanitize(message) == message


@pytest.mark.parametrize(
    ("message", "expected"),
    [
        ("GET /v1/models?key=AIzaSyXYZ&alt=json", "GET /v1/models?key=***&alt=json"),
        ("https://h/x?api_key=abc123 failed", "https://h/x?api_key=*** failed"),
        ("https://h/x?a=1&token=t0k3n", "https://h/x?a=1&token=***"),
        ("?API_KEY=abc", "?API_KEY=***"),
        ("?access_token=abc&x=1", "?access_token=***&x=1"),
        ("url 'https://h/?key=v' bad", "url 'https://h/?key=***' bad"),
    ],
)
def test_key_api_key_and_token_query_values_are_masked(message, expected):
    assert sanitize(message) == expected


def test_ordinary_parameters_are_kept():
    message = "https://h/x?model=gpt-4o&max_tokens=100&monkey=1"

    assert sanitize(message) == message


@pytest.mark.parametrize(
    ("message", "expected"),
    [
        ("x-api-key: secret-value rejected", "x-api-key: *** rejected"),
        ('{"authorization": "Basic dXNlcg=="}', '{"authorization": "***"}'),
        ("Authorization: Bearer abc123 denied", "Authorization: *** denied"),
        ("cookie=session-abc", "cookie=***"),
    ],
)
def test_credential_headers_are_masked(message, expected):
    assert sanitize(message) == expected


def test_configured_secrets_are_masked_wherever_they_appear(known_secrets):
    known_secrets(["hunter2-provider-secret", None, "", "abc"])

    result = sanitize("upstream said: bad key hunter2-provider-secret (abc)")

    assert result == "upstream said: bad key *** (abc)"


def test_longer_configured_secret_is_masked_before_its_prefix(known_secrets):
    known_secrets(["s3cr3t", "s3cr3t-extended"])

    assert sanitize("got s3cr3t-extended and s3cr3t") == "got *** and ***"


def test_clearing_configured_secrets_stops_masking_them(known_secrets):
    known_secrets(["s3cr3t-value"])
    known_secrets([])

    assert sanitize("s3cr3t-value") == "s3cr3t-value"


# --- control characters and length -------------------------------------------------


def test_control_characters_are_removed():
    assert sanitize("a\x00b\x07c\x1bd\x7fe\x85f\x9fg") == "abcdefg"


def test_line_breaks_and_tabs_become_single_spaces():
    assert sanitize("line one\r\nline two\n\n\tend") == "line one line two end"


def test_control_character_inside_a_key_cannot_hide_it():
    assert sanitize("sk-abcdefgh\x00ijklmnopqrst") == "***"


def test_unicode_text_is_kept():
    assert (
        sanitize("Modèle introuvable — 模型不存在 🚫")
        == "Modèle introuvable — 模型不存在 🚫"
    )


def test_result_is_cut_to_1000_characters():
    result = sanitize("x" * 5000)

    assert MAX_MESSAGE_CHARS == 1000
    assert result == "x" * 1000


def test_masking_happens_before_the_cut():
    message = "x" * 990 + " " + KEY

    assert sanitize(message) == "x" * 990 + " ***"


def test_non_string_messages_are_rendered_first():
    assert sanitize(ValueError(f"bad {KEY}")) == "bad ***"


@settings(max_examples=200, deadline=None, database=None)
@given(prefix=st.text(max_size=300), suffix=st.text(max_size=300))
def test_any_text_around_a_key_never_leaks_it_or_a_control_character(prefix, suffix):
    result = sanitize(f"{prefix} {KEY} {suffix}")

    assert KEY not in result
    assert len(result) <= MAX_MESSAGE_CHARS
    assert not any(ord(c) < 0x20 or 0x7F <= ord(c) <= 0x9F for c in result)


# --- the logging filter -------------------------------------------------------------


def test_logging_filter_sanitises_the_rendered_message():
    record = logging.LogRecord(
        "x", logging.WARNING, __file__, 1, "auth failed: %s\n%s", (KEY, "next"), None
    )

    assert RedactingFilter().filter(record) is True
    assert record.getMessage() == "auth failed: *** next"
    assert record.args is None


def test_logging_filter_keeps_long_messages_up_to_10000_characters():
    record = logging.LogRecord("x", logging.INFO, __file__, 1, "y" * 20_000, None, None)

    RedactingFilter().filter(record)

    assert record.getMessage() == "y" * 10_000


def test_a_vetted_record_keeps_a_key_name_but_not_a_secret(known_secrets):
    known_secrets(["upstream-secret-1234"])
    message = (
        '{"event":"model_failover","api_key":"ci-team",'
        f'"note":"{KEY} upstream-secret-1234"}}'
    )
    vetted = logging.LogRecord("x", logging.INFO, __file__, 1, message, None, None)
    vetted.omniroute_vetted = True
    plain = logging.LogRecord("x", logging.INFO, __file__, 1, message, None, None)

    RedactingFilter().filter(vetted)
    RedactingFilter().filter(plain)

    assert vetted.getMessage() == (
        '{"event":"model_failover","api_key":"ci-team","note":"*** ***"}'
    )
    assert '"api_key":"***"' in plain.getMessage()


# --- secrets echoed in another form (issue #16 point 5) ------------------------------

SECRET = "Upstream-Secret-9f8e7d6c5b4a"


@pytest.mark.parametrize("form", [SECRET.lower(), SECRET.upper(), SECRET.swapcase()])
def test_a_secret_in_another_letter_case_is_masked(known_secrets, form):
    known_secrets([SECRET])
    assert sanitize(f"upstream said: invalid key {form}!") == (
        "upstream said: invalid key ***!"
    )


@pytest.mark.parametrize("lead", [b"", b"x", b"xy", b'{"key": "'])
@pytest.mark.parametrize("urlsafe", [False, True])
def test_a_secret_inside_base64_text_is_masked(known_secrets, lead, urlsafe):
    import base64

    known_secrets([SECRET])
    data = lead + SECRET.encode() + b'", "more": 1}'
    encode = base64.urlsafe_b64encode if urlsafe else base64.b64encode
    text = encode(data).decode()
    masked = sanitize(f"echo: {text}")
    assert "***" in masked
    # what is left of the encoding no longer decodes to the secret
    for piece in masked.split():
        assert SECRET.encode() not in base64.b64decode(piece + "===", altchars=b"-_")


@pytest.mark.parametrize("joiner", ["\u200b", "\u200c", "\u200d", "\u2060", "\ufeff"])
def test_a_secret_split_by_zero_width_characters_is_masked(known_secrets, joiner):
    known_secrets([SECRET])
    split = joiner.join(SECRET)
    assert sanitize(f"key {split} end") == "key *** end"


def test_an_upper_case_key_shape_is_masked():
    assert sanitize("SK-OR-" + "A1B2C3D4E5F6G7H8I9") == "***"


def test_the_requested_model_and_session_are_stored_sanitised(known_secrets):
    import uuid

    from gateway.kernel.types import KeyPolicy
    from gateway.pipeline.record import RunRecord

    known_secrets([SECRET])
    rec = RunRecord.start(
        uuid.uuid4(), "chat", KeyPolicy(id=1, name="k", prefix="p"), 1, 0.0, 0.0
    )
    rec.requested_model = SECRET.lower()
    rec.session_id = "sk-or-" + "z" * 40
    request, _ = rec.rows()
    assert request["requested_model"] == "***"
    assert request["session_id"] == "***"
