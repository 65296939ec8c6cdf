"""Model discovery and Test connection (spec 10 §2) through a real gateway process:
the upstream's model list with a connection's credential, the ids not configured
yet (with catalog facts where models.dev knows them), a classified failure with a
bad key, no health fed and no secret in any answer."""

from __future__ import annotations

import httpx
import pytest

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def probed(gateway, mock):
    result = gateway.apply(f"""
providers:
  - slug: pd
    kind: openai
    base_url: {mock.url}
    connections:
      - name: good
        api_key: sk-upstream-secret-pd-good-1234567890
      - name: bad
        api_key: sk-upstream-secret-pd-bad-1234567890
    models: [{{id: m1}}]
  - slug: pdx
    kind: openai
    base_url: http://127.0.0.1:9/v1
    connections: [{{name: main, api_key: sk-upstream-secret-pdx-1234567890}}]
  - slug: pdz
    kind: anthropic
    base_url: {mock.url}
    connections: [{{name: main, api_key: sk-ant-upstream-secret-pdz-123456}}]
""")
    assert result.returncode == 0, result.stderr
    return gateway


def _api(gateway, path: str) -> httpx.Response:
    return httpx.post(
        f"{gateway.url}/api/{path}",
        headers={"Authorization": f"Bearer {gateway.admin_token}"},
        timeout=30,
    )


def _connection_id(gateway, provider: str, name: str) -> int:
    listed = httpx.get(
        f"{gateway.url}/api/connections",
        headers={"Authorization": f"Bearer {gateway.admin_token}"},
        timeout=10,
    ).json()
    return next(
        c["id"] for c in listed if (c["provider"], c["name"]) == (provider, name)
    )


def test_discovery_offers_the_upstream_models_not_configured(probed, upstream):
    upstream.add("m2", content="x")  # the mock lists every model it was scripted for
    upstream.add("m1", content="x")
    answer = _api(probed, "providers/pd/discover")
    assert answer.status_code == 200, answer.text
    body = answer.json()
    assert body["ok"] is True
    ids = [m["id"] for m in body["models"]]
    assert "m2" in ids
    assert "m1" not in ids  # configured already
    sent = upstream.requests()[-1]
    assert sent["path"].endswith("/models")
    assert "sk-upstream-secret" not in answer.text


def test_an_anthropic_provider_is_discovered_by_its_own_list_call(probed, upstream):
    upstream.add("claude-x", content="x")
    body = _api(probed, "providers/pdz/discover").json()
    assert body["ok"] is True
    assert "claude-x" in [m["id"] for m in body["models"]]
    sent = upstream.requests()[-1]
    assert sent["headers"]["anthropic-version"]
    assert sent["headers"]["x-api-key"] == "sk-ant-upstream-secret-pdz-123456"


def test_test_connection_reports_status_latency_and_the_classified_failure(
    probed, upstream
):
    good = _api(probed, f"connections/{_connection_id(probed, 'pd', 'good')}/test")
    assert good.status_code == 200
    assert good.json()["ok"] is True
    assert good.json()["http_status"] == 200
    assert isinstance(good.json()["latency_ms"], int)
    down = _api(probed, f"connections/{_connection_id(probed, 'pdx', 'main')}/test")
    body = down.json()
    assert (body["ok"], body["reason"]) == (False, "connection_error")
    assert "sk-upstream-secret" not in down.text
    # no health fed: the connection still serves
    upstream.reset()
    chat = httpx.post(
        f"{probed.url}/v1/chat/completions",
        headers={
            "Authorization": "Bearer sk-or-test-all-000000000000000000000000000000000"
        },
        json={"model": "pd/m1", "messages": [{"role": "user", "content": "x"}]},
        timeout=30,
    )
    assert chat.status_code == 200


def test_a_probe_needs_the_change_permission(probed):
    refused = httpx.post(f"{probed.url}/api/providers/pd/discover", timeout=10)
    assert refused.status_code in (401, 403)
