"""Issue #15 guard rail: a name that shadows a live combo or model needs a confirmation
naming it and its last 24 h of traffic; explain route shows the shadowing."""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from combos import services
from combos.models import Combo, SmartRoute
from gateway.config.snapshot import build_table
from gateway.ops.explain import explain
from providers.models import Provider
from telemetry.models import RequestLog

pytestmark = pytest.mark.django_db


def _asked_for(name: str, times: int, *, hours_ago: float = 1) -> None:
    for _ in range(times):
        RequestLog.objects.create(
            created_at=timezone.now() - timedelta(hours=hours_ago),
            endpoint="chat",
            requested_model=name,
            status="success",
            http_status=200,
        )


def _smart_form(**fields: str) -> dict[str, str]:
    return {
        "alias": "team",
        "easy": "pa/m1",
        "hard": "pb/m2",
        "threshold": "5",
        "session_ttl_seconds": "1800",
        **fields,
    }


def test_a_smart_alias_named_like_a_live_combo_needs_a_confirmation(
    world: dict[str, Provider],
    make_combo: Callable[..., Combo],
    superuser_client: Client,
) -> None:
    make_combo("team")
    _asked_for("team", 3)
    _asked_for("team", 2, hours_ago=30)  # older than the window

    refused = superuser_client.post(
        reverse("admin:combos_smartroute_add"), _smart_form()
    )

    assert refused.status_code == 200
    errors = refused.context["adminform"].form.errors["confirm_shadow"]
    assert errors == [
        '"team" is also the live combo team, which was asked for 3 time(s) in the '
        'last 24 h: after saving, requests for "team" go here instead. Tick the box '
        "to save anyway."
    ]
    assert not SmartRoute.objects.exists()

    saved = superuser_client.post(
        reverse("admin:combos_smartroute_add"), _smart_form(confirm_shadow="on")
    )

    assert saved.status_code == 302
    assert SmartRoute.objects.filter(alias="team").exists()


def test_a_combo_named_like_a_model_needs_a_confirmation_naming_the_model(
    world: dict[str, Provider], superuser_client: Client
) -> None:
    _asked_for("m1", 1)
    form = {
        "name": "m1",
        "strategy": "priority",
        "active": "on",
        "targets_text": "pb/m2",
        "config_text": "",
    }

    refused = superuser_client.post(reverse("admin:combos_combo_add"), form)

    assert refused.status_code == 200
    (error,) = refused.context["adminform"].form.errors["confirm_shadow"]
    assert error.startswith('"m1" is also the model pa/m1, which was asked for 1 ')
    assert not Combo.objects.filter(name="m1").exists()


def test_re_saving_a_confirmed_row_under_its_name_needs_no_new_tick(
    world: dict[str, Provider],
    make_combo: Callable[..., Combo],
    superuser_client: Client,
) -> None:
    make_combo("team")
    route = services.save_smart_route(
        {"alias": "team", "easy": "pa/m1", "hard": "pb/m2"}
    ).instance

    saved = superuser_client.post(
        reverse("admin:combos_smartroute_change", args=[route.pk]),
        _smart_form(threshold="6"),
    )

    assert saved.status_code == 302
    assert SmartRoute.objects.get(pk=route.pk).threshold == 6


def test_explain_route_shows_what_a_name_shadows(
    world: dict[str, Provider], make_combo: Callable[..., Combo]
) -> None:
    make_combo("team")
    make_combo("m1", targets=[{"model": "pb/m2"}])
    services.save_smart_route({"alias": "team", "easy": "pa/m1", "hard": "pb/m2"})
    table = build_table()

    alias: Any = explain(table, "team")
    combo: Any = explain(table, "m1")

    assert alias["shadowing"] == [
        "'team' is a smart alias: it shadows the combo 'team', which this name no "
        "longer reaches"
    ]
    assert combo["shadowing"] == [
        "'m1' is a combo: it shadows the model pa/m1 (ask for it by provider/model)"
    ]
    assert explain(table, "pa/m1")["shadowing"] == []


def test_a_threshold_above_the_highest_score_is_refused_in_words(
    world: dict[str, Provider], superuser_client: Client
) -> None:
    """Issue #15 audit: threshold 5000 was accepted (spec 05: scores reach 22)."""
    page = superuser_client.get(reverse("admin:combos_smartroute_add")).content
    assert "Scores run from 0 to 22" in page.decode()

    response = superuser_client.post(
        reverse("admin:combos_smartroute_add"),
        _smart_form(alias="fresh", threshold="5000"),
    )

    assert response.status_code == 200
    assert response.context["adminform"].form.errors["threshold"] == [
        "must be between 1 and 22: the classifier never scores more than 22, so a "
        "higher threshold sends every request to easy"
    ]
    assert not SmartRoute.objects.filter(alias="fresh").exists()
