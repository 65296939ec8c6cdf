"""The attempt loop against spec 02 §6.3, §7, §11, §12, with a scripted upstream: a skip
found at the call never stops the loop, ``omniroute_failovers_total`` counts moves to a
next target only, the skips of a served request go to its request row, and the
``model_failover`` event names the entries as sent."""

from __future__ import annotations

import json
import time
import uuid
from typing import Any

import pytest
from prometheus_client import REGISTRY

from gateway.inbound.base import serve
from gateway.inbound.chat import WIRE as CHAT
from gateway.kernel.chain import EntrySpec, Slot
from gateway.kernel.errors import Classification, FailureReason
from gateway.kernel.failover import Item
from gateway.kernel.resolve import resolve
from gateway.pipeline import upstream as proxy
from gateway.pipeline.context import ChatContext
from gateway.pipeline.record import RunRecord
from gateway.pipeline.report import model_failover
from gateway.pipeline.run import Run
from providers.health import board
from tests.engine.conftest import build_key, build_table

TABLE = build_table({"qa": ["m1"], "qb": ["m2"]}, combos={"team": ["qa/m1", "qb/m2"]})
KEY = build_key()


@pytest.fixture(autouse=True)
def _clean_health():
    yield
    for connection in ("qa@main", "qb@main"):
        board.reset(connection)


def _served(status: int = 200) -> proxy.AttemptResult:
    completion = {
        "id": "c1",
        "object": "chat.completion",
        "created": 1,
        "model": "x",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": "ok"}}],
    }
    return proxy.AttemptResult(
        started=time.perf_counter(), http_status=status, completion=completion
    )


def _failed(status: int) -> proxy.AttemptResult:
    return proxy.AttemptResult(
        started=time.perf_counter(),
        http_status=status,
        failure=Classification(FailureReason.SERVER_ERROR),
    )


def _script(monkeypatch, replies: dict[str, proxy.AttemptResult]) -> list[str]:
    called: list[str] = []

    async def dispatch(target, body, **_: Any) -> proxy.AttemptResult:
        called.append(target.model_key)
        return replies[target.model_key]

    monkeypatch.setattr(proxy, "dispatch", dispatch)
    return called


async def _ask(body: dict[str, Any]) -> tuple[Any, list[RunRecord]]:
    records: list[RunRecord] = []
    ctx = ChatContext(
        endpoint="/v1/chat/completions",
        headers={},
        table=TABLE,
        record=records.append,
    )
    payload = {"messages": [{"role": "user", "content": "hi"}], **body}
    reply = await serve(CHAT, json.dumps(payload).encode(), ctx, KEY)
    return reply, records


def _failovers(reason: str) -> float:
    return (
        REGISTRY.get_sample_value("omniroute_failovers_total", {"reason": reason}) or 0
    )


async def test_a_skip_found_at_the_call_never_stops_the_loop(monkeypatch):
    called = _script(monkeypatch, {"qb/m2": _served()})
    real_begin = board.begin

    def begin(connection: str, now: float, timeout_s: float) -> bool:
        # another request took the half-open probe between the check and the call
        if connection == "qa@main":
            return False
        return real_begin(connection, now, timeout_s)

    monkeypatch.setattr(board, "begin", begin)

    reply, _ = await _ask({"models": ["qa/m1", "qb/m2"], "redundancy": {"on": []}})

    assert reply.status == 200
    attempts = json.loads(reply.body)["omniroute"]["failover"]["attempts"]
    assert [(a["model"], a["status"], a["reason"]) for a in attempts] == [
        ("qa/m1", "skipped", "circuit_open"),
        ("qb/m2", "served", None),
    ]
    assert called == ["qb/m2"]


async def test_failovers_count_moves_to_a_next_target_only(monkeypatch):
    _script(monkeypatch, {"qa/m1": _failed(500), "qb/m2": _failed(503)})
    before = _failovers("server_error")

    single, _ = await _ask({"model": "qa/m1"})
    assert single.status == 502
    assert _failovers("server_error") == before

    chain, _ = await _ask({"models": ["qa/m1", "qb/m2"]})
    assert chain.status == 502
    assert _failovers("server_error") == before + 1


async def test_skips_of_a_served_request_go_to_the_request_row(monkeypatch):
    _script(monkeypatch, {"qa/m1": _failed(500), "qb/m2": _served()})

    reply, records = await _ask({"models": ["qa/m1", "team"]})

    assert reply.status == 200
    request, attempts = records[-1].rows()
    assert request["status"] == "success"
    assert request["skips"] == [
        {
            "model": "qa/m1",
            "connection": "main",
            "slot": 1,
            "via": "team",
            "reason": "already_attempted",
        }
    ]
    assert [a["result"] for a in attempts] == ["server_error", "success"]


def test_the_failover_event_names_entries_as_sent():
    def slot(model: str, alias: str | None = None) -> Slot:
        entry = EntrySpec(model=model, param="models[0]", alias=alias)
        return Slot(entry=entry, resolved=resolve(TABLE, model))

    run = RunRecord.start(
        uuid.uuid4(),
        "/v1/chat/completions",
        KEY,
        1,
        time.time(),
        0.0,
    )
    ctx = ChatContext(
        endpoint="/v1/chat/completions", headers={}, table=TABLE, record=lambda r: None
    )
    request = type("R", (), {"stream": False})()
    loop = Run(
        ctx=ctx,
        key=KEY,
        request=request,  # type: ignore[arg-type]
        chain=[slot("qa/m1", alias="smart-fast"), slot("qb/m2")],
        rec=run,
    )
    loop.items.append(
        Item(model="qa/m1", slot=0, via=None, status="failed", reason="timeout")
    )

    model_failover(loop, 0)

    event = run.events[-1]
    assert (event["from_model"], event["to_model"], event["reason"]) == (
        "smart-fast",
        "qb/m2",
        "timeout",
    )
