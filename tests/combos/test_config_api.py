"""The control-plane REST API (spec 01 "Control-plane REST API", 03 §10, 08 §5)."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any

import pytest
from django.contrib.auth.models import Permission, User
from django.test import Client

from combos import services
from combos.api_auth import issue_admin_token
from combos.models import AdminToken, ApiKey, Combo, ModelComboMapping, SmartRoute
from providers.models import Connection, Provider
from providers.services import config_version

pytestmark = pytest.mark.django_db

GENERATED_KEY = re.compile(r"^sk-or-[A-Za-z0-9_-]{43}$")


def post(client: Client, url: str, body: Any) -> Any:
    return client.post(url, json.dumps(body), content_type="application/json")


def put(client: Client, url: str, body: Any) -> Any:
    return client.put(url, json.dumps(body), content_type="application/json")


def patch(client: Client, url: str, body: Any) -> Any:
    return client.patch(url, json.dumps(body), content_type="application/json")


# ------------------------------------------------------------------ access


def test_a_staff_session_can_use_the_api(
    world: dict[str, Provider], operator_client: Client
) -> None:
    response = operator_client.get("/api/combos")

    assert response.status_code == 200
    assert response.json() == []


def test_an_admin_token_can_use_the_api(
    world: dict[str, Provider], token_client: Client, make_combo: Callable[..., Combo]
) -> None:
    team = make_combo("team")

    response = token_client.get("/api/combos")

    assert response.status_code == 200
    assert response.json() == [
        {
            "id": team.id,
            "name": "team",
            "strategy": "priority",
            "active": True,
            "targets": [{"model": "pa/m1"}],
            "config": {},
        }
    ]


def test_an_admin_token_is_stored_only_as_a_hash(superuser: User) -> None:
    token = issue_admin_token(superuser, "ci")

    row = AdminToken.objects.get()
    assert re.fullmatch(r"omr-adm-[A-Za-z0-9_-]{43}", token)
    assert row.prefix == token[:12]
    assert token not in row.key_hash


def test_an_anonymous_request_is_unauthorised(anonymous_client: Client) -> None:
    response = anonymous_client.get("/api/combos")

    assert response.status_code == 401
    assert response.json()["error"]["type"] == "authentication_error"


def test_a_non_staff_session_is_forbidden(plain_user: User) -> None:
    client = Client()
    client.force_login(plain_user)

    response = client.get("/api/combos")

    assert response.status_code == 403
    assert response.json()["error"]["type"] == "permission_error"


@pytest.mark.parametrize(
    "header",
    ["Bearer omr-adm-not-a-real-token", "Bearer omr-adm-"],
)
def test_an_unknown_admin_token_is_unauthorised(header: str) -> None:
    client = Client(headers={"authorization": header})

    response = client.get("/api/combos")

    assert response.status_code == 401


def test_an_admin_token_of_a_non_operator_user_is_unauthorised(
    plain_user: User,
) -> None:
    token = issue_admin_token(plain_user)
    client = Client(headers={"authorization": f"Bearer {token}"})

    assert client.get("/api/combos").status_code == 401


def test_anonymous_writes_are_refused_and_write_nothing(
    world: dict[str, Provider], anonymous_client: Client
) -> None:
    response = post(anonymous_client, "/api/combos", {"name": "x", "targets": []})

    assert response.status_code == 401
    assert Combo.objects.count() == 0


# ------------------------------------------------------------------ combos


def test_a_combo_named_like_a_bare_model_is_created_with_a_warning(
    world: dict[str, Provider], operator_client: Client
) -> None:
    body = {"name": "m1", "strategy": "priority", "targets": [{"model": "pb/m2"}]}

    response = post(operator_client, "/api/combos", body)

    assert response.status_code == 201
    assert response.json()["warning"] == {
        "code": "COMBO_NAME_SHADOWS_MODEL",
        "modelId": "m1",
        "providerId": "pa",
    }
    assert response.json()["name"] == "m1"


def test_a_combo_with_an_ordinary_name_has_no_warning_key(
    world: dict[str, Provider], operator_client: Client
) -> None:
    body = {"name": "team", "strategy": "priority", "targets": [{"model": "pb/m2"}]}

    response = post(operator_client, "/api/combos", body)

    assert response.status_code == 201
    assert response.json() == {
        "id": Combo.objects.get().id,
        "name": "team",
        "strategy": "priority",
        "active": True,
        "targets": [{"model": "pb/m2"}],
        "config": {},
    }


def test_updating_a_combo_to_a_model_name_returns_the_warning(
    world: dict[str, Provider],
    operator_client: Client,
    make_combo: Callable[..., Combo],
) -> None:
    team = make_combo("team")

    response = put(
        operator_client,
        f"/api/combos/{team.id}",
        {"name": "M2", "targets": [{"model": "pa/m1"}]},
    )

    assert response.status_code == 200
    assert response.json()["warning"] == {
        "code": "COMBO_NAME_SHADOWS_MODEL",
        "modelId": "m2",
        "providerId": "pb",
    }


def test_a_combo_validation_error_is_a_400_naming_the_field(
    world: dict[str, Provider], operator_client: Client
) -> None:
    body = {"name": "team", "targets": [{"model": "opena/x"}]}

    response = post(operator_client, "/api/combos", body)

    assert response.status_code == 400
    assert response.json() == {
        "targets[0].model": ["unknown provider 'opena'"],
        "error": {
            "message": "targets[0].model: unknown provider 'opena'",
            "type": "invalid_request_error",
            "code": "invalid_config",
            "param": "targets[0].model",
        },
    }
    assert Combo.objects.count() == 0


def test_a_combo_name_differing_only_in_case_is_a_400_on_name(
    world: dict[str, Provider],
    operator_client: Client,
    make_combo: Callable[..., Combo],
) -> None:
    make_combo("Team")

    response = post(
        operator_client,
        "/api/combos",
        {"name": "TEAM", "targets": [{"model": "pa/m1"}]},
    )

    assert response.status_code == 400
    assert response.json()["error"]["param"] == "name"


def test_a_reserved_combo_name_is_a_400(
    world: dict[str, Provider], operator_client: Client
) -> None:
    response = post(
        operator_client,
        "/api/combos",
        {"name": "Auto", "targets": [{"model": "pa/m1"}]},
    )

    assert response.status_code == 400
    assert response.json()["name"] == ["'Auto' is reserved"]


def test_a_combo_ref_cycle_is_a_400_on_the_closing_target(
    world: dict[str, Provider],
    operator_client: Client,
    make_combo: Callable[..., Combo],
) -> None:
    b = make_combo("B")
    make_combo("A", targets=[{"combo": "B"}])

    response = put(
        operator_client,
        f"/api/combos/{b.id}",
        {"name": "B", "targets": [{"combo": "A"}]},
    )

    assert response.status_code == 400
    assert response.json()["error"]["param"] == "targets[0].combo"
    assert "B \u2192 A \u2192 B" in response.json()["error"]["message"]


def test_a_body_that_is_not_an_object_is_a_400(
    world: dict[str, Provider], operator_client: Client
) -> None:
    response = post(operator_client, "/api/combos", ["team"])

    assert response.status_code == 400
    assert response.json()["error"]["message"] == "body must be a JSON object"


def test_patching_a_combo_changes_only_the_given_fields(
    world: dict[str, Provider],
    operator_client: Client,
    make_combo: Callable[..., Combo],
) -> None:
    team = make_combo("team", targets=[{"model": "pa/m1"}, {"model": "pb/m2"}])

    response = patch(operator_client, f"/api/combos/{team.id}", {"strategy": "usage"})

    assert response.status_code == 200
    assert response.json()["strategy"] == "least-used"
    assert response.json()["targets"] == [{"model": "pa/m1"}, {"model": "pb/m2"}]


def test_deleting_a_combo_referenced_by_a_combo_and_a_mapping_is_a_409(
    world: dict[str, Provider],
    operator_client: Client,
    make_combo: Callable[..., Combo],
) -> None:
    other = make_combo("other")
    make_combo("team", targets=[{"combo": "other"}])
    services.save_mapping({"pattern": "gpt-*", "combo": "other"})

    response = operator_client.delete(f"/api/combos/{other.id}")

    assert response.status_code == 409
    assert response.json()["error"]["message"] == (
        "combo 'other' is referenced by: combo team, mapping gpt-*"
    )
    assert Combo.objects.filter(id=other.id).exists()


def test_deleting_an_unreferenced_combo_is_a_204(
    world: dict[str, Provider],
    operator_client: Client,
    make_combo: Callable[..., Combo],
) -> None:
    team = make_combo("team")

    response = operator_client.delete(f"/api/combos/{team.id}")

    assert response.status_code == 204
    assert Combo.objects.count() == 0


def test_an_unknown_combo_id_is_a_404(operator_client: Client) -> None:
    assert operator_client.get("/api/combos/999999").status_code == 404


# ------------------------------------------------------------------ secrets


def test_a_connection_secret_is_write_only(
    world: dict[str, Provider], superuser_client: Client
) -> None:
    body = {"provider": "pa", "name": "extra", "api_key": "sk-upstream-secret-7890"}

    created = post(superuser_client, "/api/connections", body)
    listed = superuser_client.get("/api/connections")
    fetched = superuser_client.get(f"/api/connections/{created.json()['id']}")

    assert created.status_code == 201
    connection = Connection.objects.get(name="extra")
    for response in (created, listed, fetched):
        text = response.content.decode()
        assert "sk-upstream-secret-7890" not in text
        assert connection.api_key_encrypted not in text
        assert '"api_key"' not in text
    assert fetched.json()["has_api_key"] is True
    assert "7890" not in fetched.content.decode()  # no part of the key (issue #15)


def test_an_env_reference_is_not_returned_either(
    world: dict[str, Provider], superuser_client: Client
) -> None:
    body = {"provider": "pa", "name": "extra", "api_key": "env:PA_SECRET"}

    response = post(superuser_client, "/api/connections", body)

    assert response.status_code == 201
    assert "PA_SECRET" not in response.content.decode()
    assert Connection.objects.get(name="extra").api_key_ref == "env:PA_SECRET"


def test_updating_a_connection_without_a_secret_keeps_the_stored_one(
    world: dict[str, Provider], superuser_client: Client
) -> None:
    created = post(
        superuser_client,
        "/api/connections",
        {"provider": "pa", "name": "extra", "api_key": "sk-upstream-secret-7890"},
    ).json()
    token = Connection.objects.get(name="extra").api_key_encrypted

    response = patch(
        superuser_client, f"/api/connections/{created['id']}", {"priority": 5}
    )

    assert response.status_code == 200
    connection = Connection.objects.get(name="extra")
    assert (connection.priority, connection.api_key_encrypted) == (5, token)


def test_a_connection_for_an_unknown_provider_is_a_400(operator_client: Client) -> None:
    response = post(
        operator_client, "/api/connections", {"provider": "nope", "name": "x"}
    )

    assert response.status_code == 400
    assert response.json()["error"]["param"] == "provider"


def test_changing_a_secret_needs_the_change_provider_permission(
    world: dict[str, Provider], operator_user: User, operator_client: Client
) -> None:
    body = {"provider": "pa", "name": "extra", "api_key": "sk-upstream-secret-7890"}

    refused = post(operator_client, "/api/connections", body)
    operator_user.user_permissions.add(
        Permission.objects.get(codename="change_provider")
    )
    allowed = post(operator_client, "/api/connections", body)

    assert refused.status_code == 403
    assert allowed.status_code == 201


def test_changing_a_base_url_needs_the_change_provider_permission(
    world: dict[str, Provider], operator_user: User, operator_client: Client
) -> None:
    pa = world["pa"]

    refused = patch(
        operator_client, f"/api/providers/{pa.id}", {"base_url": "http://x/v1"}
    )
    assert refused.status_code == 403
    assert Provider.objects.get(id=pa.id).base_url == "http://127.0.0.1:9/v1"
    operator_user.user_permissions.add(
        Permission.objects.get(codename="change_provider")
    )
    allowed = patch(
        operator_client, f"/api/providers/{pa.id}", {"base_url": "http://x/v1"}
    )
    assert allowed.status_code == 200
    assert Provider.objects.get(id=pa.id).base_url == "http://x/v1"


def test_creating_an_api_key_returns_the_plaintext_once(
    world: dict[str, Provider], operator_client: Client
) -> None:
    created = post(operator_client, "/api/api-keys", {"name": "ci", "rpm": 60})
    fetched = operator_client.get(f"/api/api-keys/{created.json()['id']}")
    listed = operator_client.get("/api/api-keys")

    assert created.status_code == 201
    plaintext = created.json()["key"]
    assert GENERATED_KEY.fullmatch(plaintext)
    assert created.json()["prefix"] == plaintext[:12]
    for response in (fetched, listed):
        assert plaintext not in response.content.decode()
        assert ApiKey.objects.get().key_hash not in response.content.decode()
    assert "key" not in fetched.json()


def test_updating_an_api_key_returns_no_key(
    world: dict[str, Provider],
    operator_client: Client,
    make_api_key: Callable[..., Any],
) -> None:
    key, _ = make_api_key("ci")

    response = patch(operator_client, f"/api/api-keys/{key.id}", {"rpm": 10})

    assert response.status_code == 200
    assert "key" not in response.json()
    assert ApiKey.objects.get().rpm == 10


def test_an_api_key_failover_error_names_the_field(
    world: dict[str, Provider], operator_client: Client
) -> None:
    body = {"name": "ci", "failover_defaults": {"models": ["pa/m1", "opena/x"]}}

    response = post(operator_client, "/api/api-keys", body)

    assert response.status_code == 400
    assert response.json()["error"]["param"] == "failover_defaults.models[1]"
    assert ApiKey.objects.count() == 0


def test_a_provider_named_auto_is_a_400(operator_client: Client) -> None:
    response = post(
        operator_client,
        "/api/providers",
        {"slug": "AUTO", "kind": "openai", "base_url": "http://x/v1"},
    )

    assert response.status_code == 400
    assert response.json()["slug"] == ["'AUTO' is reserved"]


def test_a_smart_alias_equal_to_a_combo_is_created_with_a_warning(
    world: dict[str, Provider],
    operator_client: Client,
    make_combo: Callable[..., Combo],
) -> None:
    make_combo("team")

    response = post(
        operator_client,
        "/api/smart-routes",
        {"alias": "team", "easy": "pa/m1", "hard": "pb/m2"},
    )

    assert response.status_code == 201
    assert response.json()["warning"] == {
        "code": "SMART_ALIAS_SHADOWS_MODEL",
        "modelId": "team",
        "providerId": None,
    }
    assert SmartRoute.objects.count() == 1


def test_a_smart_alias_equal_to_a_model_id_is_created_with_a_warning(
    world: dict[str, Provider], operator_client: Client
) -> None:
    response = post(
        operator_client,
        "/api/smart-routes",
        {"alias": "M2", "easy": "pa/m1", "hard": "pc/m3"},
    )

    assert response.status_code == 201
    assert response.json()["warning"] == {
        "code": "SMART_ALIAS_SHADOWS_MODEL",
        "modelId": "m2",
        "providerId": "pb",
    }


def test_a_smart_alias_shadowing_nothing_has_no_warning_key(
    world: dict[str, Provider], operator_client: Client
) -> None:
    response = post(
        operator_client,
        "/api/smart-routes",
        {"alias": "normal", "easy": "pa/m1", "hard": "pc/m3"},
    )

    assert response.status_code == 201
    assert "warning" not in response.json()


# ------------------------------------------------------------------ revision


def write_requests(
    world: dict[str, Provider], make_combo: Callable[..., Combo], key: ApiKey
) -> list[tuple[str, str, dict[str, Any] | None]]:
    team = make_combo("team")
    loose = make_combo("loose")
    return [
        ("post", "/api/combos", {"name": "new", "targets": [{"model": "pa/m1"}]}),
        (
            "put",
            f"/api/combos/{team.id}",
            {"name": "team", "targets": [{"model": "pb/m2"}]},
        ),
        ("patch", f"/api/combos/{team.id}", {"active": False}),
        ("delete", f"/api/combos/{loose.id}", None),
        ("post", "/api/model-combo-mappings", {"pattern": "x*", "combo": "team"}),
        ("post", "/api/providers", {"slug": "pz", "kind": "mock"}),
        ("patch", f"/api/providers/{world['pc'].id}", {"kind": "openai"}),
        ("post", "/api/connections", {"provider": "pb", "name": "second"}),
        ("post", "/api/api-keys", {"name": "other"}),
        ("patch", f"/api/api-keys/{key.id}", {"rpm": 5}),
        ("post", "/api/candidate-overrides", {"api_key": "ci", "channel": "coding"}),
        ("post", "/api/smart-routes", {"alias": "n", "easy": "pa/m1", "hard": "team"}),
        ("delete", f"/api/api-keys/{key.id}", None),
        ("delete", f"/api/providers/{world['pc'].id}", None),
    ]


def test_every_write_bumps_the_config_revision(
    world: dict[str, Provider],
    make_combo: Callable[..., Combo],
    make_api_key: Callable[..., Any],
    superuser_client: Client,
) -> None:
    key, _ = make_api_key("ci")
    requests = write_requests(world, make_combo, key)

    for method, url, body in requests:
        before = config_version()
        call = getattr(superuser_client, method)
        response = (
            call(url, json.dumps(body), content_type="application/json")
            if body is not None
            else call(url)
        )
        assert response.status_code in (200, 201, 204), (url, response.content)
        assert config_version() > before, (method, url)


def test_a_rejected_write_does_not_bump_the_config_revision(
    world: dict[str, Provider], operator_client: Client
) -> None:
    before = config_version()

    post(operator_client, "/api/combos", {"name": "x", "targets": []})
    post(
        operator_client, "/api/model-combo-mappings", {"pattern": "x", "combo": "nope"}
    )

    assert config_version() == before
    assert ModelComboMapping.objects.count() == 0


# ------------------------------------------------------------------ schema


def test_the_schema_endpoint_returns_an_openapi_document(
    operator_client: Client,
) -> None:
    response = operator_client.get("/api/schema/", {"format": "json"})

    assert response.status_code == 200
    document = json.loads(response.content)
    assert document["openapi"].startswith("3.")
    assert document["info"]["title"] == "OmniRoute control plane"
    assert {"/api/combos", "/api/api-keys", "/api/connections"} <= {
        path.rstrip("/") for path in document["paths"]
    }


def test_the_schema_endpoint_needs_staff(anonymous_client: Client) -> None:
    assert anonymous_client.get("/api/schema/").status_code == 401
