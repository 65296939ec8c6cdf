"""The admin over the configuration rows, seen by three personas: a superuser, staff
without permissions, and an anonymous visitor (spec 03 §1.3, 08 §5)."""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable
from typing import Any

import pytest
from django.contrib import admin
from django.contrib.messages import get_messages
from django.test import Client
from django.urls import reverse

from combos import services
from combos.models import ApiKey, Combo, GatewaySettings
from providers import crypto
from providers.models import Connection, Provider
from providers.services import config_version

pytestmark = pytest.mark.django_db

GENERATED_KEY = re.compile(r"sk-or-[A-Za-z0-9_-]{43}")
REGISTERED = sorted(
    (model._meta.app_label, model._meta.model_name) for model in admin.site._registry
)


def changelist(app_label: str, model_name: str) -> str:
    return reverse(f"admin:{app_label}_{model_name}_changelist")


def messages_of(response: Any) -> list[str]:
    return [str(m) for m in get_messages(response.wsgi_request)]


@pytest.fixture
def populated(
    world: dict[str, Provider],
    make_combo: Callable[..., Combo],
    make_api_key: Callable[..., Any],
) -> None:
    """One row of every kind, so changelists render real rows."""
    make_combo("team", targets=[{"model": "pa/m1"}, {"model": "pb/m2"}])
    make_api_key("ci")
    services.save_mapping({"pattern": "gpt-*", "combo": "team"})
    services.save_override({"api_key": "ci", "channel": "coding"})
    services.save_smart_route({"alias": "normal", "easy": "pa/m1", "hard": "team"})
    services.save_settings({"breaker": {"open_seconds": 30}})


# ------------------------------------------------------------------ access


@pytest.mark.parametrize(("app_label", "model_name"), REGISTERED)
def test_every_changelist_renders_for_a_superuser(
    populated: None, superuser_client: Client, app_label: str, model_name: str
) -> None:
    response = superuser_client.get(changelist(app_label, model_name), follow=True)

    assert response.status_code == 200  # the one settings row: its change form


@pytest.mark.parametrize(("app_label", "model_name"), REGISTERED)
def test_every_changelist_is_forbidden_to_staff_without_permissions(
    staff_client: Client, app_label: str, model_name: str
) -> None:
    response = staff_client.get(changelist(app_label, model_name))

    assert response.status_code == 403


@pytest.mark.parametrize(("app_label", "model_name"), REGISTERED)
def test_every_changelist_redirects_an_anonymous_visitor_to_login(
    anonymous_client: Client, app_label: str, model_name: str
) -> None:
    url = changelist(app_label, model_name)

    response = anonymous_client.get(url)

    assert response.status_code == 302
    assert response["Location"] == f"/admin/login/?next={url}"


@pytest.mark.parametrize(
    "model_name",
    ["combo", "modelcombomapping", "apikey", "candidateoverride", "smartroute"],
)
def test_every_config_add_form_renders_for_a_superuser(
    populated: None, superuser_client: Client, model_name: str
) -> None:
    response = superuser_client.get(reverse(f"admin:combos_{model_name}_add"))

    assert response.status_code == 200


def test_every_config_change_form_renders_for_a_superuser(
    populated: None, superuser_client: Client
) -> None:
    for model in (Combo, ApiKey, GatewaySettings, Provider, Connection):
        row = model.objects.first()
        url = reverse(
            f"admin:{model._meta.app_label}_{model._meta.model_name}_change",
            args=[row.pk],
        )
        assert superuser_client.get(url).status_code == 200, url


# ------------------------------------------------------------------ combos


def combo_form(**fields: str) -> dict[str, str]:
    return {
        "name": "team",
        "strategy": "priority",
        "active": "on",
        "targets_text": "pa/m1\npb/m2 weight=2",
        "config_text": "",
        **fields,
    }


def test_creating_a_combo_with_a_bad_target_shows_the_error_on_targets(
    world: dict[str, Provider], superuser_client: Client
) -> None:
    before = config_version()

    response = superuser_client.post(
        reverse("admin:combos_combo_add"),
        combo_form(targets_text="pa/m1\nopena/gpt-5"),
    )

    assert response.status_code == 200
    form = response.context["adminform"].form
    assert form.errors == {
        "targets_text": ["targets (row 2).model: unknown provider 'opena'"]
    }
    assert Combo.objects.count() == 0
    assert config_version() == before
    # the targets editor marks that cell alone: row 2 (from 1), its model
    bad = form.fields["targets_text"].widget.attrs["data-bad-cells"]
    assert json.loads(bad) == [
        {"row": 2, "cell": "target", "message": "unknown provider 'opena'"}
    ]
    assert "data-bad-cells" in response.content.decode()


def test_a_bad_target_timeout_marks_the_timeout_cell(
    world: dict[str, Provider], superuser_client: Client
) -> None:
    response = superuser_client.post(
        reverse("admin:combos_combo_add"),
        combo_form(targets_text="pa/m1\npb/m2 timeout_ms=5"),
    )

    form = response.context["adminform"].form
    cells = json.loads(form.fields["targets_text"].widget.attrs["data-bad-cells"])
    assert [(c["row"], c["cell"]) for c in cells] == [(2, "timeout_ms")]


def test_an_auto_option_error_on_its_own_field_is_just_the_message(
    world: dict[str, Provider], superuser_client: Client
) -> None:
    response = superuser_client.post(
        reverse("admin:combos_combo_add"),
        combo_form(strategy="auto", cfg_auto_explorationRate="1.5"),
    )

    errors = response.context["adminform"].form.errors
    assert errors["cfg_auto_explorationRate"] == ["must be between 0 and 1"]


def test_creating_a_combo_writes_its_targets_and_bumps_the_revision(
    world: dict[str, Provider], superuser_client: Client
) -> None:
    before = config_version()

    response = superuser_client.post(
        reverse("admin:combos_combo_add"),
        combo_form(
            targets_text="pa/m1@backup timeout_ms=5000\npb/m2 weight=2",
            config_text='{"connectionAwareExpansion": true}',
        ),
    )

    assert response.status_code == 302
    team = Combo.objects.get()
    assert team.config == {"connectionAwareExpansion": True}
    assert [
        (t.model, t.connection, t.weight, t.timeout_ms) for t in team.targets.all()
    ] == [("pa/m1", "backup", None, 5000), ("pb/m2", "", 2.0, None)]
    assert config_version() == before + 1


def test_a_combo_with_bad_config_json_shows_the_error_on_config(
    world: dict[str, Provider], superuser_client: Client
) -> None:
    response = superuser_client.post(
        reverse("admin:combos_combo_add"), combo_form(config_text="{oops")
    )

    errors = response.context["adminform"].form.errors
    assert list(errors) == ["config_text"]
    assert errors["config_text"][0].startswith("not valid JSON")
    assert Combo.objects.count() == 0


def test_a_combo_named_like_a_model_is_saved_with_a_warning_message(
    world: dict[str, Provider], superuser_client: Client
) -> None:
    response = superuser_client.post(
        reverse("admin:combos_combo_add"),
        combo_form(name="M1", targets_text="pb/m2", confirm_shadow="on"),
    )

    assert response.status_code == 302
    assert (
        'Combo "M1" has the same name as the model m1 of pa: requests for "M1" go '
        "to this combo instead."
    ) in messages_of(response)


def test_a_duplicate_combo_name_in_another_case_is_an_error_on_name(
    world: dict[str, Provider],
    superuser_client: Client,
    make_combo: Callable[..., Combo],
) -> None:
    make_combo("Team")

    response = superuser_client.post(
        reverse("admin:combos_combo_add"), combo_form(name="TEAM")
    )

    assert response.context["adminform"].form.errors == {
        "name": ["a combo named 'Team' already exists (names are unique ignoring case)"]
    }


def test_changing_a_combo_bumps_the_revision(
    world: dict[str, Provider],
    superuser_client: Client,
    make_combo: Callable[..., Combo],
) -> None:
    team = make_combo("team")
    before = config_version()

    response = superuser_client.post(
        reverse("admin:combos_combo_change", args=[team.pk]),
        combo_form(strategy="round-robin"),
    )

    assert response.status_code == 302
    assert Combo.objects.get().strategy == "round-robin"
    assert config_version() == before + 1


def test_deleting_a_referenced_combo_in_the_admin_is_refused(
    world: dict[str, Provider],
    superuser_client: Client,
    make_combo: Callable[..., Combo],
) -> None:
    other = make_combo("other")
    make_combo("team", targets=[{"combo": "other"}])

    response = superuser_client.post(
        reverse("admin:combos_combo_delete", args=[other.pk]), {"post": "yes"}
    )

    assert response.status_code == 200
    assert "combo team" in response.content.decode()
    assert Combo.objects.filter(pk=other.pk).exists()


# ------------------------------------------------------------------ API keys


def test_creating_an_api_key_shows_the_plaintext_once_and_stores_its_hash(
    world: dict[str, Provider], superuser_client: Client
) -> None:
    response = superuser_client.post(
        reverse("admin:combos_apikey_add"),
        {"name": "ci", "active": "on", "budget_period": "month"},
        follow=True,
    )

    shown = [m for m in messages_of(response) if "shown once" in m]
    assert len(shown) == 1
    plaintext = GENERATED_KEY.search(shown[0]).group(0)
    key = ApiKey.objects.get()
    assert key.key_hash == hashlib.sha256(plaintext.encode()).hexdigest()
    assert key.prefix == plaintext[:12]
    page = superuser_client.get(reverse("admin:combos_apikey_change", args=[key.pk]))
    assert plaintext not in page.content.decode()
    assert key.prefix in page.content.decode()


def test_an_api_key_with_bad_failover_defaults_shows_the_error_on_that_field(
    world: dict[str, Provider], superuser_client: Client
) -> None:
    response = superuser_client.post(
        reverse("admin:combos_apikey_add"),
        {
            "name": "ci",
            "active": "on",
            "budget_period": "month",
            "allowed_text": "pa/*",
            "fo_model_1": "pa/m1",
            "fo_model_2": "pb/m2",
        },
    )

    assert response.context["adminform"].form.errors == {
        "fo_model_2": [  # on its own field: the message, without the key's path
            "'pb/m2' is not permitted by allowed_models"
        ]
    }
    assert ApiKey.objects.count() == 0


def test_failover_defaults_are_picked_from_the_routes_and_saved_in_order(
    world: dict[str, Provider],
    make_combo: Callable[..., Combo],
    superuser_client: Client,
) -> None:
    make_combo("team")
    page = superuser_client.get(reverse("admin:combos_apikey_add")).content.decode()
    assert '<option value="team">team (combo)</option>' in page
    assert '<option value="pb/m2">pb/m2</option>' in page
    assert 'name="fo_on" value="rate_limit"' in page

    saved = superuser_client.post(
        reverse("admin:combos_apikey_add"),
        {
            "name": "ci",
            "active": "on",
            "budget_period": "month",
            "fo_model_1": "team",
            "fo_model_2": "pb/m2",
            "fo_timeout_ms": "30000",
            "fo_on": ["rate_limit", "server_error"],
        },
    )

    assert saved.status_code == 302
    key = ApiKey.objects.get(name="ci")
    assert key.failover_defaults["models"] == ["team", "pb/m2"]
    assert key.failover_defaults["timeout_ms"] == 30000
    assert set(key.failover_defaults["on"]) == {"rate_limit", "server_error"}
    form = (
        superuser_client.get(reverse("admin:combos_apikey_change", args=[key.pk]))
        .context["adminform"]
        .form
    )
    assert form["fo_model_1"].value() == "team"
    assert form["fo_model_2"].value() == "pb/m2"
    assert form["fo_timeout_ms"].value() == 30000


# ------------------------------------------------------------------ connections


def test_a_literal_connection_secret_is_never_rendered(
    make_provider: Callable[..., Provider], superuser_client: Client
) -> None:
    make_provider("pa", api_key="sk-upstream-secret-7890")
    connection = Connection.objects.get()

    pages = [
        superuser_client.get(
            reverse("admin:providers_connection_change", args=[connection.pk])
        ),
        superuser_client.get(changelist("providers", "connection")),
        superuser_client.get(
            reverse("admin:providers_provider_change", args=[connection.provider_id])
        ),
    ]

    for page in pages:
        html = page.content.decode()
        assert "sk-upstream-secret-7890" not in html
        assert connection.api_key_encrypted not in html
        assert "7890" not in html  # no part of it either (issue #15 audit)
    assert "api key set" in pages[1].content.decode()


def test_a_typed_secret_survives_a_failed_save_and_a_stored_one_stays_hidden(
    make_provider: Callable[..., Provider], superuser_client: Client
) -> None:
    provider = make_provider("pa", api_key="sk-upstream-secret-7890")
    stored = Connection.objects.get()

    refused = superuser_client.post(
        reverse("admin:providers_connection_add"),
        {
            "provider": provider.pk,
            "name": "bad name",  # refused: a space
            "api_key": "sk-typed-just-now-4321",
            "tier": "standard",
            "active": "on",
            "priority": "0",
            "max_concurrency": "0",
        },
    )

    html = refused.content.decode()
    assert refused.status_code == 200
    assert 'value="sk-typed-just-now-4321"' in html  # not typed twice
    assert "&#x27;bad name&#x27; is not allowed here: use letters, digits" in html
    assert "sk-upstream-secret-7890" not in html
    assert stored.api_key_encrypted not in html


def test_an_env_reference_is_shown_as_is(
    make_provider: Callable[..., Provider], superuser_client: Client
) -> None:
    make_provider("pa", api_key="env:PA_SECRET")
    connection = Connection.objects.get()

    page = superuser_client.get(
        reverse("admin:providers_connection_change", args=[connection.pk])
    )

    assert "env:PA_SECRET" in page.content.decode()


def connection_form(**fields: str) -> dict[str, str]:
    return {
        "provider": "",
        "name": "main",
        "api_key": "",
        "tier": "standard",
        "default_model": "",
        "active": "on",
        "priority": "0",
        "max_concurrency": "0",
        "quota_remaining_percent": "",
        "quota_reset_interval_seconds": "",
        **fields,
    }


def test_saving_a_connection_without_a_secret_keeps_it_and_bumps_the_revision(
    make_provider: Callable[..., Provider], superuser_client: Client
) -> None:
    provider = make_provider("pa", api_key="sk-upstream-secret-7890")
    connection = Connection.objects.get()
    token = connection.api_key_encrypted
    before = config_version()

    response = superuser_client.post(
        reverse("admin:providers_connection_change", args=[connection.pk]),
        connection_form(provider=str(provider.pk), priority="3"),
    )

    assert response.status_code == 302
    connection.refresh_from_db()
    assert (connection.priority, connection.api_key_encrypted) == (3, token)
    assert config_version() == before + 1


def test_saving_a_new_connection_secret_encrypts_it(
    make_provider: Callable[..., Provider], superuser_client: Client
) -> None:
    provider = make_provider("pa")
    connection = Connection.objects.get()

    superuser_client.post(
        reverse("admin:providers_connection_change", args=[connection.pk]),
        connection_form(provider=str(provider.pk), api_key="sk-new-secret-4321"),
    )

    connection.refresh_from_db()
    assert crypto.decrypt(connection.api_key_encrypted) == "sk-new-secret-4321"


def test_saving_a_provider_bumps_the_revision(
    world: dict[str, Provider], superuser_client: Client
) -> None:
    pa = world["pa"]
    before = config_version()

    response = superuser_client.post(
        reverse("admin:providers_provider_change", args=[pa.pk]),
        {
            "slug": "pa",
            "kind": "openai",
            "base_url": "http://127.0.0.1:8/v1",
            "connections-TOTAL_FORMS": "0",
            "connections-INITIAL_FORMS": "0",
            "models-TOTAL_FORMS": "0",
            "models-INITIAL_FORMS": "0",
        },
    )

    assert response.status_code == 302
    assert Provider.objects.get(pk=pa.pk).base_url == "http://127.0.0.1:8/v1"
    assert config_version() > before


def test_a_provider_named_auto_is_refused_in_the_admin(
    superuser_client: Client,
) -> None:
    response = superuser_client.post(
        reverse("admin:providers_provider_add"),
        {
            "slug": "auto",
            "kind": "openai",
            "base_url": "http://127.0.0.1:8/v1",
            "connections-TOTAL_FORMS": "0",
            "connections-INITIAL_FORMS": "0",
            "models-TOTAL_FORMS": "0",
            "models-INITIAL_FORMS": "0",
        },
    )

    assert response.context["adminform"].form.errors == {"slug": ["'auto' is reserved"]}
    assert Provider.objects.count() == 0


# ------------------------------------------------------------------ settings


def test_saving_gateway_settings_validates_and_bumps_the_revision(
    populated: None, superuser_client: Client
) -> None:
    row = GatewaySettings.objects.get()
    url = reverse("admin:combos_gatewaysettings_change", args=[row.pk])
    before = config_version()

    refused = superuser_client.post(
        url,
        {
            "self_healing__exclusion_seconds": "600",
            "self_healing__max_exclusion_seconds": "60",
        },
    )
    saved = superuser_client.post(
        url, {"exploration_rate": "0.1", "promptcache_affinity": "false"}
    )

    assert refused.context["adminform"].form.errors == {
        "self_healing__max_exclusion_seconds": [
            "must be at least exclusion_seconds (600)"
        ]
    }
    assert saved.status_code == 302
    assert GatewaySettings.objects.get().data == {
        "exploration_rate": 0.1,
        "promptcache_affinity": False,
    }
    assert config_version() == before + 1


def test_the_settings_form_has_a_field_per_key_with_its_default_and_range(
    populated: None, superuser_client: Client
) -> None:
    row = GatewaySettings.objects.get()  # breaker.open_seconds = 30 is stored
    page = superuser_client.get(
        reverse("admin:combos_gatewaysettings_change", args=[row.pk])
    )
    form = page.context["adminform"].form
    html = page.content.decode()

    assert form["breaker__open_seconds"].value() == 30
    assert "First open period; doubled after each failed probe. Default 30; " in html
    assert "allowed 1 to 86 400." in html
    assert "allowed 1 000 to 3 600 000." in html  # not 3.6e+06 (issue #15 audit)
    assert '<option value="" selected>default (balanced)</option>' in html
    assert form.fields["exploration_rate"].max_value == 1
    # an out-of-range value is refused on its field, naming the bound
    refused = superuser_client.post(
        reverse("admin:combos_gatewaysettings_change", args=[row.pk]),
        {"adaptive__trickle_fraction": "0.5"},
    )
    assert "adaptive__trickle_fraction" in refused.context["adminform"].form.errors


def test_a_whole_number_setting_reads_back_as_typed(superuser_client: Client) -> None:
    row = services.save_settings({"model_lock_minutes": 12}).instance  # stored 12.0

    page = superuser_client.get(
        reverse("admin:combos_gatewaysettings_change", args=[row.pk])
    )

    assert page.context["adminform"].form["model_lock_minutes"].value() == 12
    assert 'value="12"' in page.content.decode()


def test_every_settings_key_has_a_field_and_a_default() -> None:
    from combos import settings_form
    from combos.settings_validation import BOOL_KEYS, NESTED_KEYS, SCALAR_KEYS

    keys = {key for key, _ in settings_form.settings_fields().values()}
    expected = {*SCALAR_KEYS, *BOOL_KEYS, "smart_routing_mode", "adaptive.objective"}
    expected |= {f"{g}.{k}" for g, fields in NESTED_KEYS.items() for k in fields}
    assert keys == expected
    assert set(settings_form.DEFAULTS) == expected
    assert set(settings_form.HELP) == expected


def test_the_settings_list_goes_straight_to_the_one_row(
    populated: None, superuser_client: Client
) -> None:
    row = GatewaySettings.objects.get()
    response = superuser_client.get(changelist("combos", "gatewaysettings"))
    assert response.status_code == 302
    assert response["Location"] == reverse(
        "admin:combos_gatewaysettings_change", args=[row.pk]
    )


def test_only_a_user_allowed_to_add_settings_adds_the_first_row(
    django_user_model, superuser_client: Client
) -> None:
    """A fresh install has no settings row: staff without ``add_gatewaysettings``
    (a viewer of combos, say) must not be the one to create it."""
    from django.contrib.auth.models import Permission

    viewer = django_user_model.objects.create_user(
        "viewer", "v@x.test", "pw", is_staff=True
    )
    viewer.user_permissions.set(
        Permission.objects.filter(codename__in=["view_combo", "view_gatewaysettings"])
    )
    client = Client()
    client.force_login(viewer)
    add = reverse("admin:combos_gatewaysettings_add")
    assert client.get(add).status_code == 403
    posted = client.post(add, {"max_attempts_per_request": "3"})
    assert posted.status_code == 403
    assert not GatewaySettings.objects.exists()
    assert superuser_client.get(add).status_code == 200


def test_combo_form_loads_the_ordered_targets_editor(superuser_client):
    page = superuser_client.get("/admin/combos/combo/add/").content.decode()
    assert "combos/combo_editor.js" in page
    assert 'id="id_targets_text"' in page
    script = superuser_client.get("/static/combos/combo_editor.js")
    assert script.status_code == 200
