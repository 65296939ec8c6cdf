"""Field-level change history in the admin (issue #15): what changed, not which."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from django.contrib.admin.models import LogEntry
from django.test import Client
from django.urls import reverse

from combos.models import Combo
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
