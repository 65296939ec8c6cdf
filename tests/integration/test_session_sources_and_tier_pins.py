"""Spec 05 through the real gateway: session sources and what goes upstream (§1.1),
tier headers on both endpoints streaming or not (§2.4), tier pins scoped by API key
(§1.3, E2) and the pin release of E7 (§1.4) with its metrics (§3.8)."""

from __future__ import annotations

import itertools
import time

import httpx
import pytest

pytestmark = pytest.mark.integration
_ids = itertools.count()
SECOND_KEY = "sk-or-test-audit05-second-0000000000000000000000"
CLAUDE_USER = "user_abc_account__session_0F3B2A1C-1111-2222-3333-444455556666"


@pytest.fixture(scope="module")
def tiered_gateway(gateway):
    result = gateway.apply(f"""
combos:
  - name: a5-easy
    strategy: priority
    targets: [{{model: pa/m1}}]
  - name: a5-hard
    strategy: priority
    targets: [{{model: pb/m2}}]
  - name: a5-adaptive
    strategy: adaptive
    targets: [{{model: pa/m1}}, {{model: pb/m2}}]
smart_routes:
  - alias: a5
    easy: a5-easy
    hard: a5-hard
api_keys:
  - name: audit05-second
    key: {SECOND_KEY}
""")
    assert result.returncode == 0, result.stderr
    yield gateway
    gateway.apply("settings: {}\n")


def _logged(gateway, before: int):
    deadline = time.monotonic() + 3
    while True:
        rows = gateway.requests_log()
        if len(rows) > before or time.monotonic() > deadline:
            return rows[-1]
        time.sleep(0.05)


@pytest.mark.parametrize(
    ("headers", "body", "session", "source"),
    [
        ({"Session_id": "s-under"}, {}, "s-under", "header:session-id"),
        (
            {"Agent-Session-Id": "ag"},
            {"session_id": "b"},
            "ag",
            "header:agent-session-id",
        ),
        ({"X-Session-Id": "x" * 201}, {"session_id": "b1"}, "b1", "body:session_id"),
        (
            {},
            {"metadata": {"user_id": CLAUDE_USER}},
            "0F3B2A1C-1111-2222-3333-444455556666",
            "body:metadata.user_id",
        ),
        (
            {},
            {"litellm_session_id": "lit", "prompt_cache_key": "pck"},
            "lit",
            "body:litellm_session_id",
        ),
        ({}, {"prompt_cache_key": "pck", "user": "u1"}, "pck", "body:prompt_cache_key"),
    ],
)
def test_session_sources_are_logged_and_never_forwarded(
    tiered_gateway, client, upstream, headers, body, session, source
):
    before = len(tiered_gateway.requests_log())
    response = client.post(
        "/v1/chat/completions",
        headers=headers,
        json={
            "model": "pa/m1",
            "messages": [{"role": "user", "content": "hi"}],
            **body,
        },
    )
    assert response.status_code == 200, response.text
    row = _logged(tiered_gateway, before)
    assert (row["session_id"], row["session_source"]) == (session, source)
    sent = upstream.requests()[-1]
    assert "session_id" not in sent["body"]
    assert "litellm_session_id" not in sent["body"]
    assert sent["body"].get("metadata") == body.get("metadata")
    assert sent["body"].get("prompt_cache_key") == body.get("prompt_cache_key")
    assert not [name for name in sent["headers"] if "session" in name.lower()]


@pytest.mark.parametrize("path", ["/v1/chat/completions", "/chat/completions"])
@pytest.mark.parametrize("stream", [False, True])
def test_tier_headers_on_both_endpoints_streaming_or_not(
    tiered_gateway, client, upstream, path, stream
):
    response = client.post(
        path,
        headers={"X-OmniRoute-Tier": "medium"},  # ignored: signal header_ignored
        json={
            "model": "a5",
            "stream": stream,
            "messages": [{"role": "user", "content": f"hi {next(_ids)}"}],
        },
    )
    assert response.status_code == 200, response.text
    assert response.headers["x-omniroute-tier"] == "easy"
    assert response.headers["x-omniroute-tier-target"] == "a5-easy"
    assert response.headers["x-omniroute-tier-score"] == "0"
    assert "x-omniroute-tier-mode" not in response.headers
    text = httpx.get(f"{tiered_gateway.url}/metrics").text
    assert 'omniroute_smartroute_signals_total{alias="a5",signal="header_ignored"}' in (
        text
    )


def _tier(client, session: str, content: str, key: str | None = None) -> str:
    headers = {"X-Session-Id": session}
    if key is not None:
        headers["Authorization"] = f"Bearer {key}"
    response = client.post(
        "/v1/chat/completions",
        headers=headers,
        json={"model": "a5", "messages": [{"role": "user", "content": content}]},
    )
    assert response.status_code == 200, response.text
    return response.headers["x-omniroute-tier"]


def test_e2_the_tier_pin_belongs_to_the_key(tiered_gateway, client, upstream):
    session = f"e2-{next(_ids)}"
    assert _tier(client, session, "think step by step") == "hard"
    assert _tier(client, session, "thanks!") == "hard"  # session_pin
    assert _tier(client, session, "thanks!", key=SECOND_KEY) == "easy"


def _metric(gateway, series: str) -> float:
    for line in httpx.get(f"{gateway.url}/metrics").text.splitlines():
        if line.startswith(series + " "):
            return float(line.rsplit(" ", 1)[1])
    return 0.0


def _served(client, session: str) -> str:
    response = client.post(
        "/v1/chat/completions",
        headers={"X-Session-Id": session},
        json={
            "model": "a5-adaptive",
            "messages": [{"role": "user", "content": f"hi {next(_ids)}"}],
        },
    )
    assert response.status_code == 200, response.text
    return response.json()["omniroute"]["served_model"]


def _affinity(outcome: str) -> str:
    return (
        "omniroute_routing_session_affinity_total"
        f'{{combo="a5-adaptive",outcome="{outcome}"}}'
    )


def test_e7_pin_release(tiered_gateway, client, upstream):
    session = f"e7-{next(_ids)}"
    a = _served(client, session)
    b = "pb/m2" if a == "pa/m1" else "pa/m1"
    released = _metric(tiered_gateway, _affinity("released"))
    upstream.add(a.split("/")[1], status=429, headers={"retry-after": "1"}, times=1)
    assert _served(client, session) == b  # A cools, the pin is released, B serves
    assert _metric(tiered_gateway, _affinity("released")) == released + 1
    time.sleep(1.2)  # A has recovered
    honored = _metric(tiered_gateway, _affinity("honored"))
    assert {_served(client, session) for _ in range(4)} == {b}
    assert _metric(tiered_gateway, _affinity("honored")) == honored + 4
    upstream.add(b.split("/")[1], status=401, times=1)
    assert _served(client, session) == a  # B auth-disabled: released, A serves
    assert _metric(tiered_gateway, _affinity("released")) == released + 2
    assert _served(client, session) == a
