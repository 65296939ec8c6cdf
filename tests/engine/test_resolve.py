"""Model string -> route: spec 03 §1.1 step by step, and the auto ids of 04 §1.1."""

import itertools

import pytest

from gateway.kernel.autoids import (
    CATEGORIES,
    TIERS,
    VARIANTS,
    UnknownAutoVariant,
    is_auto_id,
    parse_auto_id,
)
from gateway.kernel.globs import compile_glob, matches
from gateway.kernel.resolve import ModelNotFound, RouteKind, resolve
from gateway.kernel.types import MappingInfo

VALID_FORMS = (
    "Use auto, auto/<variant> (coding, fast, cheap, offline, smart, lkgp, chaos) or "
    "auto/<category>[:<tier>] (categories: coding, reasoning, vision, chat, "
    "multimodal; tiers: fast, cheap, floor, reliable, free, pro)."
)


@pytest.fixture
def table(make_table):
    """Providers pa, pb, pc (one connection each) and combo ``Team``."""
    return make_table(
        {"pa": ["m1"], "pb": ["m2"], "pc": ["m3"]},
        combos={"Team": ["pa/m1", "pb/m2"]},
    )


# --- steps 1-2: combo names ---------------------------------------------------------


def test_exact_combo_name_resolves_to_that_combo(table):
    resolved = resolve(table, "Team")

    assert resolved.kind is RouteKind.COMBO
    assert resolved.combo is table.combos["team"]
    assert resolved.identity == "combo:Team"
    assert resolved.route == "combo:Team"
    assert resolved.resolved_name == "Team"


@pytest.mark.parametrize("text", ["team", "TEAM", "tEaM"])
def test_combo_name_in_another_case_resolves_to_the_canonical_combo(table, text):
    resolved = resolve(table, text)

    assert resolved.combo is table.combos["team"]
    assert resolved.identity == "combo:Team"


def test_inactive_combo_name_is_not_a_combo(make_table):
    table = make_table(
        {"pa": ["m1"]}, combos={"gone": {"targets": [], "active": False}}
    )

    with pytest.raises(ModelNotFound):
        resolve(table, "gone")


def test_combo_named_like_a_bare_model_id_shadows_the_model(make_table):
    table = make_table({"pa": ["m1"], "pb": ["m2"]}, combos={"m1": ["pb/m2"]})

    assert resolve(table, "m1").identity == "combo:m1"
    assert resolve(table, "pa/m1").identity == "pa/m1"


def test_inactive_combo_named_like_a_model_lets_the_model_resolve(make_table):
    table = make_table(
        {"pa": ["m1"], "pb": ["m2"]},
        combos={"m1": {"targets": ["pb/m2"], "active": False}},
    )

    resolved = resolve(table, "m1")

    assert resolved.kind is RouteKind.DIRECT
    assert resolved.identity == "pa/m1"


# --- step 3: combo/<name> -----------------------------------------------------------


@pytest.mark.parametrize(
    "text", ["combo/Team", "combo/team", "COMBO/TEAM", "Combo/Team"]
)
def test_combo_prefix_names_the_combo_ignoring_case(table, text):
    resolved = resolve(table, text)

    assert resolved.combo is table.combos["team"]
    assert resolved.identity == "combo:Team"


@pytest.mark.parametrize("text", ["combo/nope", "combo/", "combo/auto", "combo/pa/m1"])
def test_combo_prefix_with_an_unknown_name_is_a_404(table, text):
    with pytest.raises(ModelNotFound):
        resolve(table, text)


def test_combo_prefix_does_not_fall_through_to_mappings_or_models(make_table):
    table = make_table(
        {"pa": ["m1", "combo/m1"]},
        combos={"X": ["pa/m1"]},
        mappings=[("*", "X", 0)],
    )

    with pytest.raises(ModelNotFound):
        resolve(table, "combo/m1")


def test_combo_prefix_with_an_inactive_combo_is_a_404(make_table):
    table = make_table({"pa": ["m1"]}, combos={"old": {"active": False}})

    with pytest.raises(ModelNotFound):
        resolve(table, "combo/old")


# --- step 4: model->combo mappings --------------------------------------------------


@pytest.fixture
def mapped(make_table):
    """Spec 03 §10 example 2: ``gpt-*`` (10) -> X, ``gpt-4*`` (5) -> Y."""

    def _make(*, x_active=True, y_active=True):
        return make_table(
            {"openai": ["gpt-4o"]},
            combos={
                "X": {"targets": ["openai/gpt-4o"], "active": x_active},
                "Y": {"targets": ["openai/gpt-4o"], "active": y_active},
            },
            mappings=[("gpt-*", "X", 10), ("gpt-4*", "Y", 5)],
        )

    return _make


def test_mapping_with_the_highest_priority_wins(mapped):
    assert resolve(mapped(), "GPT-4o").identity == "combo:X"


def test_mapping_to_an_inactive_combo_is_passed_over(mapped):
    assert resolve(mapped(x_active=False), "GPT-4o").identity == "combo:Y"


def test_model_string_falls_through_when_every_mapped_combo_is_inactive(mapped):
    resolved = resolve(mapped(x_active=False, y_active=False), "gpt-4o")

    assert resolved.kind is RouteKind.DIRECT
    assert resolved.identity == "openai/gpt-4o"


def test_combo_prefix_reaches_a_mapped_combo_directly(mapped):
    assert resolve(mapped(), "combo/X").identity == "combo:X"


def test_mapping_created_later_with_a_higher_priority_still_wins(make_table):
    table = make_table(
        {"pa": ["m1"]},
        combos={"X": ["pa/m1"], "Y": ["pa/m1"]},
        mappings=[("m*", "Y", 1), ("m*", "X", 2)],
    )

    assert resolve(table, "m1").identity == "combo:X"


@pytest.mark.parametrize(
    ("mappings", "expected"),
    [
        ([("m*", "X", 0), ("*1", "Y", 0)], "combo:X"),
        ([("*1", "Y", 0), ("m*", "X", 0)], "combo:Y"),
    ],
)
def test_mappings_of_equal_priority_apply_in_creation_order(
    make_table, mappings, expected
):
    table = make_table(
        {"pa": ["m1"]}, combos={"X": ["pa/m1"], "Y": ["pa/m1"]}, mappings=mappings
    )

    assert resolve(table, "m1").identity == expected


def test_mapping_to_a_combo_missing_from_the_table_is_passed_over(make_table):
    table = make_table(
        {"pa": ["m1"]},
        combos={"Y": ["pa/m1"]},
        mappings=[("m1", "deleted", 9), ("m1", "Y", 1)],
    )

    assert resolve(table, "m1").identity == "combo:Y"


@pytest.mark.parametrize("text", ["pa/m1", "m1", "auto", "auto/turbo", "AUTO/", "x"])
def test_star_mapping_captures_every_string_that_reaches_step_four(make_table, text):
    table = make_table(
        {"pa": ["m1"]}, combos={"X": ["pa/m1"]}, mappings=[("*", "X", 0)]
    )

    assert resolve(table, text).identity == "combo:X"


def test_mapping_never_overrides_a_combo_name(make_table):
    table = make_table(
        {"pa": ["m1"]},
        combos={"team": ["pa/m1"], "X": ["pa/m1"]},
        mappings=[("*", "X", 100)],
    )

    assert resolve(table, "TEAM").identity == "combo:team"


def test_mapping_pattern_must_match_the_whole_model_string(make_table):
    table = make_table(
        {"pa": ["m1"]}, combos={"X": ["pa/m1"]}, mappings=[("m", "X", 0)]
    )

    assert resolve(table, "m1").identity == "pa/m1"


# --- globs --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("pattern", "value", "expected"),
    [
        ("gpt-*", "gpt-4o", True),
        ("gpt-*", "gpt-", True),
        ("gpt-*", "gpt-4o/mini", True),
        ("*", "", True),
        ("*", "openai/gpt-5-nano", True),
        ("openai/*", "openai/org/model", True),
        ("*/gpt-*", "openai/gpt-4o", True),
        ("gpt-*", "xgpt-4o", False),
        ("gpt", "gpt-4o", False),
        ("gpt-4o", "gpt-4", False),
        ("m?", "m1", True),
        ("m?", "m", False),
        ("m?", "m12", False),
        ("m?", "m/", True),
        ("??", "ab", True),
        ("gpt-4.1", "gpt-4.1", True),
        ("gpt-4.1", "gpt-4x1", False),
        ("a+b", "a+b", True),
        ("a+b", "aab", False),
        ("[ab]", "[ab]", True),
        ("[ab]", "a", False),
        ("(x)|y", "(x)|y", True),
        ("(x)|y", "y", False),
        ("^a$", "^a$", True),
        ("a\\d", "a\\d", True),
        ("a\\d", "a1", False),
        ("GPT-*", "gpt-4o", True),
        ("gpt-*", "GPT-4O", True),
        ("a*", "a\nb", True),
    ],
)
def test_glob_matches_whole_string_ignoring_case(pattern, value, expected):
    assert matches(compile_glob(pattern), value) is expected


# --- step 5: auto ids ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "route"),
    [
        ("auto", "auto"),
        ("AUTO", "auto"),
        ("Auto", "auto"),
        ("auto/Vision:PRO", "auto/vision:pro"),
        ("auto/coding:floor", "auto/coding:cheap"),
        ("AUTO/Coding", "auto/coding"),
        ("auto/CODING:FLOOR", "auto/coding:cheap"),
    ],
)
def test_auto_id_resolves_to_its_lower_case_route_id(make_table, text, route):
    resolved = resolve(make_table({"pa": ["m1"]}), text)

    assert resolved.kind is RouteKind.AUTO
    assert resolved.identity == route
    assert resolved.route == route
    assert resolved.resolved_name == route
    assert resolved.auto_id == route


@pytest.mark.parametrize("variant", VARIANTS)
def test_every_variant_parses_to_itself(variant):
    assert parse_auto_id(f"auto/{variant}") == f"auto/{variant}"


@pytest.mark.parametrize("category", CATEGORIES)
def test_every_category_without_tier_parses_to_itself(category):
    assert parse_auto_id(f"auto/{category}") == f"auto/{category}"


@pytest.mark.parametrize(
    ("category", "tier"), list(itertools.product(CATEGORIES, TIERS))
)
def test_every_category_with_every_tier_parses_with_floor_written_cheap(category, tier):
    expected_tier = "cheap" if tier == "floor" else tier

    assert (
        parse_auto_id(f"auto/{category}:{tier}") == f"auto/{category}:{expected_tier}"
    )


def test_grammar_lists_match_the_spec():
    assert VARIANTS == ("coding", "fast", "cheap", "offline", "smart", "lkgp", "chaos")
    assert CATEGORIES == ("coding", "reasoning", "vision", "chat", "multimodal")
    assert TIERS == ("fast", "cheap", "floor", "reliable", "free", "pro")


def test_empty_auto_variant_is_a_400_whose_message_starts_empty_auto_variant():
    with pytest.raises(UnknownAutoVariant) as caught:
        parse_auto_id("auto/")

    assert str(caught.value).startswith("Empty auto variant")
    assert str(caught.value).endswith(VALID_FORMS)


@pytest.mark.parametrize(
    "text",
    [
        "auto/turbo",
        "auto/fast:cheap",
        "auto/coding:turbo",
        "auto/coding:",
        "auto/:fast",
        "auto/a:b:c",
        "auto/coding/x",
        "auto/free",
        "auto/ coding",
        "auto/coding ",
        "auto/smart:pro",
        "auto/coding:pro:pro",
        "AUTO/TURBO",
    ],
)
def test_invalid_auto_id_names_the_input_and_lists_the_valid_forms(make_table, text):
    with pytest.raises(UnknownAutoVariant) as caught:
        resolve(make_table({"pa": ["m1"]}), text)

    assert str(caught.value) == f"Unknown auto model '{text}'. {VALID_FORMS}"


def test_invalid_auto_id_does_not_fall_through_to_a_model_of_that_name(make_table):
    table = make_table({"pa": ["auto/turbo"]})

    with pytest.raises(UnknownAutoVariant):
        resolve(table, "auto/turbo")


@pytest.mark.parametrize(
    "text", ["autocoding", "automatic", "auto-1", "auto ", " auto"]
)
def test_strings_that_only_start_like_auto_are_not_auto_ids(text):
    assert is_auto_id(text) is False


@pytest.mark.parametrize("text", ["autocoding", "automatic", "auto-1"])
def test_auto_lookalike_served_by_a_provider_is_an_ordinary_model(make_table, text):
    resolved = resolve(make_table({"pa": [text]}), text)

    assert resolved.kind is RouteKind.DIRECT
    assert resolved.identity == f"pa/{text}"


@pytest.mark.parametrize("text", ["autocoding", "automatic", "auto-1"])
def test_unknown_auto_lookalike_is_model_not_found(make_table, text):
    with pytest.raises(ModelNotFound):
        resolve(make_table({"pa": ["m1"]}), text)


# --- step 6: <slug>/<rest> ----------------------------------------------------------


def test_provider_model_resolves_to_that_providers_model(table):
    resolved = resolve(table, "pa/m1")

    assert resolved.kind is RouteKind.DIRECT
    assert resolved.identity == "pa/m1"
    assert resolved.route == "direct"
    assert resolved.resolved_name == "pa/m1"
    assert resolved.models == (table.providers["pa"].models["m1"],)
    assert resolved.combo is None
    assert resolved.auto_id is None


def test_provider_slug_matches_ignoring_case_and_identity_uses_the_slug(make_table):
    table = make_table({"OpenAI": ["gpt-4o"]})

    resolved = resolve(table, "openai/gpt-4o")

    assert resolved.identity == "OpenAI/gpt-4o"
    assert resolved.models[0].model_id == "gpt-4o"


def test_rest_after_the_slug_may_contain_slashes(make_table):
    table = make_table({"openrouter": ["openai/gpt-4o", "meta/llama/3"]})

    assert resolve(table, "openrouter/openai/gpt-4o").identity == (
        "openrouter/openai/gpt-4o"
    )
    assert (
        resolve(table, "openrouter/meta/llama/3").models[0].model_id == "meta/llama/3"
    )


def test_model_matches_ignoring_case_when_unique_and_keeps_catalog_spelling(make_table):
    table = make_table({"openai": ["GPT-4o"]})

    resolved = resolve(table, "openai/gpt-4O")

    assert resolved.identity == "openai/GPT-4o"
    assert resolved.models[0].model_id == "GPT-4o"


def test_exact_spelling_wins_when_case_insensitive_match_is_ambiguous(make_table):
    table = make_table({"pa": ["Model", "MODEL"]})

    assert resolve(table, "pa/MODEL").models[0].model_id == "MODEL"
    assert resolve(table, "pa/Model").models[0].model_id == "Model"
    with pytest.raises(ModelNotFound):
        resolve(table, "pa/model")


def test_unknown_model_of_a_known_provider_is_a_404_without_fall_through(make_table):
    table = make_table({"pa": ["m1"], "pb": ["pa/x"]})

    with pytest.raises(ModelNotFound):
        resolve(table, "pa/x")


def test_slash_after_an_unknown_slug_is_part_of_a_bare_model_id(make_table):
    table = make_table({"pb": ["meta-llama/llama-3"]})

    resolved = resolve(table, "meta-llama/llama-3")

    assert resolved.identity == "pb/meta-llama/llama-3"


def test_slug_with_an_empty_rest_is_not_a_provider_model(make_table):
    with pytest.raises(ModelNotFound):
        resolve(make_table({"pa": ["m1"]}), "pa/")


def test_model_of_a_provider_without_an_active_connection_is_unknown(make_table):
    table = make_table({"pd": {"models": ["m4"], "connections": ()}})

    with pytest.raises(ModelNotFound):
        resolve(table, "pd/m4")
    with pytest.raises(ModelNotFound):
        resolve(table, "m4")


# --- step 7: bare ids ---------------------------------------------------------------


def test_bare_id_served_by_one_provider_has_that_providers_identity(table):
    resolved = resolve(table, "m1")

    assert resolved.kind is RouteKind.DIRECT
    assert resolved.identity == "pa/m1"
    assert resolved.resolved_name == "pa/m1"
    assert resolved.route == "direct"
    assert resolved.models == (table.providers["pa"].models["m1"],)


def test_bare_id_served_by_several_providers_is_star_identity_with_all_models(
    make_table,
):
    table = make_table({"openai": ["gpt-5-nano"], "azure": ["gpt-5-nano"]})

    resolved = resolve(table, "gpt-5-nano")

    assert resolved.identity == "*/gpt-5-nano"
    assert resolved.resolved_name == "*/gpt-5-nano"
    assert [m.key for m in resolved.models] == ["openai/gpt-5-nano", "azure/gpt-5-nano"]


def test_bare_id_matches_ignoring_case_with_catalog_spelling(make_table):
    table = make_table({"openai": ["gpt-5-nano"], "azure": ["GPT-5-Nano"]})

    resolved = resolve(table, "GPT-5-NANO")

    assert [m.key for m in resolved.models] == ["openai/gpt-5-nano", "azure/GPT-5-Nano"]
    assert resolved.identity == "*/gpt-5-nano"


def test_bare_id_skips_a_provider_where_the_case_insensitive_match_is_ambiguous(
    make_table,
):
    table = make_table({"px": ["Foo", "FOO"], "py": ["foo"]})

    resolved = resolve(table, "fOO")

    assert resolved.identity == "py/foo"


def test_bare_id_ignores_providers_without_an_active_connection(make_table):
    table = make_table({"pa": ["m1"], "pd": {"models": ["m1"], "connections": ()}})

    resolved = resolve(table, "m1")

    assert resolved.identity == "pa/m1"
    assert [m.key for m in resolved.models] == ["pa/m1"]


def test_unknown_bare_id_is_model_not_found(table):
    with pytest.raises(ModelNotFound):
        resolve(table, "nope")


def test_bare_id_and_provider_model_share_an_identity_when_one_provider_serves_it(
    make_table,
):
    table = make_table({"openai": ["gpt-5-nano"]})

    assert (
        resolve(table, "gpt-5-nano").identity
        == resolve(table, "openai/gpt-5-nano").identity
    )


def test_combo_prefix_and_combo_name_share_an_identity(table):
    assert resolve(table, "combo/team").identity == resolve(table, "Team").identity


def test_mapping_compiles_its_glob_from_the_pattern_when_not_given():
    mapping = MappingInfo(pattern="gpt-*", combo="X")

    assert matches(mapping.regex, "GPT-4o") is True
    assert matches(mapping.regex, "o3") is False
