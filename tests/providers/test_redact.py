"""The providers app's message masking matches spec 06 §1.4."""

from __future__ import annotations

import pytest

from providers.redact import redact


@pytest.mark.parametrize(
    ("raw", "masked"),
    [
        ("Authorization: Bearer abc.DEF-123", "Authorization: ***"),
        ("got Bearer abc.DEF-123 back", "got Bearer *** back"),
        ("key sk-abcdefghijklmnop1234 leaked", "key *** leaked"),
        ("key sk-or-abcdefghijklmnop1234 leaked", "key *** leaked"),
        ("sk-short stays", "sk-short stays"),
        ("GET https://x.test/a?key=s3cret&b=1", "GET https://x.test/a?key=***&b=1"),
        ("GET /a?api_key=s3cret", "GET /a?api_key=***"),
        ("GET /a?token=s3cret", "GET /a?token=***"),
        ("x-api-key: abc123", "x-api-key: ***"),
        ("line\nbreak\tand\x00nul", "line break andnul"),
    ],
)
def test_credentials_are_masked_and_control_characters_removed(
    raw: str, masked: str
) -> None:
    assert redact(raw) == masked


def test_messages_are_cut_to_1000_characters() -> None:
    assert len(redact("a" * 2000)) == 1000
