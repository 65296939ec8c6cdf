"""A model the catalog marks deprecated is not servable (spec 04 §2.1)."""

from __future__ import annotations

from types import MappingProxyType

from gateway.auto.engine.pool import AutoRoute, for_combo, servable
from gateway.kernel.types import (
    ComboInfo,
    ComboTargetInfo,
    ConnectionInfo,
    ModelInfo,
    ProviderInfo,
    RoutingTable,
)


def table() -> RoutingTable:
    models = {
        "gemini-2.5-pro": ModelInfo(provider="google", model_id="gemini-2.5-pro"),
        "gemini-2.0-flash": ModelInfo(
            provider="google", model_id="gemini-2.0-flash", position=1, deprecated=True
        ),
    }
    google = ProviderInfo(
        slug="google",
        kind="openai",
        base_url="http://google.test/v1",
        connections=(ConnectionInfo(provider="google", name="main", api_key="k"),),
        models=MappingProxyType(models),
    )
    return RoutingTable(version=1, providers=MappingProxyType({"google": google}))


def test_deprecated_models_are_left_out_of_the_fleet_pool() -> None:
    pool = servable(table(), AutoRoute(route_id="auto"))

    assert [t.model.model_id for t in pool] == ["gemini-2.5-pro"]


def test_deprecated_models_are_left_out_of_a_persisted_auto_combo() -> None:
    combo = ComboInfo(
        id=1,
        name="mine",
        strategy="auto",
        targets=(
            ComboTargetInfo(model="google/gemini-2.0-flash"),
            ComboTargetInfo(model="google/gemini-2.5-pro"),
        ),
    )

    pool = servable(table(), for_combo(combo))

    assert [t.model.model_id for t in pool] == ["gemini-2.5-pro"]


def test_models_default_to_not_deprecated() -> None:
    assert ModelInfo(provider="p", model_id="m").deprecated is False
