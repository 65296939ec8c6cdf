"""context-relay: the session's holder, the background handoff (spec 03 §5.17)."""

from __future__ import annotations

import time

import pytest

pytestmark = pytest.mark.integration
LOW_QUOTA = {
    "x-ratelimit-limit-requests": "100",
    "x-ratelimit-remaining-requests": "10",
    "x-ratelimit-reset-requests": "1m0s",
}
HIGH_QUOTA = {
    "x-ratelimit-limit-requests": "100",
    "x-ratelimit-remaining-requests": "90",
    "x-ratelimit-reset-requests": "1m0s",
}
PREFIX = "Context handed over from an earlier model: "


@pytest.fixture(scope="module")
def relays(gateway):
    result = gateway.apply("""
combos:
  - name: relay-chat
    strategy: context-relay
    config: {handoffThreshold: 0.5, maxMessagesForSummary: 5}
    targets: [{model: pa/m1}, {model: pb/m2}]
""")
    assert result.returncode == 0, result.stderr
    return gateway


def _ask(client, session: str, text: str):
    return client.post(
        "/v1/chat/completions",
        headers={"X-Session-Id": session},
        json={
            "model": "relay-chat",
            "messages": [
                {"role": "system", "content": "be brief"},
                {"role": "user", "content": text},
            ],
        },
    )


def _calls(upstream, model: str) -> list[dict]:
    return [r["body"] for r in upstream.requests() if r["model"] == model]


def _wait_for(predicate, seconds: float = 5.0) -> None:
    deadline = time.monotonic() + seconds
    while not predicate():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)


def test_low_quota_hands_the_session_over_with_a_summary(relays, client, upstream):
    upstream.add("m1", content="first answer", headers=LOW_QUOTA, times=1)
    upstream.add("m1", content="GOALS: ship it", headers=LOW_QUOTA)
    upstream.add("m2", content="second answer")
    first = _ask(client, "relay-1", "hello")
    assert first.status_code == 200, first.text
    assert first.json()["model"] == "pa/m1"
    # the summary call runs in the background, on the model that served
    _wait_for(lambda: len(_calls(upstream, "m1")) == 2)
    summary_call = _calls(upstream, "m1")[1]
    assert summary_call["max_tokens"] == 1024
    assert summary_call.get("stream") in (False, None)
    assert "hello" in summary_call["messages"][-1]["content"]
    time.sleep(0.3)  # the holder moves once the summary is stored

    second = _ask(client, "relay-1", "and now?")
    assert second.status_code == 200, second.text
    assert second.json()["model"] == "pb/m2"
    [body] = _calls(upstream, "m2")
    assert [m["role"] for m in body["messages"]] == ["system", "system", "user"]
    assert body["messages"][1]["content"] == PREFIX + "GOALS: ship it"


def test_healthy_quota_keeps_the_holder(relays, client, upstream):
    upstream.add("m1", content="fine", headers=HIGH_QUOTA)
    for _ in range(2):
        response = _ask(client, "relay-2", "hi")
        assert response.status_code == 200
        assert response.json()["model"] == "pa/m1"
    time.sleep(0.3)
    assert len(_calls(upstream, "m1")) == 2
    assert "m2" not in {r["model"] for r in upstream.requests()}


def test_a_failed_summary_is_dropped(relays, client, upstream):
    upstream.add("m1", content="answer", headers=LOW_QUOTA, times=1)
    upstream.add("m1", status=500)
    response = _ask(client, "relay-3", "hello")
    assert response.status_code == 200
    _wait_for(lambda: len(_calls(upstream, "m1")) == 2)
    time.sleep(0.3)
    upstream.add("m1", content="still here")
    again = _ask(client, "relay-3", "hello again")
    assert again.json()["model"] == "pa/m1"  # the holder did not move
    assert "Context handed over" not in str(_calls(upstream, "m1")[-1]["messages"])
