"""Schemathesis against the REST API's own OpenAPI schema (no 5xx, ever).

The schema is fetched from the running gateway with the admin token.  Only reads
(``GET``) and creations (``POST``) run, and every created resource is named
``fuzz-…``, so the base configuration the other integration tests rely on is never
changed: no updates or deletes, no mappings or overrides (they would reroute models).
"""

from __future__ import annotations

from typing import Any

import httpx
import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from schemathesis.checks import not_a_server_error

pytestmark = pytest.mark.integration
Gateway = Any  # tests/integration/conftest.py
READS = [
    "/api/providers/",
    "/api/providers/{id}/",
    "/api/connections/",
    "/api/connections/{id}/",
    "/api/combos/",
    "/api/combos/{id}/",
    "/api/combos/auto",
    "/api/api-keys/",
    "/api/api-keys/{id}/",
    "/api/model-combo-mappings/",
    "/api/candidate-overrides/",
    "/api/smart-routes/",
    "/api/schema/",
]
#: path -> the field that names what it creates
CREATES = {
    "/api/providers/": "slug",
    "/api/combos/": "name",
    "/api/api-keys/": "name",
}
#: fields filled in when the generated body lacks them, so some creations succeed
DEFAULTS = {
    "/api/providers/": {"kind": "mock"},
    "/api/combos/": {"strategy": "priority", "targets": [{"model": "pa/m1"}]},
}
#: keys whose arbitrary values could attach the new resource to the base config
DROPPED = ("models", "connections", "model", "provider", "aliases", "alias")


@pytest.fixture(scope="module")
def api_schema(gateway: Gateway) -> Any:
    reply = httpx.get(
        f"{gateway.url}/api/schema/",
        params={"format": "json"},
        headers={"Authorization": f"Bearer {gateway.admin_token}"},
        timeout=10,
    )
    assert reply.status_code == 200, reply.text
    return schemathesis.openapi.from_dict(reply.json())


def _run(gateway: Gateway, operation: Any, prepare: Any = None) -> None:
    headers = {"Authorization": f"Bearer {gateway.admin_token}"}

    @settings(
        max_examples=15,
        derandomize=True,  # the same examples every CI run: a red run reproduces
        deadline=None,
        database=None,
        suppress_health_check=list(HealthCheck),
    )
    @given(case=operation.as_strategy())
    def check(case: Any) -> None:
        if prepare is not None:
            prepare(case)
        response = case.call(base_url=gateway.url, headers=headers, timeout=10)
        case.validate_response(response, checks=[not_a_server_error], headers=headers)

    check()


@pytest.mark.parametrize("path", READS)
def test_reads_never_fail_with_a_server_error(
    gateway: Gateway, api_schema: Any, path: str
):
    _run(gateway, api_schema[path]["GET"])


@pytest.mark.parametrize("path", sorted(CREATES))
def test_creations_never_fail_with_a_server_error(
    gateway: Gateway, api_schema: Any, path: str
):
    field = CREATES[path]

    def prepare(case: Any) -> None:
        body = case.body if isinstance(case.body, dict) else {}
        for key in DROPPED:
            body.pop(key, None)
        body[field] = f"fuzz-{body.get(field, '')!s}"[:60]
        for key, value in DEFAULTS.get(path, {}).items():
            body.setdefault(key, value)
        case.body = body

    _run(gateway, api_schema[path]["POST"], prepare)
