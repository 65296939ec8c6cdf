"""Spec 03 through the real gateway, what only an HTTP round trip shows: a fusion panel
cut at ``panelHardTimeoutMs`` fails as ``fusion_panel_failed`` naming each member's
reason (§6), and the request-shaped filters (§4.2) list a target too small as skipped
and refuse a combo lacking a capability naming the request field."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.integration
MESSAGES = [{"role": "user", "content": "hi"}]


@pytest.fixture(scope="module")
def fit_and_panel_combos(gateway, mock):
    result = gateway.apply(f"""
providers:
  - slug: pq
    kind: openai
    base_url: {mock.url}
    connections: [{{name: main, api_key: sk-upstream-pq-000000000000}}]
    models:
      - {{id: qsmall, context_window: 1000, capabilities: [json]}}
      - {{id: qbig, context_window: 200000, capabilities: [tools, json]}}
combos:
  - name: audit-fit
    strategy: context-optimized
    targets: [{{model: pq/qsmall}}, {{model: pq/qbig}}]
  - name: audit-tools
    strategy: priority
    targets: [{{model: pq/qsmall}}]
  - name: audit-quick-panel
    strategy: fusion
    config: {{fusionTuning: {{stragglerGraceMs: 300, panelHardTimeoutMs: 1000}}}}
    targets: [{{model: pa/m1}}, {{model: pb/m2}}]
""")
    assert result.returncode == 0, result.stderr
    return gateway


def test_a_panel_that_only_timed_out_fails_as_fusion_panel_failed(
    fit_and_panel_combos, client, upstream
):
    """§6 steps 4 and 6: members cut at ``panelHardTimeoutMs`` are logged ``timeout``
    (``panel_timeout``); with 0 answers the request is 503 ``fusion_panel_failed``,
    not a request that made no call."""
    upstream.add("m1", latency_ms=4000)
    upstream.add("m2", latency_ms=4000)
    response = client.post(
        "/v1/chat/completions",
        json={"model": "audit-quick-panel", "messages": MESSAGES},
    )
    assert response.status_code == 503, response.text
    error = response.json()["error"]
    assert error["code"] == "fusion_panel_failed"
    assert error["message"] == (
        "All fusion panel models failed: pa/m1=timeout, pb/m2=timeout"
    )
    assert response.headers["x-omniroute-attempts"] == "2"


def test_a_panel_with_one_failure_and_one_timeout_names_both(
    fit_and_panel_combos, client, upstream
):
    upstream.add("m1", status=500)
    upstream.add("m2", latency_ms=4000)
    response = client.post(
        "/v1/chat/completions",
        json={"model": "audit-quick-panel", "messages": MESSAGES},
    )
    assert response.status_code == 503, response.text
    error = response.json()["error"]
    assert error["message"] == (
        "All fusion panel models failed: pa/m1=server_error, pb/m2=timeout"
    )


def test_a_target_too_small_is_listed_as_skipped_when_the_combo_is_planned(
    fit_and_panel_combos, client, upstream
):
    """§4.2: filtered before ordering, its skip item listed in declared order (the
    strategy would have put it last, after the target that serves)."""
    long = [{"role": "user", "content": "x" * 8000}]
    response = client.post(
        "/v1/chat/completions",
        json={"models": ["audit-fit", "pc/m3"], "messages": long},
    )
    assert response.status_code == 200, response.text
    attempts = response.json()["omniroute"]["failover"]["attempts"]
    assert [(a["model"], a["status"], a["reason"]) for a in attempts] == [
        ("pq/qsmall", "skipped", "context_too_large"),
        ("pq/qbig", "served", None),
    ]
    assert [r["model"] for r in upstream.requests()] == ["qbig"]


def test_a_combo_lacking_a_capability_names_the_request_field(
    fit_and_panel_combos, client, upstream
):
    """§4.2 / 02 §10: every target filtered for a missing capability -> 400
    ``capability_mismatch`` with the field of the unmet need as ``param``."""
    tools = [{"type": "function", "function": {"name": "ls", "parameters": {}}}]
    response = client.post(
        "/v1/chat/completions",
        json={"model": "audit-tools", "messages": MESSAGES, "tools": tools},
    )
    assert response.status_code == 400, response.text
    error = response.json()["error"]
    assert (error["code"], error["param"]) == ("capability_mismatch", "tools")
    assert upstream.requests() == []
