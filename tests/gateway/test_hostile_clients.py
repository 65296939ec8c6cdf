"""Odd and hostile clients get a JSON answer and a log row (spec 01: all JSON; 06
§1.1: every authenticated request is logged)."""

from __future__ import annotations

import json

import pytest
from asgiref.sync import sync_to_async
from asgiref.testing import ApplicationCommunicator
from django.db import connections
from django.test import Client

from combos.config_file import import_config
from gateway.config.snapshot import build_table
from gateway.config.state import tables
from gateway.inbound.chat import parse_chat_request
from gateway.kernel.exchange import RequestError
from omniroute_site.asgi import application
from telemetry.models import RequestLog
from tests.asgi_scope import http_scope

KEY = "sk-or-hostile-00000000000000000000000000000000000"


def _deep(levels: int) -> bytes:
    nested = "[" * levels + "]" * levels
    return (
        '{"model": "pa/m1", "messages": [{"role": "user", "content": "x"}], "x": '
        + nested
        + "}"
    ).encode()


def test_json_nested_deeper_than_can_be_relayed_is_invalid_json() -> None:
    parse_chat_request(_deep(200))  # fine
    with pytest.raises(RequestError) as caught:
        parse_chat_request(_deep(300))
    assert (caught.value.status, caught.value.code) == (400, "invalid_json")


@pytest.mark.django_db
def test_a_host_outside_allowed_hosts_gets_a_json_400() -> None:
    response = Client(HTTP_HOST="evil.example").get("/v1/models")
    assert response.status_code == 400
    assert response["content-type"] == "application/json"
    assert json.loads(response.content)["error"]["code"] == "bad_request"


@pytest.mark.django_db
def test_v1_models_answers_only_get() -> None:
    response = Client().post("/v1/models")
    assert response.status_code == 405
    assert json.loads(response.content)["error"]["code"] == "method_not_allowed"


def _configure() -> None:
    try:
        import_config(f"api_keys: [{{name: hostile, key: {KEY}}}]\n")
        tables.table = build_table()
    finally:
        connections.close_all()


def _rows() -> list[RequestLog]:
    try:
        return list(RequestLog.objects.all())
    finally:
        connections.close_all()


@pytest.mark.django_db(transaction=True)
async def test_a_client_gone_before_its_body_arrived_is_logged() -> None:
    await sync_to_async(_configure)()
    path = "/v1/chat/completions"
    app = ApplicationCommunicator(
        application,
        http_scope(
            path,
            [
                (b"authorization", f"Bearer {KEY}".encode()),
                (b"content-length", b"1000"),
            ],
        ),
    )
    await app.send_input({"type": "http.request", "body": b'{"mod', "more_body": True})
    await app.send_input({"type": "http.disconnect"})
    await app.wait(5)
    [row] = await sync_to_async(_rows)()
    assert (row.status, row.http_status, row.client_disconnected) == (
        "client_closed",
        499,
        True,
    )


@pytest.mark.django_db
def test_an_unknown_path_outside_the_admin_is_a_json_404() -> None:
    response = Client().post("/V1/chat/completions")
    assert response.status_code == 404
    assert json.loads(response.content)["error"]["code"] == "not_found"


@pytest.mark.django_db
def test_a_rest_body_nested_too_deeply_is_a_400(admin_client: Client) -> None:
    body = '{"name": "n", "targets": ' + "[" * 3000 + "]" * 3000 + "}"
    response = admin_client.post("/api/combos", body, content_type="application/json")
    assert response.status_code == 400
    assert json.loads(response.content)["error"]["code"] == "invalid_config"
