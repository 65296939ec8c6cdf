"""``export_config`` (spec 07): the import format, secrets never in clear."""

from __future__ import annotations

import io
import re
from collections.abc import Callable
from typing import Any

import pytest
import yaml
from django.core.management import call_command

from combos.config_export import export_data, export_yaml
from combos.models import (
    ApiKey,
    Combo,
    ComboTarget,
    GatewaySettings,
    ModelComboMapping,
    SmartRoute,
)
from providers.models import Connection, Provider
from providers.services import config_version

pytestmark = pytest.mark.django_db

FERNET_TOKEN = re.compile(r"gAAAAA[A-Za-z0-9_=-]{20,}")


def test_export_of_an_empty_database_lists_every_section() -> None:
    assert export_data() == {
        "providers": [],
        "combos": [],
        "model_combo_mappings": [],
        "api_keys": [],
        "candidate_overrides": [],
        "smart_routes": [],
        "settings": {},
    }


def test_the_command_prints_the_export_as_yaml(
    small_config: Callable[[], dict[str, Any]], import_data: Callable[..., Any]
) -> None:
    import_data(small_config())
    stdout = io.StringIO()

    call_command("export_config", stdout=stdout)

    assert stdout.getvalue() == export_yaml()
    assert yaml.safe_load(stdout.getvalue())["combos"] == [
        {
            "name": "team",
            "strategy": "priority",
            "active": True,
            "targets": [{"model": "pa/m1"}, {"model": "pb/m2"}],
            "config": {},
        }
    ]


def test_reimporting_an_export_of_the_spec07_example_changes_nothing(
    spec07_yaml: str, import_data: Callable[..., Any]
) -> None:
    import_data(spec07_yaml)

    report = import_data(export_yaml())

    assert report.changed is False
    assert report.warnings == []
    assert config_version() == 1


def test_reimporting_an_export_without_settings_changes_nothing(
    world: dict[str, Provider],
    make_combo: Callable[..., Combo],
    import_data: Callable[..., Any],
) -> None:
    make_combo("team", targets=[{"model": "pa/m1", "weight": 3}, {"model": "pb/m2"}])
    version = config_version()

    report = import_data(export_yaml())

    assert report.changed is False
    assert config_version() == version


def test_an_export_imported_into_an_empty_database_recreates_the_configuration(
    spec07_yaml: str, import_data: Callable[..., Any]
) -> None:
    import_data(spec07_yaml)
    exported = export_data()
    text = export_yaml()
    ModelComboMapping.objects.all().delete()
    ComboTarget.objects.all().delete()
    for model in (Combo, ApiKey, SmartRoute, GatewaySettings, Provider):
        model.objects.all().delete()

    import_data(text)

    second = export_data()
    assert second["combos"] == exported["combos"]
    # A masked literal cannot be re-created: that connection comes back without one.
    spare = exported["providers"][2]["connections"][1]
    assert spare.pop("api_key") == "***"
    assert second["providers"] == exported["providers"]
    assert [k["name"] for k in second["api_keys"]] == ["ci", "generated"]


def test_secrets_are_exported_as_env_references_or_masks(
    spec07_yaml: str, import_data: Callable[..., Any]
) -> None:
    import_data(spec07_yaml)

    data = export_data()

    openai = next(p for p in data["providers"] if p["slug"] == "openai")
    assert [c.get("api_key") for c in openai["connections"]] == [
        "env:OPENAI_API_KEY",
        "***",
    ]
    assert [k["key"] for k in data["api_keys"]] == ["***", "***"]


def test_no_plaintext_secret_or_fernet_token_appears_in_an_export(
    spec07_yaml: str, import_data: Callable[..., Any]
) -> None:
    report = import_data(spec07_yaml)
    generated = report.generated_keys[0][1]
    connection = Connection.objects.get(name="spare")

    text = export_yaml()

    assert "sk-literal-openai-secret-9876" not in text
    assert "sk-or-ci-literal-key-0123456789abcdef" not in text
    assert generated not in text
    assert connection.api_key_encrypted not in text
    assert FERNET_TOKEN.search(text) is None
    for key in ApiKey.objects.all():
        assert key.key_hash not in text
        assert key.prefix not in text


def test_a_masked_connection_secret_on_import_keeps_the_stored_secret(
    small_config: Callable[[], dict[str, Any]], import_data: Callable[..., Any]
) -> None:
    import_data(small_config())
    token = Connection.objects.get(provider__slug="pb").api_key_encrypted
    data = small_config()
    data["providers"][1]["connections"][0]["api_key"] = "***"

    report = import_data(data)

    assert report.changed is False
    assert Connection.objects.get(provider__slug="pb").api_key_encrypted == token


def test_reimporting_an_export_with_prune_changes_nothing(
    spec07_yaml: str, import_data: Callable[..., Any]
) -> None:
    import_data(spec07_yaml)

    report = import_data(export_yaml(), prune=True)

    assert report.changed is False
    assert config_version() == 1
