"""REST authorisation follows the admin's model permissions (spec 08 §5.3, issue #16
point 2): for every resource and action, staff lacking the permission is refused
with 403 and nothing changes; the one permission lets the request through.  Secrets,
base URLs and moving a connection to another provider need change_provider."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest
from django.contrib.auth.models import Permission, User
from django.test import Client

from combos import services
from combos.api_auth import issue_admin_token
from combos.models import ApiKey, Combo, ModelComboMapping, SmartRoute
from providers.models import Connection, Provider

pytestmark = pytest.mark.django_db


def _send(client: Client, method: str, url: str, body: Any = None) -> Any:
    if body is None:
        return getattr(client, method)(url)
    return getattr(client, method)(
        url, json.dumps(body), content_type="application/json"
    )


@pytest.fixture
def staff(django_user_model: type[User]) -> tuple[User, Client]:
    """A staff user without permissions, seen through an admin token (as the audit
    did) and its client."""
    user = django_user_model.objects.create_user("nobody", is_staff=True)
    token = issue_admin_token(user, "tests")
    return user, Client(headers={"authorization": f"Bearer {token}"})


@pytest.fixture
def rows(
    world: dict[str, Provider], make_combo: Callable[..., Combo]
) -> dict[str, Any]:
    make_combo("team")
    spare = make_combo("spare")
    key = services.save_api_key({"name": "ci"}).instance
    mapping = services.save_mapping(
        {"pattern": "gpt-*", "combo": "team", "priority": 0}
    ).instance
    override = services.save_override(
        {"api_key": "ci", "channel": "coding", "exclude": []}
    ).instance
    route = services.save_smart_route(
        {"alias": "smart", "easy": "pa/m1", "hard": "pb/m2"}
    ).instance
    return {
        "combos": (spare.id, {"name": "t2", "targets": [{"model": "pa/m1"}]}),
        "model-combo-mappings": (
            mapping.id,
            {"pattern": "claude-*", "combo": "team", "priority": 1},
        ),
        "providers": (
            world["pc"].id,
            {"slug": "pz", "kind": "openai", "base_url": "http://127.0.0.1:9/v1"},
        ),
        "connections": (
            Connection.objects.get(provider__slug="pb", name="main").id,
            {"provider": "pb", "name": "extra"},
        ),
        "api-keys": (key.id, {"name": "ci2"}),
        "candidate-overrides": (
            override.id,
            {"api_key": "ci", "channel": "fast", "exclude": []},
        ),
        "smart-routes": (
            route.id,
            {"alias": "smart2", "easy": "pa/m1", "hard": "pb/m2"},
        ),
    }


MODELS = {
    "combos": ("combos", "combo", Combo),
    "model-combo-mappings": ("combos", "modelcombomapping", ModelComboMapping),
    "providers": ("providers", "provider", Provider),
    "connections": ("providers", "connection", Connection),
    "api-keys": ("combos", "apikey", ApiKey),
    "candidate-overrides": ("combos", "candidateoverride", None),
    "smart-routes": ("combos", "smartroute", SmartRoute),
}

#: (action, method, on an item, verb, body kind, success status)
ACTIONS = [
    ("list", "get", False, "view", None, 200),
    ("retrieve", "get", True, "view", None, 200),
    ("create", "post", False, "add", "new", 201),
    ("partial_update", "patch", True, "change", "same", 200),
    ("destroy", "delete", True, "delete", None, 204),
]


def _grant(user: User, app: str, codename: str) -> None:
    user.user_permissions.add(
        Permission.objects.get(content_type__app_label=app, codename=codename)
    )


@pytest.mark.parametrize("resource", list(MODELS))
@pytest.mark.parametrize("action", ACTIONS, ids=[a[0] for a in ACTIONS])
def test_each_action_needs_its_model_permission(staff, rows, resource, action):
    _, method, on_item, verb, body, status = action
    user, client = staff
    app, model_name, _ = MODELS[resource]
    pk, new = rows[resource]
    url = f"/api/{resource}/{pk}" if on_item else f"/api/{resource}"
    payload = new if body == "new" else ({} if body == "same" else None)
    before = client.get(f"/api/{resource}")  # refused too, but harmless
    assert before.status_code == 403

    refused = _send(client, method, url, payload)

    assert refused.status_code == 403, refused.content
    assert refused.json()["error"]["code"] == "permission_denied"
    assert f"{app}.{verb}_{model_name}" in refused.json()["error"]["message"]
    _grant(user, app, f"{verb}_{model_name}")
    if resource == "providers" and verb in ("add", "change"):
        _grant(user, "providers", "change_provider")  # a base URL is set
    allowed = _send(client, method, url, payload)
    assert allowed.status_code == status, allowed.content


def test_refused_writes_change_nothing(staff, rows):
    _, client = staff
    connection = Connection.objects.get(provider__slug="pb", name="main")
    connection.set_api_key("sk-upstream-secret-1234567890")
    connection.save()
    before = (connection.provider_id, connection.api_key_encrypted)

    moved = _send(
        client, "patch", f"/api/connections/{connection.id}", {"provider": "pa"}
    )
    cleared = _send(
        client, "patch", f"/api/connections/{connection.id}", {"api_key": ""}
    )
    key = _send(client, "post", "/api/api-keys", {"name": "sneaky"})
    read = client.get("/api/connections")

    assert [r.status_code for r in (moved, cleared, key, read)] == [403] * 4
    connection.refresh_from_db()
    assert (connection.provider_id, connection.api_key_encrypted) == before
    assert not ApiKey.objects.filter(name="sneaky").exists()


def test_moving_or_clearing_a_secret_needs_change_provider(staff, rows):
    user, client = staff
    _grant(user, "providers", "change_connection")
    _grant(user, "providers", "view_connection")
    connection = Connection(provider=Provider.objects.get(slug="pb"), name="solo")
    connection.set_api_key("sk-upstream-secret-1234567890")
    connection.save()
    url = f"/api/connections/{connection.id}"

    moved = _send(client, "patch", url, {"provider": "pa"})
    cleared = _send(client, "patch", url, {"api_key": ""})
    tier = _send(client, "patch", url, {"tier": "pro"})

    assert (moved.status_code, cleared.status_code, tier.status_code) == (403, 403, 200)
    connection.refresh_from_db()
    assert connection.provider.slug == "pb"
    assert connection.has_api_key
    _grant(user, "providers", "change_provider")
    assert _send(client, "patch", url, {"provider": "pa"}).status_code == 200
    assert _send(client, "patch", url, {"api_key": ""}).status_code == 200
    connection.refresh_from_db()
    assert (connection.provider.slug, connection.has_api_key) == ("pa", False)


@pytest.mark.parametrize("url", ["/api/connections/reset-health", "ITEM"])
def test_resetting_health_needs_change_connection(staff, rows, url):
    user, client = staff
    if url == "ITEM":
        url = f"/api/connections/{rows['connections'][0]}/reset-health"
    assert client.post(url).status_code == 403
    _grant(user, "providers", "change_connection")
    assert client.post(url).status_code == 200


def test_the_auto_listing_needs_view_combo(staff, rows):
    user, client = staff
    assert client.get("/api/combos/auto").status_code == 403
    _grant(user, "combos", "view_combo")
    assert client.get("/api/combos/auto").status_code == 200


def test_a_superuser_may_do_everything(superuser, rows):
    client = Client()
    client.force_login(superuser)
    for resource in MODELS:
        assert client.get(f"/api/{resource}").status_code == 200
