"""The admin's List upstream models and Test connection (spec 10 §2), against the
mock upstream on a loopback port: the provider change form links the model list,
the page offers the ids not configured yet and adds the chosen ones; Test
connection reports each selected connection as a message; both need the change
permission."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from django.contrib.auth.models import Permission, User
from django.test import Client

from providers.mock_upstream import RunningMock, start_in_thread
from providers.models import Connection, Provider, ProviderModel

pytestmark = pytest.mark.django_db


@pytest.fixture(scope="module")
def mock() -> Iterator[RunningMock]:
    with start_in_thread() as running:
        yield running


@pytest.fixture
def provider(mock) -> Provider:
    provider = Provider.objects.create(slug="pm", kind="openai", base_url=mock.url)
    connection = Connection(provider=provider, name="main")
    connection.set_api_key("sk-upstream-secret-pm-1234567890")
    connection.save()
    dead = Provider.objects.create(
        slug="pdead", kind="openai", base_url="http://127.0.0.1:9/v1"
    )
    Connection.objects.create(provider=dead, name="main")
    ProviderModel.objects.create(provider=provider, model_id="m1")
    mock.add("m1", content="x")
    mock.add("m2", content="x")
    return provider


@pytest.fixture
def ops(django_user_model) -> Client:
    client = Client()
    client.force_login(django_user_model.objects.create_superuser("ops", "o@x.y", "p"))
    return client


def test_the_change_form_links_the_model_list(provider, ops):
    page = ops.get(f"/admin/providers/provider/{provider.pk}/change/")
    assert f"/admin/providers/provider/{provider.pk}/discover/".encode() in page.content


def test_the_model_list_offers_and_adds_the_models_not_configured(provider, ops):
    page = ops.get(f"/admin/providers/provider/{provider.pk}/discover/")
    assert page.status_code == 200
    text = page.content.decode()
    assert 'value="m2"' in text
    assert 'value="m1"' not in text
    added = ops.post(
        f"/admin/providers/provider/{provider.pk}/discover/", {"add_model": ["m2"]}
    )
    assert added.status_code == 302
    assert set(provider.models.values_list("model_id", flat=True)) == {"m1", "m2"}


def test_the_model_list_is_headed_with_its_provider(provider, ops):
    dead = Provider.objects.get(slug="pdead")
    for shown in (provider, dead):  # a failed listing is headed the same way
        page = ops.get(f"/admin/providers/provider/{shown.pk}/discover/")
        heading = page.content.decode().split('id="omr-discover-heading">')[1]
        assert heading.split("</h2>")[0] == f"Upstream models of {shown.slug}"


def test_the_list_action_opens_the_model_list(provider, ops):
    response = ops.post(
        "/admin/providers/provider/",
        {"action": "list_upstream_models", "_selected_action": [provider.pk]},
    )
    assert response.status_code == 302
    assert response["Location"].endswith(f"/provider/{provider.pk}/discover/")


def test_test_connection_reports_each_connection(provider, ops):
    ids = list(Connection.objects.values_list("pk", flat=True))
    response = ops.post(
        "/admin/providers/connection/",
        {"action": "test_connection", "_selected_action": ids},
        follow=True,
    )
    text = response.content.decode().lower()  # the admin capitalises messages
    assert "pm@main: ok, http 200" in text
    assert "pdead@main: failed (connection_error" in text
    assert "sk-upstream-secret" not in text


def test_a_user_without_the_change_permission_cannot_probe(provider):
    user = User.objects.create_user("viewer", is_staff=True)
    user.user_permissions.add(Permission.objects.get(codename="view_provider"))
    client = Client()
    client.force_login(user)
    assert (
        client.get(f"/admin/providers/provider/{provider.pk}/discover/").status_code
        == 403
    )
    assert client.get("/admin/providers/connection/test/?ids=1").status_code == 403
