"""Rate-limit header readings (spec 03 §8.5 source 1)."""

from __future__ import annotations

import pytest

from gateway.kernel.ratelimits import Reading, parse, parse_duration

NOW = 1_700_000_000.0


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("1s", 1.0),
        ("6m0s", 360.0),
        ("20ms", 0.02),
        ("1h2m3.5s", 3723.5),
        ("2.5", 2.5),
        ("", None),
        ("soon", None),
        ("5x", None),
    ],
)
def test_durations(text, seconds):
    assert parse_duration(text) == seconds


def test_openai_headers_take_the_lowest_ratio():
    headers = [
        ("x-ratelimit-limit-requests", "100"),
        ("x-ratelimit-remaining-requests", "50"),
        ("x-ratelimit-reset-requests", "1s"),
        ("x-ratelimit-limit-tokens", "1000"),
        ("x-ratelimit-remaining-tokens", "100"),
        ("x-ratelimit-reset-tokens", "6m0s"),
    ]
    assert parse(headers, NOW) == Reading(0.1, NOW + 360)


def test_anthropic_headers_with_rfc3339_resets():
    headers = [
        ("anthropic-ratelimit-requests-limit", "50"),
        ("anthropic-ratelimit-requests-remaining", "49"),
        ("anthropic-ratelimit-requests-reset", "2023-11-14T22:14:00Z"),
        ("anthropic-ratelimit-output-tokens-limit", "8000"),
        ("anthropic-ratelimit-output-tokens-remaining", "2000"),
        ("anthropic-ratelimit-output-tokens-reset", "2023-11-14T22:15:00Z"),
    ]
    reading = parse(headers, NOW)
    assert reading is not None
    assert reading.remaining == 0.25
    assert reading.resets_at == 1_700_000_100.0


def test_incomplete_or_unrelated_headers_give_no_reading():
    assert parse([("x-ratelimit-remaining-requests", "5")], NOW) is None
    assert parse([("content-type", "application/json")], NOW) is None
    assert (
        parse(
            [
                ("x-ratelimit-limit-requests", "0"),
                ("x-ratelimit-remaining-requests", "0"),
            ],
            NOW,
        )
        is None
    )


def test_an_unparseable_reset_keeps_the_ratio():
    headers = [
        ("x-ratelimit-limit-requests", "10"),
        ("x-ratelimit-remaining-requests", "0"),
        ("x-ratelimit-reset-requests", "later"),
    ]
    assert parse(headers, NOW) == Reading(0.0, None)
