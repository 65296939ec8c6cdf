"""Field-level change history in the admin (issue #15): what changed, not which."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import pytest
import yaml
from django.contrib.admin.models import ADDITION, CHANGE, DELETION, LogEntry
from django.test import Client
from django.urls import reverse

from combos.config_export import export_yaml
from combos.models import Combo, SmartRoute
from providers.admin_history import diff_text
from providers.models import Connection, Provider

pytestmark = pytest.mark.django_db


def _last_message() -> str:
    return str(LogEntry.objects.order_by("-action_time").first().get_change_message())


def test_a_combo_edit_logs_each_changed_field_with_old_and_new(
    world: dict[str, Provider],
    make_combo: Callable[..., Combo],
    superuser_client: Client,
) -> None:
    combo = make_combo("team", targets=[{"model": "pa/m1"}, {"model": "pb/m2"}])

    saved = superuser_client.post(
        reverse("admin:combos_combo_change", args=[combo.pk]),
        {
            "name": "team",
            "strategy": "round-robin",
            "active": "on",
            "targets_text": "pa/m1",
            "config_text": "",
        },
    )

    assert saved.status_code == 302
    message = _last_message()
    assert "strategy: priority → round-robin" in message
    assert (
        'targets: [{"model": "pa/m1"}, {"model": "pb/m2"}] → [{"model": "pa/m1"}]'
        in (message)
    )
    history = superuser_client.get(
        reverse("admin:combos_combo_history", args=[combo.pk])
    ).content.decode()
    assert "strategy: priority → round-robin" in history


def test_a_connection_edit_names_a_new_secret_without_showing_it(
    make_provider: Callable[..., Provider], superuser_client: Client
) -> None:
    make_provider("pa", api_key="sk-upstream-secret-7890")
    connection = Connection.objects.get()

    saved = superuser_client.post(
        reverse("admin:providers_connection_change", args=[connection.pk]),
        {
            "provider": connection.provider_id,
            "name": "main",
            "api_key": "sk-upstream-rotated-1111",
            "tier": connection.tier,
            "active": "on",
            "priority": "3",
            "max_concurrency": "0",
        },
    )

    assert saved.status_code == 302
    message = _last_message()
    assert "priority: 0 → 3" in message
    assert "api key: changed" in message  # issue #15 audit: the key was not named
    assert "sk-upstream" not in message
    assert "1111" not in message
    assert "7890" not in message


def test_the_diff_text_flattens_nested_values() -> None:
    before = {"breaker": {"open_seconds": 30}, "exploration_rate": 0.05}
    after = {"breaker": {"open_seconds": 60}, "hide_paid_models": True}

    assert diff_text(before, after) == (
        "breaker.open_seconds: 30 → 60; exploration_rate: 0.05 → —; "
        "hide_paid_models: — → true"
    )


def test_an_unchanged_key_is_not_logged_and_a_removed_one_is(
    make_provider: Callable[..., Provider], superuser_client: Client
) -> None:
    make_provider("pa", api_key="sk-upstream-secret-7890")
    connection = Connection.objects.get()
    form = {
        "provider": connection.provider_id,
        "name": "main",
        "tier": connection.tier,
        "active": "on",
        "priority": "0",
        "max_concurrency": "0",
    }
    url = reverse("admin:providers_connection_change", args=[connection.pk])

    assert superuser_client.post(url, {**form, "priority": "1"}).status_code == 302
    assert "api key" not in _last_message()  # left empty: the stored key is kept
    assert (
        superuser_client.post(url, {**form, "clear_api_key": "on"}).status_code == 302
    )
    assert "api key: removed" in _last_message()


# -- edits outside the admin's forms: the REST API and config imports ---------------


def _history(client: Client, obj: Any) -> str:
    meta = obj._meta
    url = reverse(f"admin:{meta.app_label}_{meta.model_name}_history", args=[obj.pk])
    return str(client.get(url).content.decode())


def test_a_rest_edit_is_in_the_history_with_its_fields_and_the_api_user(
    world: dict[str, Provider],
    make_combo: Callable[..., Combo],
    token_client: Client,
    superuser_client: Client,
) -> None:
    combo = make_combo("team", targets=[{"model": "pa/m1"}, {"model": "pb/m2"}])

    edited = token_client.patch(
        f"/api/combos/{combo.pk}",
        {"strategy": "round-robin"},
        content_type="application/json",
    )

    assert edited.status_code == 200, edited.content
    entry = LogEntry.objects.get(object_id=str(combo.pk), action_flag=CHANGE)
    assert entry.user.username == "root"  # the token's user
    assert entry.get_change_message() == (
        "REST API: changed strategy: priority → round-robin."
    )
    assert "REST API: changed strategy: priority → round-robin." in _history(
        superuser_client, combo
    )


def test_a_rest_create_and_delete_are_in_the_history(
    world: dict[str, Provider], superuser_client: Client
) -> None:
    created = superuser_client.post(
        "/api/smart-routes",
        {"alias": "normal", "easy": "pa/m1", "hard": "pb/m2"},
        content_type="application/json",
    )
    assert created.status_code == 201, created.content
    pk = created.json()["id"]

    assert superuser_client.delete(f"/api/smart-routes/{pk}").status_code == 204

    entries = LogEntry.objects.filter(object_id=str(pk)).order_by("action_time")
    assert [(e.action_flag, e.get_change_message()) for e in entries] == [
        (ADDITION, "REST API: added."),
        (DELETION, "REST API: deleted."),
    ]
    assert {e.user.username for e in entries} == {"root"}


def test_a_rest_edit_that_fails_validation_logs_nothing(
    world: dict[str, Provider], make_combo: Callable[..., Combo], token_client: Client
) -> None:
    combo = make_combo("team")

    refused = token_client.patch(
        f"/api/combos/{combo.pk}",
        {"strategy": "no-such-strategy"},
        content_type="application/json",
    )

    assert refused.status_code == 400
    assert not LogEntry.objects.exists()


def test_a_command_line_import_is_in_the_history_as_config_import(
    small_config: Callable[[], dict[str, Any]],
    import_data: Callable[..., Any],
    superuser_client: Client,
) -> None:
    data = small_config()
    import_data(data)
    LogEntry.objects.all().delete()
    data["combos"][0]["strategy"] = "round-robin"
    data["providers"][0]["connections"][0]["priority"] = 4

    import_data(data)

    combo = Combo.objects.get(name="team")
    connection = Connection.objects.get(provider__slug="pa", name="main")
    entry = LogEntry.objects.get(object_id=str(combo.pk), content_type__model="combo")
    assert entry.user.username == "config-import"
    assert not entry.user.is_active
    assert not entry.user.has_usable_password()
    assert entry.get_change_message() == (
        "config import: changed strategy: priority → round-robin."
    )
    assert "config import: changed priority: 0 → 4." in _history(
        superuser_client, connection
    )
    assert "config import: changed strategy: priority → round-robin." in _history(
        superuser_client, combo
    )
    # an import that changes nothing logs nothing
    count = LogEntry.objects.count()
    import_data(data)
    assert LogEntry.objects.count() == count


def test_an_import_logs_additions_and_pruned_deletions(
    small_config: Callable[[], dict[str, Any]], import_data: Callable[..., Any]
) -> None:
    data = small_config()
    import_data(data)
    route = SmartRoute.objects.get(alias="normal")
    assert LogEntry.objects.filter(
        object_id=str(route.pk),
        action_flag=ADDITION,
        change_message="config import: added.",
    ).exists()
    data["smart_routes"] = []

    import_data(data, prune=True)

    deleted = LogEntry.objects.get(object_id=str(route.pk), action_flag=DELETION)
    assert deleted.get_change_message() == "config import: deleted."
    assert deleted.object_repr == str(route)


def test_an_admin_upload_is_in_the_history_as_config_import_by_its_user(
    small_config: Callable[[], dict[str, Any]],
    import_data: Callable[..., Any],
    superuser_client: Client,
) -> None:
    import_data(small_config())
    edited = yaml.safe_load(export_yaml())
    edited["combos"][0]["strategy"] = "round-robin"
    text = yaml.safe_dump(edited, sort_keys=False)
    page = superuser_client.post("/admin/config/", {"action": "preview", "text": text})
    digest = re.search(r'name="digest" value="([0-9a-f]{64})"', page.content.decode())
    assert digest is not None

    superuser_client.post(
        "/admin/config/", {"action": "apply", "text": text, "digest": digest.group(1)}
    )

    combo = Combo.objects.get(name="team")
    entry = LogEntry.objects.filter(
        object_id=str(combo.pk), content_type__model="combo", action_flag=CHANGE
    ).get()
    assert entry.user.username == "root"
    assert entry.get_change_message() == (
        "config import: changed strategy: priority → round-robin."
    )
    history = _history(superuser_client, combo)
    assert "config import: changed strategy: priority → round-robin." in history
    assert "root" in history
