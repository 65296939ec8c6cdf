"""The admin's "Add provider" starts from the preset list (spec 10 §2), and a
connection's form has a "Test connection" button."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from django.test import Client

from gateway.dialects import REGISTRY
from providers.mock_upstream import RunningMock, start_in_thread
from providers.models import Connection, Provider
from providers.presets import PRESETS

pytestmark = pytest.mark.django_db

ADD = "/admin/providers/provider/add/"
EMPTY_INLINES = {
    "connections-TOTAL_FORMS": "0",
    "connections-INITIAL_FORMS": "0",
    "models-TOTAL_FORMS": "0",
    "models-INITIAL_FORMS": "0",
}


@pytest.fixture
def ops(django_user_model) -> Client:
    client = Client()
    client.force_login(django_user_model.objects.create_superuser("ops", "o@x.y", "p"))
    return client


def test_add_provider_opens_on_the_preset_list(ops):
    page = ops.get(ADD)
    assert page.status_code == 200
    text = page.content.decode()
    for name, preset in PRESETS.items():
        assert f'data-preset="{name}"' in text
        linked = f'id="preset-{name}" href="?preset={name}"' in text
        assert linked == (preset.kind in REGISTRY)  # a kind not built is not offered
    assert "https://api.groq.com/openai/v1" in text
    assert 'id="preset-none" href="?preset="' in text


def test_a_chosen_preset_fills_the_form(ops):
    page = ops.get(f"{ADD}?preset=groq")
    form = page.context["adminform"].form
    assert (
        form.initial["preset"],
        form.initial["kind"],
        form.initial["base_url"],
        form.initial["models_dev_id"],
    ) == ("groq", "openai", "https://api.groq.com/openai/v1", "groq")
    plain = ops.get(f"{ADD}?preset=").context["adminform"].form
    assert "kind" not in plain.initial


def test_saving_from_a_preset_stores_it_and_its_catalog_id(ops):
    response = ops.post(
        ADD,
        {
            "slug": "groq",
            "preset": "groq",
            "kind": "openai",
            "base_url": "",  # the preset's
            "models_dev_id": "groq",
            "wire": "chat",
            **EMPTY_INLINES,
        },
    )
    assert response.status_code == 302, response.context["adminform"].form.errors
    saved = Provider.objects.get(slug="groq")
    assert (saved.preset, saved.base_url, saved.settings) == (
        "groq",
        "https://api.groq.com/openai/v1",
        {"models_dev_id": "groq"},
    )
    change = ops.get(f"/admin/providers/provider/{saved.pk}/change/")
    assert change.context["adminform"].form.fields["models_dev_id"].initial == "groq"
    # clearing the catalog id removes it, other settings stay
    saved.settings = {"models_dev_id": "groq", "headers": {"X-Title": "t"}}
    saved.save()
    ops.post(
        f"/admin/providers/provider/{saved.pk}/change/",
        {
            "slug": "groq",
            "preset": "groq",
            "kind": "openai",
            "base_url": "https://api.groq.com/openai/v1",
            "models_dev_id": "",
            "wire": "chat",
            **EMPTY_INLINES,
        },
    )
    saved.refresh_from_db()
    assert saved.settings == {"headers": {"X-Title": "t"}}


def test_a_preset_of_a_kind_not_built_is_refused_on_the_form(ops, monkeypatch):
    from types import MappingProxyType

    from providers import admin as provider_admin
    from providers import validation
    from providers.presets import Preset

    future = MappingProxyType(
        {**PRESETS, "future": Preset("future-kind", "https://x.example", label="F")}
    )
    monkeypatch.setattr(validation, "PRESETS", future)
    monkeypatch.setattr(provider_admin, "PRESETS", future)
    response = ops.post(
        ADD, {"slug": "x", "preset": "future", "kind": "openai", **EMPTY_INLINES}
    )
    errors = response.context["adminform"].form.errors
    assert "needs kind 'future-kind'" in errors["preset"][0]


@pytest.fixture(scope="module")
def mock() -> Iterator[RunningMock]:
    with start_in_thread() as running:
        yield running


def test_the_connection_form_has_a_test_connection_button(ops, mock):
    provider = Provider.objects.create(slug="pm", kind="openai", base_url=mock.url)
    connection = Connection(provider=provider, name="main")
    connection.set_api_key("sk-upstream-secret-pm-1234567890")
    connection.save()
    page = ops.get(f"/admin/providers/connection/{connection.pk}/change/")
    link = f"/admin/providers/connection/test/?ids={connection.pk}&amp;back=change"
    assert link.encode() in page.content
    tested = ops.get(link.replace("&amp;", "&"), follow=True)
    assert tested.redirect_chain[-1][0].endswith(f"/connection/{connection.pk}/change/")
    assert "pm@main: ok, http 200" in tested.content.decode().lower()


def test_add_provider_checks_its_connections_and_models_ranges_and_names(ops):
    """Issue #15 audit: priority -1 and model id 'bad model id!' were saved."""
    form = {
        "slug": "acme",
        "kind": "openai",
        "base_url": "https://api.example.com/v1",
        "connections-TOTAL_FORMS": "1",
        "connections-INITIAL_FORMS": "0",
        "connections-0-name": "main",
        "connections-0-tier": "standard",
        "connections-0-priority": "-1",
        "connections-0-max_concurrency": "0",
        "connections-0-active": "on",
        "models-TOTAL_FORMS": "1",
        "models-INITIAL_FORMS": "0",
        "models-0-model_id": "bad model id!",
        "models-0-position": "0",
    }

    page = ops.post(ADD, form)

    assert page.status_code == 200  # the form again
    text = page.content.decode()
    assert "must be between 0 and 1 000 000" in text
    assert "&#x27;bad model id!&#x27; is not allowed here: use letters" in text
    assert not Provider.objects.filter(slug="acme").exists()
