"""The auto engine reads its per-candidate state-store records in one batch
(spec 08 §3.2: one round trip, not one per candidate)."""

from __future__ import annotations

import asyncio

import pytest

from gateway.auto import live as auto
from gateway.auto.engine.pool import AutoRoute
from providers.health import board
from providers.state_store import LocalStore
from tests.routing.test_pipeline import pool_p_table


class CountingStore(LocalStore):
    def __init__(self) -> None:
        super().__init__()
        self.gets: list[str] = []
        self.batches = 0

    def get(self, key):
        self.gets.append(key)
        return super().get(key)

    def get_many(self, keys):
        self.batches += 1
        return super().get_many(keys)


@pytest.fixture
def counting(monkeypatch):
    store = CountingStore()
    monkeypatch.setattr(board, "store", store)
    return store


def test_healing_quota_and_lkgp_are_read_in_one_batch(counting):
    table = pool_p_table()
    counting.set(
        "heal:openai/gpt-5-nano@main",
        {
            "level": 1,
            "excluded_until": 9e12,
            "probe_pending": True,
            "probe_in_flight": False,
        },
        None,
    )
    decision = asyncio.run(
        auto.plan_auto(
            table,
            auto.KeyPolicy(id=1, name="k", prefix="p"),
            AutoRoute(route_id="auto"),
            {"messages": [{"role": "user", "content": "hi"}]},
            auto.Controls(),
            "session-key",
        )
    )
    assert "openai/gpt-5-nano@main" not in [t.key for t in decision.order]
    assert counting.batches >= 1
    per_candidate = [
        k for k in counting.gets if k.startswith(("heal:", "quota:", "lkgp:"))
    ]
    assert per_candidate == []
