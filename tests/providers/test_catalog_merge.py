"""Catalog data reaches routing (spec 06 §3.2 "Catalog match"): a configured model's
empty fields come from the matching models.dev row; operator values always win."""

from __future__ import annotations

import pytest
from django.core.exceptions import ImproperlyConfigured
from django.utils import timezone

from gateway.config.snapshot import build_table
from gateway.kernel.types import ModelInfo
from omniroute_site.env import env_json_object
from providers.catalog import CatalogFacts, fill_model_info, sources_for
from providers.models import Connection, Provider, ProviderModel
from providers.models_dev import apply, parse, plan
from tests.providers.conftest import MODELS_DEV_FIXTURE

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def catalog() -> None:
    parsed = parse(MODELS_DEV_FIXTURE.read_bytes())
    apply(plan(parsed, {}), now=timezone.now())


def configure(slug: str, kind: str, *models: str, **model_fields) -> Provider:
    provider = Provider.objects.create(
        slug=slug, kind=kind, base_url="http://u.test/v1"
    )
    Connection.objects.create(provider=provider, name="main", api_key_ref="env:K")
    for model_id in models:
        ProviderModel.objects.create(
            provider=provider, model_id=model_id, **model_fields
        )
    return provider


def model(slug: str, model_id: str) -> ModelInfo:
    return build_table().providers[slug].models[model_id]


def test_empty_fields_are_filled_from_the_same_slug() -> None:
    configure("openai", "openai", "gpt-5")

    info = model("openai", "gpt-5")

    assert (info.input_cost, info.output_cost, info.cache_read_cost) == (
        1.25,
        10.0,
        0.125,
    )
    assert info.cache_write_cost is None  # the catalog has none either
    assert (info.context_window, info.max_output_tokens) == (400_000, 128_000)
    assert info.capabilities == frozenset({"tools", "vision", "reasoning", "json"})
    assert info.tier == "premium"
    assert info.deprecated is False


def test_operator_set_fields_always_win() -> None:
    configure(
        "openai",
        "openai",
        "gpt-5",
        input_cost=0.5,
        context_window=100_000,
        capabilities=[],
        tier="budget",
    )

    info = model("openai", "gpt-5")

    assert info.input_cost == 0.5
    assert info.context_window == 100_000
    assert info.capabilities == frozenset()  # an empty list is set, not unknown
    assert info.tier == "budget"
    assert info.output_cost == 10.0  # left empty: from the catalog


def test_openai_and_anthropic_kinds_fall_back_to_the_kind() -> None:
    configure("work-openai", "openai", "gpt-4o-mini")
    configure("claude", "anthropic", "claude-haiku-4-5")

    mini = model("work-openai", "gpt-4o-mini")
    haiku = model("claude", "claude-haiku-4-5")

    assert (mini.input_cost, mini.tier) == (0.15, "standard")
    assert (haiku.cache_write_cost, haiku.tier) == (1.25, "premium")


def test_the_mock_kind_has_no_kind_fallback() -> None:
    configure("demo", "mock", "gpt-5")

    info = model("demo", "gpt-5")

    assert (info.input_cost, info.tier, info.capabilities) == (None, None, None)


def test_the_provider_map_names_the_catalog_provider(settings) -> None:
    settings.OMNIROUTE_CATALOG_PROVIDER_MAP = {"gemini": "google"}
    configure("gemini", "openai", "gemini-2.5-pro")

    info = model("gemini", "gemini-2.5-pro")

    assert (info.input_cost, info.context_window) == (1.25, 1_048_576)


def test_without_a_match_nothing_is_filled(settings) -> None:
    settings.OMNIROUTE_CATALOG_PROVIDER_MAP = {}
    configure("gemini", "openai", "gemini-2.5-pro")

    info = model("gemini", "gemini-2.5-pro")

    assert (info.input_cost, info.context_window, info.tier) == (None, None, None)


def test_the_slug_match_comes_before_the_kind() -> None:
    configure("deepseek", "openai", "deepseek-reasoner")

    info = model("deepseek", "deepseek-reasoner")

    assert (info.input_cost, "vision" in (info.capabilities or ())) == (0.14, False)


def test_a_default_model_without_a_configured_row_is_filled_too() -> None:
    provider = Provider.objects.create(slug="openai", kind="openai", base_url="")
    Connection.objects.create(
        provider=provider, name="main", api_key_ref="env:K", default_model="gpt-5"
    )

    info = model("openai", "gpt-5")

    assert (info.input_cost, info.tier) == (1.25, "premium")


def test_a_deprecated_catalog_model_is_flagged(settings) -> None:
    settings.OMNIROUTE_CATALOG_PROVIDER_MAP = {"gemini": "google"}
    configure("gemini", "openai", "gemini-2.0-flash", "gemini-2.5-pro")

    assert model("gemini", "gemini-2.0-flash").deprecated is True
    assert model("gemini", "gemini-2.5-pro").deprecated is False


def test_sources_are_tried_slug_then_kind_then_map() -> None:
    assert sources_for("Work", "openai", {"Work": "azure"}) == (
        "work",
        "openai",
        "azure",
    )
    assert sources_for("openai", "openai", {}) == ("openai",)
    assert sources_for("m", "mock", {}) == ("m",)


def test_fill_without_facts_returns_the_same_info() -> None:
    info = ModelInfo(provider="p", model_id="m")

    assert fill_model_info(info, None) is info
    assert fill_model_info(info, CatalogFacts(deprecated=True)).deprecated is True


def test_the_provider_map_is_read_from_a_json_object(monkeypatch) -> None:
    monkeypatch.setenv("X_MAP", '{"gemini": "google"}')
    assert env_json_object("X_MAP") == {"gemini": "google"}
    monkeypatch.setenv("X_MAP", "")
    assert env_json_object("X_MAP") == {}
    for bad in ("[1]", '{"a": 1}', "{nope"):
        monkeypatch.setenv("X_MAP", bad)
        with pytest.raises(ImproperlyConfigured, match="X_MAP"):
            env_json_object("X_MAP")


def test_a_preset_names_the_catalog_provider(tmp_path) -> None:
    """Spec 10 §2: ``preset: gemini`` with only a model id gets the catalog's
    prices and window, whatever the slug (example 5's shape)."""
    import io

    from django.core.management import call_command

    source = tmp_path / "preset.yaml"
    source.write_text(
        "providers:\n"
        "  - slug: my-google\n"
        "    preset: openai\n"
        "    models_dev_id: google\n"
        "    connections: [{name: main, api_key: env:K}]\n"
        "    models: [{id: gemini-2.5-pro}]\n"
    )
    call_command("import_config", str(source), stdout=io.StringIO())

    info = model("my-google", "gemini-2.5-pro")

    assert (info.input_cost, info.context_window) == (1.25, 1_048_576)
    stored = Provider.objects.get(slug="my-google")
    assert (stored.kind, stored.base_url, stored.preset) == (
        "openai",
        "https://api.openai.com/v1",
        "openai",
    )
