"""Combo strategies through the real gateway (spec 03 §5, §10)."""

from __future__ import annotations

import itertools

import pytest

pytestmark = pytest.mark.integration
MESSAGES = [{"role": "user", "content": "hi"}]
_turns = itertools.count()


@pytest.fixture(scope="module")
def combos(gateway):
    result = gateway.apply("""
combos:
  - name: rr3
    strategy: round-robin
    targets: [{model: pa/m1}, {model: pb/m2}, {model: pc/m3}]
  - name: rr1
    strategy: round-robin
    config: {stickyRoundRobinLimit: 1}
    targets: [{model: pa/m1}, {model: pb/m2}, {model: pc/m3}]
  - name: heavy
    strategy: weighted
    targets: [{model: pa/m1, weight: 100}, {model: pb/m2, weight: 0}]
  - name: thrifty
    strategy: cost-optimized
    targets: [{model: pb/m2}, {model: pa/m1}]
""")
    assert result.returncode == 0, result.stderr
    return gateway


def _served(client, model: str) -> str:
    # a new conversation each time: a session would keep its pinned target (05 §1.4)
    messages = [{"role": "user", "content": f"hi #{next(_turns)}"}]
    response = client.post(
        "/v1/chat/completions", json={"model": model, "messages": messages}
    )
    assert response.status_code == 200, response.text
    return response.json()["omniroute"]["served_model"]


def test_round_robin_serves_sticky_batches_of_three(combos, client, upstream):
    served = [_served(client, "rr3") for _ in range(9)]
    assert served == ["pa/m1"] * 3 + ["pb/m2"] * 3 + ["pc/m3"] * 3


def test_round_robin_with_limit_one_rotates_every_request(combos, client, upstream):
    served = [_served(client, "rr1") for _ in range(4)]
    assert served == ["pa/m1", "pb/m2", "pc/m3", "pa/m1"]


def test_weighted_never_draws_a_zero_weight_while_another_is_positive(
    combos, client, upstream
):
    assert {_served(client, "heavy") for _ in range(20)} == {"pa/m1"}


def test_cost_optimized_puts_the_cheapest_first(combos, client, upstream):
    response = client.post(
        "/v1/chat/completions",
        json={"model": "thrifty", "messages": MESSAGES, "max_tokens": 100},
    )
    omni = response.json()["omniroute"]
    assert (omni["served_model"], omni["strategy"]) == ("pa/m1", "cost-optimized")


def test_a_failing_primary_falls_back_in_strategy_order(combos, client, upstream):
    upstream.add("m1", status=500)
    served = _served(client, "thrifty")
    assert served == "pb/m2"
    request = combos.requests_log()[-1]
    rows = combos.attempts_log(request["id"])
    assert [(r["target"], r["result"], r["via"]) for r in rows] == [
        ("pa/m1@main", "server_error", "thrifty"),
        ("pb/m2@main", "success", "thrifty"),
    ]


def test_a_filtered_target_is_listed_as_a_skip_before_the_calls(
    combos, client, upstream
):
    upstream.add("m1", status=503)
    for _ in range(5):
        client.post(
            "/v1/chat/completions", json={"model": "pa/m1", "messages": MESSAGES}
        )
    response = client.post(
        "/v1/chat/completions",
        json={"models": ["thrifty", "pc/m3"], "messages": MESSAGES},
    )
    attempts = response.json()["omniroute"]["failover"]["attempts"]
    assert [(a["model"], a["status"], a["reason"], a["via"]) for a in attempts[:2]] == [
        ("pa/m1", "skipped", "circuit_open", "thrifty"),
        ("pb/m2", "served", None, "thrifty"),
    ]
