"""context-relay handoff helpers (spec 03 §5.17)."""

from __future__ import annotations

import pytest

from gateway.kernel import relay


def test_settings_defaults_and_values():
    assert relay.relay_settings({}) == (0.85, 30)
    assert relay.relay_settings(
        {"handoffThreshold": 0.5, "maxMessagesForSummary": 10}
    ) == (0.5, 10)
    assert relay.relay_settings({"handoffThreshold": True}) == (0.85, 30)


@pytest.mark.parametrize(
    ("remaining", "threshold", "due"),
    [
        (None, 0.85, False),
        (0.5, 0.85, False),
        (0.15, 0.85, True),  # exactly 1 - threshold
        (0.1, 0.85, True),
        (0.0, 0.85, True),
        (0.6, 0.5, False),
        (0.5, 0.5, True),
    ],
)
def test_handoff_due(remaining, threshold, due):
    assert relay.handoff_due(remaining, threshold) is due


def test_next_holder_wraps_in_declared_order():
    declared = ["a", "b", "c"]
    assert relay.next_holder(declared, "a") == "b"
    assert relay.next_holder(declared, "c") == "a"
    assert relay.next_holder(["a"], "a") is None
    assert relay.next_holder([], "a") is None
    assert relay.next_holder(declared, "x") == "a"


def test_summary_body_takes_the_last_messages():
    messages = [{"role": "user", "content": f"m{i}"} for i in range(40)]
    body = relay.summary_body(messages, 5)
    assert body["max_tokens"] == 1024
    assert body["stream"] is False
    transcript = body["messages"][1]["content"]
    assert "m35" in transcript
    assert "m39" in transcript
    assert "m34" not in transcript
    for word in ("goals", "decisions", "facts", "open tasks"):
        assert word in body["messages"][0]["content"]


def test_summary_body_reads_text_parts():
    messages = [{"role": "user", "content": [{"type": "text", "text": "part"}]}]
    assert "part" in relay.summary_body(messages, 30)["messages"][1]["content"]


def test_summary_ttl():
    assert relay.summary_ttl(1000.0, None) == 5 * 3600
    assert relay.summary_ttl(1000.0, 1600.0) == 600
    assert relay.summary_ttl(1000.0, 900.0) == 5 * 3600
    assert relay.summary_ttl(1000.0, 1000.0 + 6 * 3600) == 5 * 3600


def test_the_handoff_message_goes_after_the_leading_system_messages():
    body = {
        "model": "x",
        "messages": [
            {"role": "system", "content": "s1"},
            {"role": "developer", "content": "s2"},
            {"role": "user", "content": "u"},
            {"role": "system", "content": "late"},
        ],
    }
    out = relay.with_handoff(body, "the summary")
    assert [m["content"] for m in out["messages"]] == [
        "s1",
        "s2",
        "Context handed over from an earlier model: the summary",
        "u",
        "late",
    ]
    assert body["messages"][2]["content"] == "u"  # the input is not changed
    first = relay.with_handoff({"messages": [{"role": "user", "content": "u"}]}, "s")
    assert first["messages"][0]["role"] == "system"
