"""``omniroute_failovers_total`` counts moves to a next target (spec 06 §2); a failure
that uses the request's last allowed call moves nowhere."""

from __future__ import annotations

import json
import time
from typing import Any

import pytest
from prometheus_client import REGISTRY

from gateway.inbound.base import serve
from gateway.inbound.chat import WIRE as CHAT
from gateway.kernel.errors import Classification, FailureReason
from gateway.kernel.types import GatewaySettings
from gateway.pipeline import upstream as proxy
from gateway.pipeline.context import ChatContext
from providers.health import board
from tests.engine.conftest import build_key, build_table

TABLE = build_table(
    {"ra": ["m1"], "rb": ["m2"]},
    settings=GatewaySettings(max_attempts_per_request=1),
)


@pytest.fixture(autouse=True)
def _clean_health():
    yield
    for connection in ("ra@main", "rb@main"):
        board.reset(connection)


def _failovers() -> float:
    return (
        REGISTRY.get_sample_value(
            "omniroute_failovers_total", {"reason": "server_error"}
        )
        or 0
    )


async def test_no_failover_is_counted_once_the_call_budget_is_spent(monkeypatch):
    called: list[str] = []

    async def dispatch(target, body, **_: Any) -> proxy.AttemptResult:
        called.append(target.model_key)
        return proxy.AttemptResult(
            started=time.perf_counter(),
            http_status=500,
            failure=Classification(FailureReason.SERVER_ERROR),
        )

    monkeypatch.setattr(proxy, "dispatch", dispatch)
    ctx = ChatContext(
        endpoint="/v1/chat/completions",
        headers={},
        table=TABLE,
        record=lambda _: None,
    )
    payload = {
        "models": ["ra/m1", "rb/m2"],
        "messages": [{"role": "user", "content": "hi"}],
    }
    before = _failovers()

    reply = await serve(CHAT, json.dumps(payload).encode(), ctx, build_key())

    assert reply.status == 502
    assert called == ["ra/m1"]  # max_attempts_per_request = 1: rb/m2 is never tried
    assert _failovers() == before
