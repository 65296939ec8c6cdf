"""``strategy: adaptive`` through the real gateway (spec 05 §3): traffic shifts
away from a slow or cooling target and comes back when it recovers."""

from __future__ import annotations

import itertools

import httpx
import pytest

pytestmark = pytest.mark.integration
_turns = itertools.count()


@pytest.fixture(scope="module")
def adaptive_combo(gateway):
    # no trickle (spec 05 §3.5 step 5): these tests follow the comparison alone
    result = gateway.apply("""
settings:
  adaptive: {trickle_fraction: 0}
combos:
  - name: nimble
    strategy: adaptive
    config: {objective: latency}
    targets: [{model: pa/m1}, {model: pb/m2}]
""")
    assert result.returncode == 0, result.stderr
    yield gateway
    gateway.apply("settings: {}\n")


def _served(client) -> str:
    response = client.post(
        "/v1/chat/completions",
        json={
            "model": "nimble",
            "messages": [{"role": "user", "content": f"hi #{next(_turns)}"}],
        },
    )
    assert response.status_code == 200, response.text
    omni = response.json()["omniroute"]
    assert omni["strategy"] == "adaptive"
    return omni["served_model"]


def test_traffic_moves_to_the_faster_target(adaptive_combo, client, upstream):
    upstream.add("m1", latency_ms=300)
    served = [_served(client) for _ in range(20)]
    # once both are measured, m2 has the lower load in every comparison
    assert served[-6:] == ["pb/m2"] * 6, served


def test_traffic_leaves_a_cooling_target_and_comes_back(
    adaptive_combo, client, upstream
):
    for _ in range(4):
        _served(client)
    upstream.add("m2", status=429, headers={"retry-after": "60"})
    upstream.add("m1", latency_ms=100)
    assert {_served(client) for _ in range(6)} == {"pa/m1"}
    upstream.reset()
    # m2's cooldown is over; resetting health also forgets both estimates, and a
    # target not measured since counts as the pool default (the lower median of
    # the fresh estimates), so it ties and wins half of the draws (§3.2, §3.5)
    adaptive_combo.reset_health()
    upstream.add("m1", latency_ms=200)
    served = [_served(client) for _ in range(24)]  # P(m2 never drawn) = 2**-24
    assert "pb/m2" in served, served
    measured = max(served.index(t) for t in set(served))  # both sampled again
    # from then on the fast m2 wins every comparison
    assert set(served[measured + 1 :]) == {"pb/m2"}, served


def test_every_target_cooling_still_calls_the_one_that_recovers_first(
    adaptive_combo, client, upstream
):
    upstream.add("m1", status=429, headers={"retry-after": "20"}, times=1)
    upstream.add("m2", status=429, headers={"retry-after": "40"}, times=1)
    first = client.post(
        "/v1/chat/completions",
        json={"model": "nimble", "messages": [{"role": "user", "content": "x"}]},
    )
    assert first.status_code == 429
    # both cool now; the next request is still sent, to m1 (cooling ends first)
    assert _served(client) == "pa/m1"


def test_routing_metrics_are_exported(adaptive_combo, client, upstream):
    _served(client)
    text = httpx.get(f"{adaptive_combo.url}/metrics").text
    assert "omniroute_routing_selections_total" in text
    assert 'combo="nimble"' in text
