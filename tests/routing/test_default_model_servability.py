"""A connection's ``default_model`` without a catalog row is servable on that
connection only (spec 04 §2.1); catalog models on every connection."""

from __future__ import annotations

from types import MappingProxyType

from gateway.auto.engine.pool import AutoRoute, servable
from gateway.kernel.chain import EntrySpec, Slot, plan_targets
from gateway.kernel.resolve import resolve
from gateway.kernel.types import (
    ConnectionInfo,
    ModelInfo,
    ProviderInfo,
    RoutingTable,
)


def _table() -> RoutingTable:
    listed = ModelInfo(provider="pa", model_id="m1")
    private = ModelInfo(provider="pa", model_id="foo", position=1, catalog_row=False)
    provider = ProviderInfo(
        slug="pa",
        kind="openai",
        base_url="https://pa.example/v1",
        connections=(
            ConnectionInfo(provider="pa", name="x", api_key="k1", default_model="foo"),
            ConnectionInfo(provider="pa", name="y", api_key="k2"),
        ),
        models=MappingProxyType({"m1": listed, "foo": private}),
        models_lower=MappingProxyType({"m1": ("m1",), "foo": ("foo",)}),
    )
    return RoutingTable(providers=MappingProxyType({"pa": provider}))


def test_the_auto_pool_has_the_default_model_on_its_connection_only():
    keys = [t.key for t in servable(_table(), AutoRoute(route_id="auto"))]
    assert sorted(keys) == ["pa/foo@x", "pa/m1@x", "pa/m1@y"]


def test_a_direct_request_for_it_tries_that_connection_only():
    table = _table()
    for model, expected in (
        ("pa/foo", ["pa/foo@x"]),
        ("pa/m1", ["pa/m1@x", "pa/m1@y"]),
    ):
        entry = EntrySpec(model=model, param="model")
        slot = Slot(entry=entry, resolved=resolve(table, model))
        assert [t.key for t in plan_targets(table, slot, [])] == expected


def test_a_combo_target_expands_to_that_connection_only():
    import dataclasses

    from gateway.kernel.types import ComboInfo, ComboTargetInfo
    from gateway.planning.combo import plan_combo
    from gateway.planning.plan import RequestFacts

    combo = ComboInfo(
        id=1,
        name="c",
        strategy="priority",
        targets=(ComboTargetInfo(model="pa/foo"), ComboTargetInfo(model="pa/m1")),
    )
    table = dataclasses.replace(_table(), combos=MappingProxyType({"c": combo}))
    plan = plan_combo(table, combo, RequestFacts(r_in=1, max_out=None), 1.0)
    assert [t.key for t in plan.targets] == ["pa/foo@x", "pa/m1@x", "pa/m1@y"]
