"""Chains, slot plans and effective options (spec 02 §2-§5, 03 §1.2, §4)."""

import pytest

from gateway.kernel.chain import (
    ALL_REASONS,
    ChainError,
    EntrySpec,
    build_chain,
    effective_options,
    is_allowed,
    plan_targets,
)
from gateway.kernel.resolve import resolve
from gateway.kernel.types import GatewaySettings, KeyPolicy


@pytest.fixture
def table(make_table):
    """Spec 02 §14: providers pa, pb, pc with models m1, m2, m3; combo ``team``."""
    return make_table(
        {"pa": ["m1"], "pb": ["m2"], "pc": ["m3"]},
        combos={"team": ["pa/m1", "pb/m2"]},
    )


@pytest.fixture
def chain_of(table, make_key):
    """``chain_of("pa/m1", "pb/m2", key=..., explicit=...)`` -> the sent strings."""

    def _chain(*models, key=None, explicit=True, warnings=None, tbl=None):
        entries = tuple(
            EntrySpec(model=m, param=f"models[{i}]") for i, m in enumerate(models)
        )
        slots = build_chain(
            tbl or table,
            key or make_key(),
            entries,
            explicit=explicit,
            warnings=warnings if warnings is not None else [],
        )
        return [slot.entry.model for slot in slots]

    return _chain


def _refusal(table, key, *models):
    entries = tuple(
        EntrySpec(model=m, param=f"models[{i}]") for i, m in enumerate(models)
    )
    with pytest.raises(ChainError) as caught:
        build_chain(table, key, entries, explicit=True, warnings=[])
    error = caught.value
    return error.status, error.code, error.param, error.error_type


# --- build_chain: rules 1-4 ---------------------------------------------------------


def test_explicit_chain_is_exactly_the_entries_in_order(chain_of):
    assert chain_of("pb/m2", "pa/m1", "pc/m3") == ["pb/m2", "pa/m1", "pc/m3"]


def test_explicit_chain_keeps_each_entrys_param_and_timeouts(table, make_key):
    entries = (
        EntrySpec(model="pa/m1", param="model"),
        EntrySpec(
            model="pb/m2",
            param="fallback_models[0]",
            timeout_ms=2000,
            first_token_timeout_ms=700,
        ),
    )

    slots = build_chain(table, make_key(), entries, explicit=True, warnings=[])

    assert [slot.entry for slot in slots] == list(entries)
    assert [slot.resolved.identity for slot in slots] == ["pa/m1", "pb/m2"]


def test_explicit_chain_ignores_the_keys_failover_defaults(chain_of, make_key):
    key = make_key(defaults=["pa/m1", "pb/m2", "pc/m3"])

    assert chain_of("pa/m1", key=key, explicit=True) == ["pa/m1"]


@pytest.mark.parametrize(
    ("model", "expected"),
    [
        ("pc/m3", ["pc/m3", "pa/m1", "pb/m2"]),
        ("pa/m1", ["pa/m1", "pb/m2"]),
        ("pb/m2", ["pb/m2"]),
    ],
)
def test_defaults_extend_a_single_model_from_its_first_match_to_the_end(
    chain_of, make_key, model, expected
):
    key = make_key(defaults=["pc/m3", "pa/m1", "pb/m2"])

    assert chain_of(model, key=key, explicit=False) == expected


def test_rule_three_example_from_the_spec(make_table, make_key):
    table = make_table({"p": ["x", "a", "b", "c"]})
    key = make_key(defaults=["p/x", "p/a", "p/b"])

    def chain(model):
        slots = build_chain(
            table,
            key,
            (EntrySpec(model=model, param="model"),),
            explicit=False,
            warnings=[],
        )
        return [slot.entry.model for slot in slots]

    assert chain("p/a") == ["p/a", "p/b"]
    assert chain("p/b") == ["p/b"]
    assert chain("p/c") == ["p/c"]


def test_defaults_match_by_identity_not_by_spelling(chain_of, make_key):
    key = make_key(defaults=["pa/m1", "team", "pc/m3"])

    assert chain_of("combo/TEAM", key=key, explicit=False) == ["combo/TEAM", "pc/m3"]
    assert chain_of("m1", key=key, explicit=False) == ["m1", "team", "pc/m3"]


def test_defaults_slots_carry_their_defaults_params(table, make_key):
    key = make_key(defaults=["pa/m1", "pb/m2"])

    slots = build_chain(
        table,
        key,
        (EntrySpec(model="m1", param="model"),),
        explicit=False,
        warnings=[],
    )

    assert [slot.entry.param for slot in slots] == [
        "model",
        "failover_defaults.models[1]",
    ]


def test_single_model_without_defaults_is_a_one_slot_chain(chain_of):
    assert chain_of("pb/m2", explicit=False) == ["pb/m2"]


def test_stale_default_entries_are_dropped_with_one_warning_naming_key_and_entries(
    chain_of, make_key
):
    key = make_key(defaults=["pa/gone", "pa/m1", "nope", "pb/m2"], name="ci")
    warnings = []

    chain = chain_of("pa/m1", key=key, explicit=False, warnings=warnings)

    assert chain == ["pa/m1", "pb/m2"]
    assert warnings == [
        "key ci: dropping stale failover default entries 'pa/gone', 'nope'"
    ]


def test_default_entry_the_key_may_no_longer_use_is_dropped(chain_of, make_key):
    key = make_key(allowed=["pa/*", "pc/*"], defaults=["pa/m1", "pb/m2", "pc/m3"])
    warnings = []

    chain = chain_of("pa/m1", key=key, explicit=False, warnings=warnings)

    assert chain == ["pa/m1", "pc/m3"]
    assert warnings == ["key k: dropping stale failover default entries 'pb/m2'"]


def test_stale_default_matching_the_request_never_blames_the_client(
    make_table, make_key
):
    table = make_table({"pa": ["m1"]})
    key = make_key(defaults=["pa/old", "pa/m1"])
    warnings = []

    slots = build_chain(
        table,
        key,
        (EntrySpec(model="pa/m1", param="model"),),
        explicit=False,
        warnings=warnings,
    )

    assert [slot.entry.model for slot in slots] == ["pa/m1"]
    assert len(warnings) == 1


def test_fresh_defaults_log_no_warning(chain_of, make_key):
    warnings = []

    chain_of(
        "pa/m1", key=make_key(defaults=["pa/m1"]), explicit=False, warnings=warnings
    )

    assert warnings == []


# --- build_chain: duplicates --------------------------------------------------------


def test_duplicate_entries_collapse_to_the_first_occurrence(chain_of):
    assert chain_of("pa/m1", "pa/m1", "pb/m2") == ["pa/m1", "pb/m2"]


@pytest.mark.parametrize(
    "models",
    [
        ("m1", "pa/m1"),
        ("PA/M1", "pa/m1"),
        ("team", "combo/team"),
        ("auto/coding", "AUTO/CODING"),
        ("auto/coding:floor", "auto/coding:cheap"),
    ],
)
def test_entries_with_the_same_identity_are_duplicates(chain_of, models):
    assert chain_of(*models) == [models[0]]


def test_first_occurrence_keeps_its_own_timeouts(table, make_key):
    entries = (
        EntrySpec(model="pa/m1", param="models[0]", timeout_ms=2000),
        EntrySpec(model="m1", param="models[1]", timeout_ms=9000),
        EntrySpec(model="pb/m2", param="models[2]"),
    )

    slots = build_chain(table, make_key(), entries, explicit=True, warnings=[])

    assert [(s.entry.param, s.entry.timeout_ms) for s in slots] == [
        ("models[0]", 2000),
        ("models[2]", None),
    ]


def test_duplicates_from_defaults_collapse_too(chain_of, make_key):
    key = make_key(defaults=["pa/m1", "pb/m2", "m2", "pc/m3"])

    assert chain_of("pa/m1", key=key, explicit=False) == ["pa/m1", "pb/m2", "pc/m3"]


def test_bare_id_of_several_providers_is_not_a_duplicate_of_one_of_them(
    make_table, chain_of
):
    tbl = make_table({"openai": ["gpt-5-nano"], "azure": ["gpt-5-nano"]})

    assert chain_of("gpt-5-nano", "openai/gpt-5-nano", tbl=tbl) == [
        "gpt-5-nano",
        "openai/gpt-5-nano",
    ]


# --- build_chain: refusals (spec 02 §3 rows 12-14) ----------------------------------


def test_unknown_model_is_404_model_not_found_naming_the_entry(table, make_key):
    assert _refusal(table, make_key(), "pa/m1", "pa/nope") == (
        404,
        "model_not_found",
        "models[1]",
        "not_found_error",
    )


def test_unknown_auto_variant_is_400_naming_the_entry(table, make_key):
    assert _refusal(table, make_key(), "auto/turbo") == (
        400,
        "unknown_auto_variant",
        "models[0]",
        "invalid_request_error",
    )


def test_auto_problem_in_a_later_entry_is_reported_before_an_unknown_model(
    table, make_key
):
    assert _refusal(table, make_key(), "pa/nope", "auto/turbo")[:3] == (
        400,
        "unknown_auto_variant",
        "models[1]",
    )


def test_unknown_model_in_a_later_entry_is_reported_before_a_forbidden_one(
    table, make_key
):
    key = make_key(allowed=["pb/*"])

    assert _refusal(table, key, "pa/m1", "pb/nope")[:3] == (
        404,
        "model_not_found",
        "models[1]",
    )


def test_model_outside_the_allow_list_is_403_model_not_allowed(table, make_key):
    key = make_key(allowed=["pa/*"])

    assert _refusal(table, key, "pa/m1", "pb/m2") == (
        403,
        "model_not_allowed",
        "models[1]",
        "permission_error",
    )


def test_refusal_message_names_the_model_as_sent(table, make_key):
    entries = (EntrySpec(model="pa/nope", param="model"),)

    with pytest.raises(ChainError) as caught:
        build_chain(table, make_key(), entries, explicit=False, warnings=[])

    assert caught.value.message == "The model 'pa/nope' does not exist"
    assert str(caught.value) == "The model 'pa/nope' does not exist"


def test_request_model_outside_the_allow_list_is_403_even_with_defaults(
    table, make_key
):
    key = make_key(allowed=["pa/*"], defaults=["pb/m2", "pa/m1"])

    with pytest.raises(ChainError) as caught:
        build_chain(
            table,
            key,
            (EntrySpec(model="pb/m2", param="model"),),
            explicit=False,
            warnings=[],
        )

    assert (caught.value.status, caught.value.param) == (403, "model")


@pytest.mark.parametrize(
    ("allowed", "sent", "expected"),
    [
        (None, "pa/m1", True),
        (["pa/*"], "m1", True),  # resolved form matches
        (["m1"], "m1", True),  # string as sent matches
        (["m1"], "pa/m1", False),
        (["TEAM"], "combo/team", True),  # resolved combo name matches
        (["combo/*"], "team", False),
        (["auto*"], "AUTO/Coding", True),
        (["auto/coding:cheap"], "auto/coding:floor", True),  # route id matches
        (["auto"], "auto/coding", False),
        (["pb/*", "pa/m?"], "pa/m1", True),
        ([], "pa/m1", False),
    ],
)
def test_allow_list_matches_the_string_as_sent_or_its_resolved_form(
    table, make_key, allowed, sent, expected
):
    key = make_key(allowed=allowed)

    assert is_allowed(key, sent, resolve(table, sent)) is expected


def test_key_policy_compiles_its_allow_list_when_given_only_the_globs(table):
    key = KeyPolicy(id=1, name="k", prefix="p", allowed_models=("pa/*",))

    assert is_allowed(key, "pb/m2", resolve(table, "pb/m2")) is False
    assert is_allowed(key, "pa/m1", resolve(table, "pa/m1")) is True


# --- plan_targets -------------------------------------------------------------------


def _keys(table, make_slot, model, warnings=None):
    slot = make_slot(table, model)
    return [
        t.key
        for t in plan_targets(table, slot, warnings if warnings is not None else [])
    ]


def test_direct_model_tries_connections_by_priority_then_name(make_table, make_slot):
    table = make_table(
        {"pa": {"models": ["m1"], "connections": {"main": 1, "backup": 0, "alpha": 1}}}
    )

    assert _keys(table, make_slot, "pa/m1") == [
        "pa/m1@backup",
        "pa/m1@alpha",
        "pa/m1@main",
    ]


def test_bare_id_of_several_providers_orders_by_priority_slug_then_name(
    make_table, make_slot
):
    table = make_table(
        {
            "zz": {"models": ["m"], "connections": {"main": 0, "b": 0}},
            "aa": {"models": ["m"], "connections": {"main": 1, "x": 0}},
        }
    )

    assert _keys(table, make_slot, "m") == [
        "aa/m@x",
        "zz/m@b",
        "zz/m@main",
        "aa/m@main",
    ]


def test_direct_targets_have_no_via_and_no_timeout(table, make_slot):
    targets = plan_targets(table, make_slot(table, "pa/m1"), [])

    assert [(t.via, t.timeout_ms) for t in targets] == [(None, None)]
    assert targets[0].model is table.providers["pa"].models["m1"]
    assert targets[0].model_key == "pa/m1"


def test_combo_targets_keep_declared_order_with_the_combo_as_via(make_table, make_slot):
    table = make_table(
        {"pa": ["m1"], "pb": ["m2"]},
        combos={"team": ["pb/m2", "pa/m1"]},
    )

    targets = plan_targets(table, make_slot(table, "team"), [])

    assert [(t.key, t.via) for t in targets] == [
        ("pb/m2@main", "team"),
        ("pa/m1@main", "team"),
    ]


def test_unpinned_combo_target_expands_to_every_connection_in_order(
    make_table, make_slot
):
    table = make_table(
        {"pa": {"models": ["m1"], "connections": {"main": 0, "backup": 0}}},
        combos={"team": ["pa/m1"]},
    )

    assert _keys(table, make_slot, "team") == ["pa/m1@backup", "pa/m1@main"]


def test_pinned_combo_target_uses_only_its_connection(make_table, make_slot):
    table = make_table(
        {"pa": {"models": ["m1"], "connections": ["main", "backup"]}},
        combos={"team": ["pa/m1@main"]},
    )

    assert _keys(table, make_slot, "team") == ["pa/m1@main"]


def test_combo_target_timeout_is_carried_on_its_targets(make_table, make_slot):
    table = make_table(
        {"pa": ["m1"]},
        combos={"team": [{"model": "pa/m1", "timeout_ms": 4000}]},
    )

    targets = plan_targets(table, make_slot(table, "team"), [])

    assert [t.timeout_ms for t in targets] == [4000]


def test_combo_refs_expand_in_place(make_table, make_slot):
    table = make_table(
        {"pa": ["m1"], "pb": ["m2"], "pc": ["m3"]},
        combos={"outer": ["pa/m1", "combo:inner", "pc/m3"], "inner": ["pb/m2"]},
    )

    assert _keys(table, make_slot, "outer") == [
        "pa/m1@main",
        "pb/m2@main",
        "pc/m3@main",
    ]


def test_ref_to_an_inactive_combo_contributes_nothing(make_table, make_slot):
    table = make_table(
        {"pa": ["m1"], "pb": ["m2"]},
        combos={
            "outer": ["combo:inner", "pa/m1"],
            "inner": {"targets": ["pb/m2"], "active": False},
        },
    )

    assert _keys(table, make_slot, "outer") == ["pa/m1@main"]


def test_combo_refs_expand_to_depth_three_only(make_table, make_slot):
    table = make_table(
        {"pa": ["m1"], "pb": ["m2"], "pc": ["m3"], "pd": ["m4"]},
        combos={
            "A": ["pa/m1", "combo:B"],
            "B": ["pb/m2", "combo:C"],
            "C": ["pc/m3", "combo:D"],
            "D": ["pd/m4"],
        },
    )

    assert _keys(table, make_slot, "A") == ["pa/m1@main", "pb/m2@main", "pc/m3@main"]


def test_cyclic_refs_terminate(make_table, make_slot):
    table = make_table(
        {"pa": ["m1"], "pb": ["m2"]},
        combos={"A": ["pa/m1", "combo:B"], "B": ["pb/m2", "combo:A"]},
    )

    assert _keys(table, make_slot, "A") == ["pa/m1@main", "pb/m2@main", "pa/m1@main"]


def test_combo_target_that_left_the_catalog_is_dropped_with_a_warning(
    make_table, make_slot
):
    table = make_table(
        {"pa": ["m1"]},
        combos={"team": ["pa/gone", "zz/m9", "pa/m1"]},
    )
    warnings = []

    keys = _keys(table, make_slot, "team", warnings)

    assert keys == ["pa/m1@main"]
    assert warnings == [
        "combo team: target pa/gone left the catalog",
        "combo team: target zz/m9 left the catalog",
    ]


def test_combo_target_of_a_provider_without_connections_yields_no_target(
    make_table, make_slot
):
    table = make_table(
        {"pa": ["m1"], "pd": {"models": ["m4"], "connections": ()}},
        combos={"team": ["pd/m4", "pa/m1"]},
    )
    warnings = []

    assert _keys(table, make_slot, "team", warnings) == ["pa/m1@main"]
    assert warnings == []


def test_auto_slot_lists_every_servable_target_via_its_route_id(make_table, make_slot):
    table = make_table(
        {
            "pa": ["m1"],
            "pb": {"models": ["m2"], "connections": {"main": 1}},
            "pd": {"models": ["m4"], "connections": ()},
        }
    )

    targets = plan_targets(table, make_slot(table, "AUTO/coding:floor"), [])

    assert [(t.key, t.via) for t in targets] == [
        ("pa/m1@main", "auto/coding:cheap"),
        ("pb/m2@main", "auto/coding:cheap"),
    ]


# --- effective_options (spec 02 §4) -------------------------------------------------


@pytest.fixture
def options_for(make_table, make_slot, make_key):
    """Options for combo ``team``'s only target under the given layers."""

    def _options(
        *,
        entry=(None, None),
        redundancy=(None, None, None),
        target_timeout=None,
        key_options=None,
        settings_timeout=None,
    ):
        settings = (
            GatewaySettings(attempt_timeout_ms=settings_timeout)
            if settings_timeout is not None
            else GatewaySettings()
        )
        table = make_table(
            {"pa": ["m1"]},
            combos={"team": [{"model": "pa/m1", "timeout_ms": target_timeout}]},
            settings=settings,
        )
        key = make_key(**(key_options or {}))
        slot = make_slot(
            table, "team", timeout_ms=entry[0], first_token_timeout_ms=entry[1]
        )
        (target,) = plan_targets(table, slot, [])
        return effective_options(table, key, slot, target, redundancy)

    return _options


def test_timeout_defaults_to_120000_ms_with_all_four_reasons(options_for):
    options = options_for()

    assert options.timeout_ms == 120_000
    assert options.first_token_timeout_ms is None
    assert options.on == ("connection_error", "server_error", "rate_limit", "timeout")
    assert options.on == ALL_REASONS


@pytest.mark.parametrize(
    ("layers", "expected"),
    [
        (
            {
                "entry": (1001, None),
                "redundancy": (1002, None, None),
                "target_timeout": 1003,
                "key_options": {"timeout_ms": 1004},
                "settings_timeout": 1005,
            },
            1001,
        ),
        (
            {
                "redundancy": (1002, None, None),
                "target_timeout": 1003,
                "key_options": {"timeout_ms": 1004},
                "settings_timeout": 1005,
            },
            1002,
        ),
        (
            {
                "target_timeout": 1003,
                "key_options": {"timeout_ms": 1004},
                "settings_timeout": 1005,
            },
            1003,
        ),
        ({"key_options": {"timeout_ms": 1004}, "settings_timeout": 1005}, 1004),
        ({"settings_timeout": 1005}, 1005),
    ],
)
def test_timeout_takes_the_first_defined_layer(options_for, layers, expected):
    assert options_for(**layers).timeout_ms == expected


@pytest.mark.parametrize(
    ("layers", "expected"),
    [
        (
            {
                "entry": (None, 501),
                "redundancy": (None, 502, None),
                "key_options": {"first_token_timeout_ms": 503},
            },
            501,
        ),
        (
            {
                "redundancy": (None, 502, None),
                "key_options": {"first_token_timeout_ms": 503},
            },
            502,
        ),
        ({"key_options": {"first_token_timeout_ms": 503}}, 503),
        ({"target_timeout": 9000}, None),
    ],
)
def test_first_token_timeout_takes_the_first_defined_layer(
    options_for, layers, expected
):
    assert options_for(**layers).first_token_timeout_ms == expected


def test_request_on_wins_over_the_keys_defaults(options_for):
    options = options_for(
        redundancy=(None, None, ("timeout",)), key_options={"on": ("rate_limit",)}
    )

    assert options.on == ("timeout",)


def test_empty_request_on_is_kept_not_replaced_by_defaults(options_for):
    options = options_for(
        redundancy=(None, None, ()), key_options={"on": ("rate_limit",)}
    )

    assert options.on == ()


def test_key_defaults_on_applies_when_the_request_has_none(options_for):
    assert options_for(key_options={"on": ("server_error",)}).on == ("server_error",)


def test_key_default_options_apply_without_default_models(options_for):
    options = options_for(key_options={"timeout_ms": 2000})

    assert options.timeout_ms == 2000
