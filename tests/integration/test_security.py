"""Secrets never leak (spec 08 §5) from a real gateway process.

The base config's upstream secrets and client keys are searched for in everything an
operator or a client can see: the process log, every SQLite table, ``export_config``,
error replies (the mock upstream echoes the credential in its error bodies), the admin
pages, the REST API, ``/metrics`` and the live routing feed.
"""

from __future__ import annotations

import hashlib
import json
import re
import secrets
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from websockets.sync.client import connect

from tests.integration.conftest import (
    KEY_ALL,
    KEY_DISABLED,
    KEY_EXPIRED,
    KEY_PA_ONLY,
)

pytestmark = pytest.mark.integration
Gateway = Any  # tests/integration/conftest.py
UPSTREAM_SECRETS = (
    "sk-upstream-secret-pa-1234567890",
    "sk-upstream-secret-pb-1234567890",
    "sk-ant-upstream-secret-pc-123456",
)
CLIENT_KEYS = (KEY_ALL, KEY_PA_ONLY, KEY_DISABLED, KEY_EXPIRED)
MESSAGES = [{"role": "user", "content": "hi"}]


def _assert_clean(text: str, where: str, *, keys: bool = True) -> None:
    found = [s for s in UPSTREAM_SECRETS if s in text]
    if keys:
        found += [k for k in CLIENT_KEYS if k in text]
    assert not found, f"{where} leaks {found}"


@pytest.fixture(scope="module")
def staff(gateway: Gateway) -> tuple[str, str]:
    """A staff superuser with a password (the admin login form needs one)."""
    username, password = "sec-admin", secrets.token_urlsafe(16)
    code = (
        "from django.contrib.auth.models import User\n"
        f"User.objects.filter(username={username!r}).delete()\n"
        f"User.objects.create_superuser({username!r}, 'sec@example.com', "
        f"{password!r})\n"
    )
    result = gateway.manage("shell", "-c", code)
    assert result.returncode == 0, result.stderr
    return username, password


@pytest.fixture
def admin_http(gateway: Gateway, staff: tuple[str, str]) -> Iterator[httpx.Client]:
    """An httpx client logged in to the admin through its form."""
    with httpx.Client(base_url=gateway.url, timeout=10) as http:
        form = http.get("/admin/login/")
        token = re.search(rb'name="csrfmiddlewaretoken" value="([^"]+)"', form.content)
        assert token is not None
        done = http.post(
            "/admin/login/",
            data={
                "username": staff[0],
                "password": staff[1],
                "csrfmiddlewaretoken": token.group(1).decode(),
                "next": "/admin/",
            },
        )
        assert done.status_code == 302, done.text
        yield http


def _connection_ids(gateway: Gateway) -> list[Any]:
    with gateway.db() as conn:
        return [row[0] for row in conn.execute("select id from providers_connection")]


def _echoing_failures(upstream: Any) -> None:
    """The upstream echoes the credential it was sent, as careless providers do.

    The 401 comes last: it disables the connection (until ``upstream`` resets it)."""
    secret = UPSTREAM_SECRETS[0]
    upstream.add(
        "m1",
        times=1,
        status=500,
        raw_body=f"upstream crashed; headers: Authorization: Bearer {secret}",
    )
    upstream.add(
        "m1",
        times=1,
        status=401,
        error_body={
            "error": {
                "message": f"Incorrect API key provided: {secret}",
                "type": "invalid_request_error",
                "code": "invalid_api_key",
            }
        },
    )
    upstream.add(
        "m2",
        times=1,
        status=400,
        raw_body=f'{{"error": {{"message": "key={secret} x-api-key: {secret}"}}}}',
    )


def test_error_replies_never_echo_credentials(
    gateway: Gateway, client: httpx.Client, upstream: Any
):
    _echoing_failures(upstream)
    replies = [
        client.post("/v1/chat/completions", json={"model": m, "messages": MESSAGES})
        for m in ("pa/m1", "pa/m1", "pb/m2")
    ]
    streamed = client.post(
        "/v1/chat/completions",
        json={"model": "pa/m1", "messages": MESSAGES, "stream": True},
    )
    sent = upstream.requests()
    # the upstream really received the configured secret ...
    assert any(UPSTREAM_SECRETS[0] in json.dumps(r.get("headers", {})) for r in sent), (
        sent
    )
    # ... and no reply (nor its headers) contains it or the client's key
    assert [r.status_code >= 400 for r in replies] == [True, True, True], [
        r.text for r in replies
    ]
    for reply in [*replies, streamed]:
        _assert_clean(reply.text + json.dumps(dict(reply.headers)), "an error reply")
    refused = httpx.post(
        f"{gateway.url}/v1/chat/completions",
        headers={"Authorization": f"Bearer {KEY_DISABLED}"},
        json={"model": "pa/m1", "messages": MESSAGES},
    )
    assert refused.status_code in (401, 403)
    _assert_clean(refused.text, "a refused key's reply")
    unknown = httpx.post(
        f"{gateway.url}/v1/chat/completions",
        headers={"Authorization": "Bearer sk-or-unknown-key-000000000000000000000"},
        json={"model": "pa/m1", "messages": MESSAGES},
    )
    assert unknown.status_code == 401
    assert "sk-or-unknown-key-000000000000000000000" not in unknown.text


def test_log_file_and_database_hold_no_secret(
    gateway: Gateway, client: httpx.Client, upstream: Any
):
    _echoing_failures(upstream)
    for model in ("pa/m1", "pa/m1", "pb/m2", "pc/m3"):
        client.post("/v1/chat/completions", json={"model": model, "messages": MESSAGES})
    with gateway.db() as conn:
        dump = "\n".join(conn.iterdump())
    assert "telemetry_attemptlog" in dump
    _assert_clean(dump, "the database")
    _assert_clean(gateway.log.read_text(errors="replace"), "the gateway log")


def test_api_keys_are_stored_as_digest_and_prefix(gateway: Gateway):
    with gateway.db() as conn:
        rows = [dict(r) for r in conn.execute("select * from combos_apikey")]
    for key in CLIENT_KEYS:
        digest = hashlib.sha256(key.encode()).hexdigest()
        # several test keys may share a 12-character prefix: find this key's row
        [row] = [r for r in rows if digest in r.values()]
        assert row["prefix"] == key[:12]
        assert key not in json.dumps(row, default=str)


def test_export_config_masks_every_secret(gateway: Gateway):
    result = gateway.manage("export_config")
    assert result.returncode == 0, result.stderr
    assert "slug: pa" in result.stdout
    _assert_clean(result.stdout + result.stderr, "export_config")


def test_admin_pages_show_no_part_of_a_provider_key(
    gateway: Gateway, admin_http: httpx.Client
):
    # the gateway is shared by the whole session: other modules add connections
    # with an env reference or no key, so only the ones holding a stored key say "set"
    with gateway.db() as conn:
        stored = {
            row[0]
            for row in conn.execute(
                "select id from providers_connection"
                " where api_key_encrypted != '' and api_key_ref = ''"
            )
        }
    assert stored, "the fixture's connections hold stored keys"
    pages = {}
    for connection_id in _connection_ids(gateway):
        page = admin_http.get(f"/admin/providers/connection/{connection_id}/change/")
        assert page.status_code == 200, page.text[:300]
        _assert_clean(page.text, f"the admin page of connection {connection_id}")
        pages[connection_id] = page.text
    # not even the last four (spec 08 §5.2, Amended): only whether a key is set
    assert not any("7890" in text for text in pages.values())
    assert all("api key set" in pages[i].lower() for i in stored)
    for path in (
        "/admin/providers/connection/",
        "/admin/providers/provider/",
        "/admin/combos/apikey/",
    ):
        page = admin_http.get(path)
        assert page.status_code == 200, path
        _assert_clean(page.text, path)


def test_rest_api_never_returns_secrets(gateway: Gateway):
    headers = {"Authorization": f"Bearer {gateway.admin_token}"}
    with httpx.Client(base_url=gateway.url, headers=headers, timeout=10) as api:
        for path in ("/api/providers/", "/api/connections/", "/api/api-keys/"):
            listing = api.get(path)
            assert listing.status_code == 200, listing.text
            _assert_clean(listing.text, path)
        for connection_id in _connection_ids(gateway):
            detail = api.get(f"/api/connections/{connection_id}/")
            assert detail.status_code == 200, detail.text
            _assert_clean(detail.text, f"/api/connections/{connection_id}/")
        created = api.post("/api/api-keys/", json={"name": "sec-once"})
        assert created.status_code == 201, created.text
        plaintext = created.json()["key"]
        again = api.get("/api/api-keys/")
        assert plaintext not in again.text
        assert plaintext[:12] in again.text


def test_metrics_and_the_feed_hold_no_secret(
    gateway: Gateway,
    client: httpx.Client,
    upstream: Any,
    admin_http: httpx.Client,
):
    cookie = admin_http.cookies["sessionid"]
    url = gateway.url.replace("http://", "ws://") + "/ws/routing/"
    headers = {"Cookie": f"sessionid={cookie}", "Origin": gateway.url}
    _echoing_failures(upstream)
    with connect(url, additional_headers=headers) as socket:
        client.post(
            "/v1/chat/completions", json={"model": "pa/m1", "messages": MESSAGES}
        )
        message = socket.recv(timeout=5)
    assert "routing_decision" in message
    _assert_clean(str(message), "the live feed")
    _assert_clean(httpx.get(f"{gateway.url}/metrics", timeout=5).text, "/metrics")
