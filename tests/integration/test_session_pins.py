"""Session target pins inside pin-capable combos (spec 05 §1.4, example E7)."""

from __future__ import annotations

import itertools

import pytest

pytestmark = pytest.mark.integration
_ids = itertools.count()


@pytest.fixture(scope="module")
def pinned(gateway):
    result = gateway.apply("""
combos:
  - name: rotate
    strategy: round-robin
    config: {stickyRoundRobinLimit: 1}
    targets: [{model: pa/m1}, {model: pb/m2}]
  - name: rotate-free
    strategy: round-robin
    config: {stickyRoundRobinLimit: 1, sessionAffinity: false}
    targets: [{model: pa/m1}, {model: pb/m2}]
  - name: ordered
    strategy: priority
    targets: [{model: pa/m1}, {model: pb/m2}]
""")
    assert result.returncode == 0, result.stderr
    return gateway


def _ask(client, model: str, session: str | None):
    headers = {"X-Session-Id": session} if session else {}
    response = client.post(
        "/v1/chat/completions",
        headers=headers,
        json={
            "model": model,
            "messages": [{"role": "user", "content": f"hi {next(_ids)}"}],
        },
    )
    assert response.status_code == 200, response.text
    return response.json()["omniroute"]["served_model"]


def test_a_session_stays_on_its_pinned_target(pinned, client, upstream):
    session = f"pin-{next(_ids)}"
    first = _ask(client, "rotate", session)
    assert {_ask(client, "rotate", session) for _ in range(4)} == {first}


def test_without_affinity_the_rotation_goes_on(pinned, client, upstream):
    session = f"pin-{next(_ids)}"
    served = [_ask(client, "rotate-free", session) for _ in range(4)]
    assert set(served) == {"pa/m1", "pb/m2"}


def test_a_cooling_target_releases_the_pin(pinned, client, upstream):
    session = f"pin-{next(_ids)}"
    first = _ask(client, "rotate", session)
    other = "pb/m2" if first == "pa/m1" else "pa/m1"
    upstream.add(first.split("/")[1], status=429, headers={"retry-after": "30"})
    # the pinned target answers 429: failover serves the other one, which is pinned
    assert _ask(client, "rotate", session) == other
    upstream.reset()
    # the first target is cooling: the session stays on the new pin
    assert {_ask(client, "rotate", session) for _ in range(3)} == {other}


def test_priority_combos_never_pin(pinned, client, upstream):
    session = f"pin-{next(_ids)}"
    upstream.add("m1", status=500, times=1)
    assert _ask(client, "ordered", session) == "pb/m2"
    assert _ask(client, "ordered", session) == "pa/m1"  # back on the recovered primary
