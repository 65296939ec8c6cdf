"""A failover in the running gateway reaches a webhook receiver (spec 02 §12.3).

The gateway runs without a broker, so its embedded worker delivers the event.
"""

from __future__ import annotations

import hashlib
import hmac
import threading
import time
from collections.abc import Iterator
from email.message import Message
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import httpx
import orjson
import pytest

from tests.integration.conftest import KEY_ALL, Gateway

pytestmark = pytest.mark.integration
SECRET = "whsec-e2e-0123456789abcdef0123456789"


@pytest.fixture(scope="module")
def received() -> Iterator[tuple[str, list[tuple[Message, bytes]]]]:
    got: list[tuple[Message, bytes]] = []

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
            got.append((self.headers, body))
            self.send_response(204)
            self.end_headers()

        def log_message(self, *args: Any) -> None:
            return

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(
        target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
    )
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/hook", got
    server.shutdown()
    server.server_close()


def _shell(gateway: Gateway, code: str) -> None:
    result = gateway.manage("shell", "-c", code)
    assert result.returncode == 0, result.stderr


@pytest.fixture
def subscribed(gateway, received) -> Iterator[list[tuple[Message, bytes]]]:
    url, got = received
    _shell(
        gateway,
        "from telemetry.models import WebhookEndpoint as E\n"
        "from telemetry.services import save_webhook_endpoint as save\n"
        f"save(E(url={url!r}, events=['model_failover']), secret={SECRET!r})\n",
    )
    gateway.wait_for_version(gateway.config_version())
    yield got
    _shell(
        gateway,
        "from telemetry.models import WebhookEndpoint as E\n"
        "from telemetry.services import delete_webhook_endpoints as delete\n"
        f"delete(E.objects.filter(url={url!r}))\n",
    )


def test_a_failover_is_posted_signed_to_a_subscribed_endpoint(
    gateway, upstream, subscribed
):
    upstream.add("m1", status=503, times=1)

    response = httpx.post(
        f"{gateway.url}/v1/chat/completions",
        timeout=30,
        headers={"Authorization": f"Bearer {KEY_ALL}"},
        json={
            "models": ["pa/m1", "pb/m2"],
            "messages": [{"role": "user", "content": "hi"}],
        },
    )

    assert response.status_code == 200
    deadline = time.monotonic() + 10
    while not subscribed and time.monotonic() < deadline:
        time.sleep(0.05)
    ((headers, body),) = subscribed
    event = orjson.loads(body)
    assert headers["X-OmniRoute-Event"] == "model_failover"
    assert headers["X-OmniRoute-Delivery"] == event["id"]
    assert {k: event[k] for k in ("to_slot", "from_model", "to_model", "reason")} == {
        "to_slot": 1,
        "from_model": "pa/m1",
        "to_model": "pb/m2",
        "reason": "server_error",
    }
    assert event["http_status"] == 503
    t, v1 = (
        part.split("=", 1)[1] for part in headers["X-OmniRoute-Signature"].split(",")
    )
    expected = hmac.new(SECRET.encode(), f"{t}.".encode() + body, hashlib.sha256)
    assert v1 == expected.hexdigest()
