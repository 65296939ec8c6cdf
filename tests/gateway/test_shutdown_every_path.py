"""While draining, every new request but the probes and the scrape answers 503
``shutting_down`` (spec 08 §4 step 2), driven through the real ASGI entry point."""

from __future__ import annotations

import json

import pytest
from asgiref.testing import ApplicationCommunicator

from gateway import drain
from gateway.drain import Drain
from omniroute_site.asgi import application
from tests.asgi_scope import http_scope

pytestmark = pytest.mark.django_db(transaction=True)
SHUTDOWN = {
    "message": "Gateway is shutting down",
    "type": "api_error",
    "param": None,
    "code": "shutting_down",
}


@pytest.fixture
def registry(monkeypatch: pytest.MonkeyPatch) -> Drain:
    fresh = Drain()
    monkeypatch.setattr(drain, "registry", fresh)
    return fresh


async def _call(
    method: str, path: str, headers: list[tuple[bytes, bytes]] | None = None
) -> tuple[int, dict[bytes, bytes], bytes]:
    scope = http_scope(path, headers or [], method)
    app = ApplicationCommunicator(application, scope)
    await app.send_input({"type": "http.request", "body": b"{}"})
    start = await app.receive_output(5)
    body = b""
    while True:
        message = await app.receive_output(5)
        body += message.get("body", b"")
        if not message.get("more_body", False):
            break
    return start["status"], dict(start["headers"]), body


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("GET", "/v1/models"),
        ("GET", "/v1/auto-combo/coding/candidates"),
        ("GET", "/api/combos"),
        ("POST", "/v1/chat/completions"),  # no key at all: still the 503
    ],
)
async def test_a_new_request_while_draining_gets_the_503(registry, method, path):
    registry.begin(30)
    status, headers, body = await _call(
        method, path, [(b"authorization", b"Bearer sk-or-unknown-key")]
    )
    assert status == 503
    assert headers[b"retry-after"] == b"1"
    assert json.loads(body) == {"error": SHUTDOWN}


async def test_the_probes_still_answer_while_draining(registry):
    registry.begin(30)
    assert (await _call("GET", "/healthz"))[0] == 200
    status, _, body = await _call("GET", "/readyz")
    assert (status, json.loads(body)) == (503, {"status": "draining"})
