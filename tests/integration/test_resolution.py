"""Model resolution order through the gateway and its REST API (spec 03 §1, §10)."""

from __future__ import annotations

import httpx
import pytest

pytestmark = pytest.mark.integration
MESSAGES = [{"role": "user", "content": "hi"}]


def _api(gateway, method: str, path: str, **kwargs) -> httpx.Response:
    return httpx.request(
        method,
        f"{gateway.url}/api/{path}",
        timeout=10,
        headers={"Authorization": f"Bearer {gateway.admin_token}"},
        **kwargs,
    )


def _wait_served(gateway) -> None:
    gateway.wait_for_version(gateway.config_version())


def _route(client, model: str) -> tuple[int, dict]:
    response = client.post(
        "/v1/chat/completions", json={"model": model, "messages": MESSAGES}
    )
    body = response.json()
    return response.status_code, body.get("omniroute") or body.get("error")


def test_a_combo_named_like_a_model_shadows_it_with_a_warning(
    gateway, client, upstream
):
    created = _api(
        gateway,
        "POST",
        "combos",
        json={"name": "m1", "strategy": "priority", "targets": [{"model": "pb/m2"}]},
    )
    assert created.status_code == 201, created.text
    assert created.json()["warning"] == {
        "code": "COMBO_NAME_SHADOWS_MODEL",
        "modelId": "m1",
        "providerId": "pa",
    }
    team = _api(
        gateway,
        "POST",
        "combos",
        json={"name": "crew", "strategy": "priority", "targets": [{"model": "pa/m1"}]},
    )
    assert "warning" not in team.json()
    _wait_served(gateway)
    status, omni = _route(client, "m1")
    assert (status, omni["served_model"], omni["route"]) == (200, "pb/m2", "combo:m1")
    status, omni = _route(client, "pa/m1")
    assert (omni["served_model"], omni["route"]) == ("pa/m1", "direct")
    for combo in (created.json(), team.json()):
        assert _api(gateway, "DELETE", f"combos/{combo['id']}").status_code == 204


def test_mappings_by_priority_and_the_combo_prefix(gateway, client, upstream):
    x = _api(
        gateway, "POST", "combos", json={"name": "X", "targets": [{"model": "pa/m1"}]}
    ).json()
    y = _api(
        gateway, "POST", "combos", json={"name": "Y", "targets": [{"model": "pb/m2"}]}
    ).json()
    first = _api(
        gateway,
        "POST",
        "model-combo-mappings",
        json={"pattern": "gpt-*", "combo": "X", "priority": 10},
    ).json()
    second = _api(
        gateway,
        "POST",
        "model-combo-mappings",
        json={"pattern": "gpt-4*", "combo": "Y", "priority": 5},
    ).json()
    _wait_served(gateway)
    assert _route(client, "GPT-4o")[1]["route"] == "combo:X"
    assert _route(client, "combo/x")[1]["route"] == "combo:X"
    status, error = _route(client, "combo/nope")
    assert (status, error["code"], error["param"]) == (404, "model_not_found", "model")
    assert (
        _api(gateway, "PATCH", f"combos/{x['id']}", json={"active": False}).status_code
        == 200
    )
    _wait_served(gateway)
    assert _route(client, "GPT-4o")[1]["route"] == "combo:Y"
    for mapping in (first, second):
        _api(gateway, "DELETE", f"model-combo-mappings/{mapping['id']}")
    refused = _api(gateway, "DELETE", f"combos/{y['id']}")
    assert refused.status_code == 204
    _api(gateway, "DELETE", f"combos/{x['id']}")


def test_combo_names_ignore_case_and_reserved_names_are_refused(
    gateway, client, upstream
):
    team = _api(
        gateway,
        "POST",
        "combos",
        json={"name": "Squad", "targets": [{"model": "pa/m1"}]},
    ).json()
    _wait_served(gateway)
    assert _route(client, "squad")[1]["route"] == "combo:Squad"
    clash = _api(
        gateway,
        "POST",
        "combos",
        json={"name": "SQUAD", "targets": [{"model": "pa/m1"}]},
    )
    assert clash.status_code == 400
    assert "name" in clash.json()
    reserved = _api(
        gateway,
        "POST",
        "combos",
        json={"name": "auto", "targets": [{"model": "pa/m1"}]},
    )
    assert reserved.status_code == 400
    assert _route(client, "AUTO/Coding")[1]["route"] == "auto/coding"
    _api(gateway, "DELETE", f"combos/{team['id']}")


def test_a_referenced_combo_cannot_be_deleted(gateway, client, upstream):
    inner = _api(
        gateway,
        "POST",
        "combos",
        json={"name": "inner", "targets": [{"model": "pa/m1"}]},
    ).json()
    outer = _api(
        gateway,
        "POST",
        "combos",
        json={"name": "outer", "targets": [{"combo": "inner"}, {"model": "pb/m2"}]},
    ).json()
    refused = _api(gateway, "DELETE", f"combos/{inner['id']}")
    assert refused.status_code == 409
    assert "outer" in refused.text
    cycle = _api(
        gateway,
        "PUT",
        f"combos/{inner['id']}",
        json={"name": "inner", "targets": [{"combo": "outer"}]},
    )
    assert cycle.status_code == 400
    assert "inner \u2192 outer \u2192 inner" in cycle.text
    _wait_served(gateway)
    status, omni = _route(client, "outer")
    assert (status, omni["served_model"]) == (200, "pa/m1")
    _api(gateway, "DELETE", f"combos/{outer['id']}")
    _api(gateway, "DELETE", f"combos/{inner['id']}")
