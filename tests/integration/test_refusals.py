"""Every gateway refusal is an OpenAI error envelope that names the field."""

from __future__ import annotations

import httpx
import pytest

from tests.integration.conftest import KEY_DISABLED, KEY_EXPIRED, KEY_PA_ONLY

pytestmark = pytest.mark.integration
MESSAGES = [{"role": "user", "content": "hi"}]


def _error(
    response: httpx.Response,
    status: int,
    code: str,
    param: str | None,
    error_type: str = "invalid_request_error",
) -> dict:
    assert response.status_code == status, response.text
    error = response.json()["error"]
    assert (error["code"], error["param"], error["type"]) == (code, param, error_type)
    assert error["message"]
    return error


def test_missing_key_is_401_invalid_api_key(gateway):
    response = httpx.post(
        f"{gateway.url}/v1/chat/completions",
        json={"model": "pa/m1", "messages": MESSAGES},
    )
    _error(response, 401, "invalid_api_key", None, "authentication_error")


def test_unknown_key_is_401_also_through_x_api_key(gateway):
    response = httpx.post(
        f"{gateway.url}/v1/chat/completions",
        headers={"x-api-key": "sk-or-nope-nope-nope-nope"},
        json={"model": "pa/m1", "messages": MESSAGES},
    )
    _error(response, 401, "invalid_api_key", None, "authentication_error")


@pytest.mark.parametrize("key", [KEY_DISABLED, KEY_EXPIRED])
def test_inactive_or_expired_key_is_401_key_disabled(gateway, key):
    response = httpx.post(
        f"{gateway.url}/v1/chat/completions",
        headers={"Authorization": f"Bearer {key}"},
        json={"model": "pa/m1", "messages": MESSAGES},
    )
    _error(response, 401, "key_disabled", None, "authentication_error")


def test_x_api_key_header_authenticates(gateway, upstream):
    response = httpx.post(
        f"{gateway.url}/v1/chat/completions",
        headers={"x-api-key": KEY_PA_ONLY},
        json={"model": "pa/m1", "messages": MESSAGES},
    )
    assert response.status_code == 200


def test_allow_list_excludes_a_model_with_403(gateway):
    response = httpx.post(
        f"{gateway.url}/v1/chat/completions",
        headers={"Authorization": f"Bearer {KEY_PA_ONLY}"},
        json={"model": "pb/m2", "messages": MESSAGES},
    )
    _error(response, 403, "model_not_allowed", "model", "permission_error")


def test_allow_list_filters_the_model_list(gateway):
    response = httpx.get(
        f"{gateway.url}/v1/models", headers={"Authorization": f"Bearer {KEY_PA_ONLY}"}
    )
    ids = [m["id"] for m in response.json()["data"]]
    assert "pa/m1" in ids
    assert all(i.startswith("pa/") for i in ids)


def test_malformed_json_is_400_invalid_json(client):
    response = client.post(
        "/v1/chat/completions",
        content=b'{"model": "pa/m1",',
        headers={"content-type": "application/json"},
    )
    _error(response, 400, "invalid_json", None)


@pytest.mark.parametrize(
    ("body", "status", "code", "param"),
    [
        ({"messages": MESSAGES}, 400, "missing_parameter", "model"),
        ({"model": "pa/m1"}, 400, "missing_parameter", "messages"),
        ({"model": "pa/m1", "messages": "hi"}, 400, "invalid_type", "messages"),
        ({"model": 5, "messages": MESSAGES}, 400, "invalid_type", "model"),
        (
            {"model": "pa/m1", "messages": MESSAGES, "stream": "yes"},
            400,
            "invalid_type",
            "stream",
        ),
        (
            {"model": "pa/m1", "messages": MESSAGES, "temperature": 7},
            400,
            "invalid_value",
            "temperature",
        ),
        (
            {"models": ["pa/m1"], "fallback_models": ["pb/m2"], "messages": MESSAGES},
            400,
            "conflicting_parameters",
            "fallback_models",
        ),
        (
            {"models": ["pa/m1", "pb/m2", "pc/m3", "team"], "messages": MESSAGES},
            400,
            "invalid_value",
            "models",
        ),
        (
            {"model": "pa/m1", "redundancy": {"timeout_ms": 999}, "messages": MESSAGES},
            400,
            "invalid_value",
            "redundancy.timeout_ms",
        ),
        (
            {
                "models": [{"model": "pa/m1", "first_token_timeout_ms": 70000}],
                "messages": MESSAGES,
            },
            400,
            "invalid_value",
            "models[0].first_token_timeout_ms",
        ),
        (
            {"model": "pa/m1", "redundancy": {"foo": 1}, "messages": MESSAGES},
            400,
            "unknown_parameter",
            "redundancy.foo",
        ),
        (
            {"models": ["pa/nope"], "messages": MESSAGES},
            404,
            "model_not_found",
            "models[0]",
        ),
        ({"model": "nope", "messages": MESSAGES}, 404, "model_not_found", "model"),
        (
            {"model": "auto/turbo", "messages": MESSAGES},
            400,
            "unknown_auto_variant",
            "model",
        ),
        (
            {"model": "combo/nope", "messages": MESSAGES},
            404,
            "model_not_found",
            "model",
        ),
    ],
)
def test_invalid_bodies_name_the_field(client, body, status, code, param):
    error_type = "not_found_error" if status == 404 else "invalid_request_error"
    _error(
        client.post("/v1/chat/completions", json=body), status, code, param, error_type
    )


def test_oversize_body_is_413_before_parsing(client):
    body = b'{"model": "pa/m1", "messages": [' + b" " * 70_000 + b"]}"
    response = client.post("/v1/chat/completions", content=body)
    _error(response, 413, "body_too_large", None)


def test_oversize_body_of_a_known_key_is_logged_as_refused(gateway, client):
    client.post("/v1/chat/completions", content=b"[" + b" " * 70_000 + b"]")
    row = gateway.requests_log("reason = 'body_too_large'")[-1]
    assert (row["status"], row["http_status"]) == ("refused", 413)


def test_refusals_are_logged_without_upstream_attempts(gateway, client):
    client.post("/v1/chat/completions", json={"model": "nope", "messages": MESSAGES})
    row = gateway.requests_log("reason = 'model_not_found'")[-1]
    assert (row["status"], row["http_status"], row["attempt_count"]) == (
        "refused",
        404,
        0,
    )
    assert row["route"] == "unresolved"


def test_unauthenticated_requests_are_not_logged(gateway):
    before = len(gateway.requests_log())
    httpx.post(f"{gateway.url}/v1/chat/completions", json={"model": "pa/m1"})
    assert len(gateway.requests_log()) == before
