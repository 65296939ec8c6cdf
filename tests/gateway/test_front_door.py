"""The lean chat front door driven as an ASGI app (style §1.3, "Disconnect test").

``omniroute_site.asgi.application`` is driven with ``ApplicationCommunicator`` against
the project's mock upstream on loopback; the routing table is built from the real
(PostgreSQL) database.
"""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
from asgiref.sync import sync_to_async
from asgiref.testing import ApplicationCommunicator
from django.db import connections

from combos.config_file import import_config
from gateway.config.snapshot import build_table
from gateway.config.state import tables
from omniroute_site.asgi import application
from providers.mock_upstream import RunningMock, start_in_thread
from tests.asgi_scope import http_scope

pytestmark = pytest.mark.django_db(transaction=True)
KEY = "sk-or-front-door-000000000000000000000000000000"


@pytest.fixture
def mock() -> Iterator[RunningMock]:
    with start_in_thread() as running:
        yield running


def _configure(text: str) -> None:
    """Import and build the table in one worker thread, then close its connection
    (a connection left open there would block the test database's teardown)."""
    try:
        import_config(text)
        tables.table = build_table()
    finally:
        connections.close_all()


@pytest.fixture
async def configured(mock: RunningMock) -> RunningMock:
    await sync_to_async(_configure)(f"""
providers:
  - slug: pa
    kind: openai
    base_url: {mock.url}
    connections: [{{name: main, api_key: sk-upstream-front-door-0000}}]
    models: [{{id: m1}}]
api_keys:
  - name: fd
    key: {KEY}
""")
    return mock


def _scope(body: bytes, path: str = "/v1/chat/completions") -> dict:
    return http_scope(
        path,
        [
            (b"authorization", f"Bearer {KEY}".encode()),
            (b"content-type", b"application/json"),
            (b"content-length", str(len(body)).encode()),
        ],
    )


async def test_disconnect_after_the_first_chunk_closes_the_upstream(configured):
    configured.add("m1", token_delay_ms=100, tokens=40)
    body = json.dumps(
        {
            "model": "pa/m1",
            "stream": True,
            "messages": [{"role": "user", "content": "hi"}],
        }
    ).encode()
    app = ApplicationCommunicator(application, _scope(body))
    await app.send_input({"type": "http.request", "body": body, "more_body": False})
    start = await app.receive_output(5)
    assert (start["type"], start["status"]) == ("http.response.start", 200)
    first = await app.receive_output(5)
    assert first["body"].startswith(b"data: ")
    await app.send_input({"type": "http.disconnect"})
    await app.wait(5)
    records = await sync_to_async(configured.wait_for)("cancelled", timeout_seconds=3)
    assert records[0]["model"] == "m1"


async def test_declared_oversize_body_is_refused_before_reading(configured, settings):
    settings.OMNIROUTE_MAX_BODY_BYTES = 100
    body = b"{" + b" " * 200 + b"}"
    app = ApplicationCommunicator(application, _scope(body))
    start = await app.receive_output(5)
    assert start["status"] == 413
    payload = json.loads((await app.receive_output(5))["body"])
    assert payload["error"]["code"] == "body_too_large"
    assert configured.requests() == []


async def test_body_split_over_several_messages_is_joined(configured):
    body = json.dumps(
        {"model": "pa/m1", "messages": [{"role": "user", "content": "hi"}]}
    ).encode()
    app = ApplicationCommunicator(application, _scope(body))
    await app.send_input({"type": "http.request", "body": body[:10], "more_body": True})
    await app.send_input(
        {"type": "http.request", "body": body[10:], "more_body": False}
    )
    start = await app.receive_output(5)
    assert start["status"] == 200
    reply = json.loads((await app.receive_output(5))["body"])
    assert reply["omniroute"]["served_model"] == "pa/m1"


async def test_get_on_the_chat_path_is_405(configured):
    scope = _scope(b"")
    scope["method"] = "GET"
    app = ApplicationCommunicator(application, scope)
    start = await app.receive_output(5)
    assert start["status"] == 405


def test_a_superscript_content_length_is_not_a_number():
    from gateway.edge.asgi import _declared_length

    assert _declared_length({"content-length": "²"}) is None
    assert _declared_length({"content-length": "12"}) == 12


async def test_oversize_headers_are_a_431_under_any_server(configured, settings):
    """The application checks the header limit itself too (a server without the
    guarded protocol: issue #16)."""
    settings.OMNIROUTE_MAX_HEADER_BYTES = 2048
    scope = _scope(b"{}")
    scope["headers"].append((b"x-padding", b"p" * 4096))
    app = ApplicationCommunicator(application, scope)
    start = await app.receive_output(5)
    assert start["status"] == 431
    payload = json.loads((await app.receive_output(5))["body"])
    assert payload["error"]["code"] == "request_header_fields_too_large"


async def test_a_django_path_bounds_its_body(configured, settings):
    settings.OMNIROUTE_MAX_BODY_BYTES = 100
    scope = http_scope("/healthz", [(b"content-length", b"1000")])
    app = ApplicationCommunicator(application, scope)
    start = await app.receive_output(5)
    assert start["status"] == 413
