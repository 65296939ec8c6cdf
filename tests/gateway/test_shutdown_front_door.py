"""Graceful shutdown at the chat front door (spec 08 §4), driven as an ASGI app.

``omniroute_site.asgi.application`` runs against the mock upstream on loopback; the
drain is started by calling ``gateway.drain`` directly, as the SIGTERM hook does.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from asgiref.testing import ApplicationCommunicator
from django.db import connections
from django.test import AsyncClient

from combos.config_file import import_config
from gateway import drain
from gateway.config.snapshot import build_table
from gateway.config.state import tables
from gateway.drain import Drain
from omniroute_site.asgi import application
from providers.mock_upstream import RunningMock, start_in_thread
from telemetry.models import AttemptLog, RequestLog
from tests.asgi_scope import http_scope

pytestmark = pytest.mark.django_db(transaction=True)
KEY = "sk-or-shutdown-0000000000000000000000000000000"
SHUTDOWN_ERROR = {
    "message": "Gateway is shutting down",
    "type": "api_error",
    "code": "shutting_down",
}


@pytest.fixture
def registry(monkeypatch: pytest.MonkeyPatch) -> Drain:
    fresh = Drain()
    monkeypatch.setattr(drain, "registry", fresh)
    return fresh


@pytest.fixture
def mock() -> Iterator[RunningMock]:
    with start_in_thread() as running:
        yield running


def _configure(text: str) -> None:
    try:
        import_config(text)
        tables.table = build_table()
    finally:
        connections.close_all()


@pytest.fixture
async def configured(mock: RunningMock, registry: Drain) -> RunningMock:
    await sync_to_async(_configure)(f"""
providers:
  - slug: pa
    kind: openai
    base_url: {mock.url}
    connections: [{{name: main, api_key: sk-upstream-shutdown-00000}}]
    models: [{{id: m1}}]
api_keys:
  - name: sd
    key: {KEY}
""")
    return mock


def _request(*, stream: bool) -> ApplicationCommunicator:
    body = json.dumps(
        {
            "model": "pa/m1",
            "stream": stream,
            "messages": [{"role": "user", "content": "hi"}],
        }
    ).encode()
    path = "/v1/chat/completions"
    scope = http_scope(
        path,
        [
            (b"authorization", f"Bearer {KEY}".encode()),
            (b"content-type", b"application/json"),
            (b"content-length", str(len(body)).encode()),
        ],
    )
    app = ApplicationCommunicator(application, scope)
    app.input_queue.put_nowait({"type": "http.request", "body": body})
    assert not app.future.done()  # starts the application now
    return app


async def _rest(app: ApplicationCommunicator) -> bytes:
    """Body messages until the last one."""
    data = b""
    while True:
        message = await app.receive_output(5)
        data += message.get("body", b"")
        if not message.get("more_body", False):
            return data


def _events(data: bytes) -> list[Any]:
    out: list[Any] = []
    for line in data.decode().splitlines():
        if line.startswith("data: "):
            payload = line[len("data: ") :]
            out.append(payload if payload == "[DONE]" else json.loads(payload))
    return out


def _rows() -> list[tuple[RequestLog, list[AttemptLog]]]:
    try:
        return [
            (row, list(AttemptLog.objects.filter(request=row).order_by("attempt_no")))
            for row in RequestLog.objects.order_by("created_at")
        ]
    finally:
        connections.close_all()


async def test_a_new_request_while_draining_gets_503_and_is_logged_as_refused(
    configured, registry
):
    registry.begin(30)
    app = _request(stream=True)
    start = await app.receive_output(5)
    assert start["status"] == 503
    assert (b"retry-after", b"1") in start["headers"]
    body = json.loads(await _rest(app))
    assert body == {"error": {**SHUTDOWN_ERROR, "param": None}}
    assert configured.requests() == []
    [(row, attempts)] = await sync_to_async(_rows)()
    assert (row.status, row.http_status, row.reason) == (
        "refused",
        503,
        "shutting_down",
    )
    assert attempts == []


async def test_readyz_answers_503_draining(registry):
    registry.begin(30)
    response = await AsyncClient().get("/readyz")
    assert response.status_code == 503
    assert json.loads(response.content) == {"status": "draining"}


async def test_a_stream_open_at_the_deadline_ends_with_the_shutting_down_chunk(
    configured, registry
):
    configured.add("m1", token_delay_ms=100, tokens=200)
    app = _request(stream=True)
    start = await app.receive_output(5)
    assert start["status"] == 200
    first = await app.receive_output(5)
    assert first["body"].startswith(b"data: ")
    drained = asyncio.create_task(registry.finish(0.3))
    events = _events(first["body"] + await _rest(app))
    await drained
    await app.wait(5)
    assert events[-1] == "[DONE]"
    tail = events[-2]
    # spec 09 §7: one choice whose finish_reason is "error"
    assert tail["choices"] == [{"index": 0, "delta": {}, "finish_reason": "error"}]
    assert tail["error"] == SHUTDOWN_ERROR
    assert tail["omniroute"]["served_model"] == "pa/m1"
    assert tail["model"] == "pa/m1"
    assert len(events) < 20  # cut long before its 200 tokens
    await sync_to_async(configured.wait_for)("cancelled", timeout_seconds=3)
    [(row, attempts)] = await sync_to_async(_rows)()
    assert (row.status, row.http_status, row.reason) == (
        "interrupted",
        200,
        "shutting_down",
    )
    assert row.error_message == "Gateway is shutting down"
    assert row.client_disconnected is False
    assert [(a.result, a.billable) for a in attempts] == [("cancelled", True)]
    assert registry.in_flight() == 0


async def test_a_request_waiting_on_its_upstream_at_the_deadline_gets_the_503(
    configured, registry
):
    configured.add("m1", hang=True)
    app = _request(stream=False)
    await sync_to_async(configured.wait_for)("pending", timeout_seconds=3)
    await registry.finish(0.2)
    start = await app.receive_output(5)
    assert start["status"] == 503
    assert (b"retry-after", b"1") in start["headers"]
    assert json.loads(await _rest(app))["error"]["code"] == "shutting_down"
    await app.wait(5)
    await sync_to_async(configured.wait_for)("cancelled", timeout_seconds=3)
    [(row, attempts)] = await sync_to_async(_rows)()
    assert (row.status, row.http_status, row.reason) == (
        "refused",
        503,
        "shutting_down",
    )
    assert row.client_disconnected is False
    assert [a.result for a in attempts] == ["cancelled"]


async def test_a_stream_still_before_its_first_token_gets_the_503(configured, registry):
    configured.add("m1", ttft_ms=10_000)
    app = _request(stream=True)
    await sync_to_async(configured.wait_for)("pending", timeout_seconds=3)
    await registry.finish(0.2)
    start = await app.receive_output(5)
    assert start["status"] == 503
    assert json.loads(await _rest(app))["error"]["code"] == "shutting_down"
    await app.wait(5)


async def test_a_stream_that_ends_within_the_grace_is_delivered_whole(
    configured, registry
):
    configured.add("m1", token_delay_ms=20, tokens=10)
    app = _request(stream=True)
    start = await app.receive_output(5)
    assert start["status"] == 200
    drained = asyncio.create_task(registry.finish(5))
    events = _events(await _rest(app))
    await drained
    await app.wait(5)
    assert events[-1] == "[DONE]"
    assert "error" not in events[-2]
    assert registry.is_cut is False
    [(row, _)] = await sync_to_async(_rows)()
    assert (row.status, row.reason) == ("success", None)


async def test_a_client_disconnect_while_draining_is_still_a_disconnect(
    configured, registry
):
    configured.add("m1", token_delay_ms=100, tokens=200)
    app = _request(stream=True)
    start = await app.receive_output(5)
    assert start["status"] == 200
    await app.receive_output(5)
    registry.begin(30)
    await app.send_input({"type": "http.disconnect"})
    await app.wait(5)
    await sync_to_async(configured.wait_for)("cancelled", timeout_seconds=3)
    [(row, _)] = await sync_to_async(_rows)()
    assert (row.status, row.reason) == ("client_closed", None)
    assert row.client_disconnected is True
    assert registry.in_flight() == 0
    await registry.finish(30)  # nothing left: returns at once
    assert registry.is_cut is False
