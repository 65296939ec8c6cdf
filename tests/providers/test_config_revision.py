"""Every provider-side write bumps the config revision (spec 07, 08 §3.4)."""

from __future__ import annotations

import pytest

from providers import services
from providers.models import ConfigRevision, Connection, Provider, ProviderModel

pytestmark = pytest.mark.django_db


@pytest.fixture
def provider() -> Provider:
    return Provider.objects.create(slug="pa", kind="mock")


def test_the_first_bump_creates_the_revision_row_at_one() -> None:
    services.bump_config_revision()

    assert list(ConfigRevision.objects.values_list("id", "version")) == [(1, 1)]


def test_each_bump_adds_one() -> None:
    services.bump_config_revision()
    services.bump_config_revision()

    assert services.config_version() == 2


def test_the_version_is_zero_before_any_write() -> None:
    assert services.config_version() == 0


def test_saving_and_deleting_providers_connections_and_models_bumps_each_time(
    provider: Provider,
) -> None:
    connection = Connection(provider=provider, name="main")
    model = ProviderModel(provider=provider, model_id="m1")

    services.save_provider(provider)
    services.save_connection(connection, api_key="env:PA_KEY")
    services.save_model(model)
    services.delete_model(model)
    services.delete_connection(connection)
    services.delete_provider(provider)

    assert services.config_version() == 6
    assert Provider.objects.count() == 0


def test_saving_a_connection_with_a_secret_stores_it(provider: Provider) -> None:
    connection = Connection(provider=provider, name="main")

    services.save_connection(connection, api_key="env:PA_KEY")

    assert Connection.objects.get().api_key_ref == "env:PA_KEY"


def test_a_masked_secret_keeps_the_stored_one(provider: Provider) -> None:
    connection = Connection(provider=provider, name="main")
    connection.set_api_key("env:PA_KEY")

    services.apply_connection_fields(connection, {"api_key": "***", "priority": 2})

    assert (connection.api_key_ref, connection.priority) == ("env:PA_KEY", 2)
