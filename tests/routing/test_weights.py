"""Weights, mode packs and where each applies (spec 04 §1.2, §1.3, §3.4, §3.5, §5.1,
§11 example 7)."""

import math

import pytest

from gateway.auto.engine.weights import (
    DEFAULT_WEIGHTS,
    FACTORS,
    MODE_HEADER,
    MODE_PACKS,
    normalize_scoring_weights,
    route_exploration,
    route_tier_hint,
    route_weights,
    weights_for_mode,
)

PACK_NAMES = (
    "ship-fast",
    "cost-saver",
    "quality-first",
    "offline-friendly",
    "reliability-first",
    "chaos-mode",
)


# --- §3.4 the defaults ----------------------------------------------------------------


def test_factors_are_the_16_names_in_table_order():
    assert FACTORS == (
        "quota",
        "health",
        "costInv",
        "latencyInv",
        "taskFit",
        "stability",
        "tierPriority",
        "tierAffinity",
        "specificityMatch",
        "contextAffinity",
        "sessionAvailability",
        "connectionDensity",
        "cacheAffinity",
        "resetWindowAffinity",
        "quality",
        "reliability",
    )


def test_default_weights_are_the_exact_table_values_and_sum_to_one():
    assert dict(DEFAULT_WEIGHTS) == {
        "quota": 0.1429,
        "health": 0.1605,
        "costInv": 0.1429,
        "latencyInv": 0.1143,
        "taskFit": 0.0762,
        "stability": 0.0476,
        "tierPriority": 0.0476,
        "tierAffinity": 0.0476,
        "specificityMatch": 0.0476,
        "contextAffinity": 0.0476,
        "sessionAvailability": 0.0476,
        "connectionDensity": 0.0476,
        "cacheAffinity": 0.0,
        "resetWindowAffinity": 0.0,
        "quality": 0.03,
        "reliability": 0.0,
    }
    assert math.fsum(DEFAULT_WEIGHTS.values()) == pytest.approx(1.0, abs=1e-12)
    assert list(DEFAULT_WEIGHTS) == list(FACTORS)


def test_default_weights_are_read_only():
    with pytest.raises(TypeError):
        DEFAULT_WEIGHTS["quota"] = 1.0  # type: ignore[index]


# --- §3.5 mode packs ------------------------------------------------------------------


def test_there_are_six_packs_each_over_all_16_factors():
    assert tuple(MODE_PACKS) == PACK_NAMES
    for pack in MODE_PACKS.values():
        assert list(pack) == list(FACTORS)


@pytest.mark.parametrize("name", PACK_NAMES)
def test_each_pack_sums_to_one_and_never_weighs_cache_affinity(name):
    pack = MODE_PACKS[name]

    assert math.fsum(pack.values()) == pytest.approx(1.0, abs=1e-12)
    assert pack["cacheAffinity"] == 0.0
    assert pack["tierAffinity"] == pack["specificityMatch"] == 0.0
    assert pack["resetWindowAffinity"] == 0.0


@pytest.mark.parametrize(
    ("name", "factor", "printed"),
    [
        ("ship-fast", "latencyInv", 0.3048),
        ("ship-fast", "contextAffinity", 0.0095),
        ("cost-saver", "costInv", 0.3324),
        ("quality-first", "taskFit", 0.3524),
        ("offline-friendly", "quota", 0.3324),
        ("reliability-first", "health", 0.3524),
        ("reliability-first", "reliability", 0.04),
        ("chaos-mode", "health", 0.4000),
        ("chaos-mode", "tierPriority", 0.0040),
    ],
)
def test_packs_are_the_printed_values_divided_by_their_own_sum(name, factor, printed):
    # Every printed column sums to 0.9999.
    assert MODE_PACKS[name][factor] == pytest.approx(printed / 0.9999, rel=1e-9)


# --- §3.4 normalize_scoring_weights, §11 example 7 ------------------------------------


def test_example_7_raising_tier_priority_divides_by_1_1595():
    weights = normalize_scoring_weights({"tierPriority": 0.3, "costInv": 0.05})

    rounded = {name: round(value, 4) for name, value in weights.items()}
    assert rounded["tierPriority"] == 0.2587
    assert rounded["health"] == 0.1384
    assert rounded["quota"] == 0.1232
    assert rounded["costInv"] == 0.0431
    assert rounded["quality"] == 0.0259
    for name in FACTORS:
        if name not in ("tierPriority", "costInv"):
            assert weights[name] == pytest.approx(DEFAULT_WEIGHTS[name] / 1.1595)
    assert math.fsum(weights.values()) == pytest.approx(1.0)


@pytest.mark.parametrize("partial", [None, {}, dict.fromkeys(FACTORS, 0)])
def test_empty_and_all_zero_maps_give_the_defaults(partial):
    assert normalize_scoring_weights(partial) == DEFAULT_WEIGHTS


def test_missing_keys_keep_their_defaults_and_health_is_never_dropped():
    weights = normalize_scoring_weights({"costInv": 1.0})

    total = 1.0 + 1.0 - 0.1429
    assert weights["costInv"] == pytest.approx(1.0 / total)
    assert weights["health"] == pytest.approx(0.1605 / total)


def test_an_int_weight_is_accepted():
    weights = normalize_scoring_weights({"quota": 1})

    assert weights["quota"] == pytest.approx(1 / (2 - 0.1429))


@pytest.mark.parametrize(
    ("partial", "named"),
    [
        ({"quota": -1}, "'quota'"),
        ({"speed": 1}, "'speed'"),
        ({"health": True}, "'health'"),
        ({"health": "0.5"}, "'health'"),
        ({"health": None}, "'health'"),
        ({"latencyInv": math.nan}, "'latencyInv'"),
        ({"latencyInv": math.inf}, "'latencyInv'"),
        ({"latencyInv": -math.inf}, "'latencyInv'"),
        ({"quota": 0.1, "costinv": 0.2}, "'costinv'"),
    ],
)
def test_invalid_weights_are_rejected_with_the_key_named(partial, named):
    with pytest.raises(ValueError, match=named):
        normalize_scoring_weights(partial)


def test_a_non_mapping_is_rejected():
    with pytest.raises(ValueError, match="mapping"):
        normalize_scoring_weights([("quota", 1.0)])  # type: ignore[arg-type]


# --- §5.1 X-OmniRoute-Mode ------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "pack"),
    [
        ("fast", "ship-fast"),
        ("cheap", "cost-saver"),
        ("quality", "quality-first"),
        ("reliable", "reliability-first"),
        ("offline", "offline-friendly"),
        *((name, name) for name in PACK_NAMES),
        ("  CHEAP ", "cost-saver"),
        ("Chaos-Mode", "chaos-mode"),
    ],
)
def test_mode_header_presets_and_pack_names_select_a_pack(value, pack):
    assert weights_for_mode(value) == (MODE_PACKS[pack], f"header:{pack}")


@pytest.mark.parametrize("value", ["balanced", "default", " Balanced"])
def test_balanced_and_default_force_the_default_weights(value):
    assert weights_for_mode(value) == (DEFAULT_WEIGHTS, "header:default")


@pytest.mark.parametrize("value", [None, "", "   ", "turbo", "ship_fast", "fast,cheap"])
def test_absent_empty_or_unknown_modes_are_ignored(value):
    assert weights_for_mode(value) is None


def test_mode_header_table_covers_presets_defaults_and_every_pack():
    assert set(MODE_HEADER) == {
        "fast",
        "cheap",
        "quality",
        "reliable",
        "offline",
        "balanced",
        "default",
        *PACK_NAMES,
    }


# --- §1.2, §1.3 route ids -------------------------------------------------------------


@pytest.mark.parametrize(
    ("route_id", "source"),
    [
        ("auto", "default"),
        ("auto/lkgp", "default"),
        ("auto/coding", "quality-first"),
        ("auto/fast", "ship-fast"),
        ("auto/cheap", "cost-saver"),
        ("auto/offline", "offline-friendly"),
        ("auto/smart", "quality-first"),
        ("auto/chaos", "chaos-mode"),
        ("auto/reasoning", "quality-first"),
        ("auto/vision", "quality-first"),
        ("auto/multimodal", "quality-first"),
        ("auto/chat", "default"),
        ("auto/coding:fast", "ship-fast"),
        ("auto/coding:cheap", "cost-saver"),
        ("auto/coding:floor", "cost-saver"),
        ("auto/coding:reliable", "reliability-first"),
        ("auto/coding:free", "quality-first"),
        ("auto/coding:pro", "quality-first"),
        ("auto/reasoning:pro", "quality-first"),
        ("auto/chat:pro", "default"),
        ("auto/chat:free", "default"),
        ("auto/chat:fast", "ship-fast"),
        ("auto/vision:reliable", "reliability-first"),
        ("combo:team", "default"),
    ],
)
def test_route_weights_follow_variant_category_and_tier(route_id, source):
    weights, label = route_weights(route_id)

    assert label == source
    assert weights == (DEFAULT_WEIGHTS if source == "default" else MODE_PACKS[source])


@pytest.mark.parametrize(
    ("route_id", "rate"),
    [
        ("auto", 0.05),
        ("auto/coding", 0.05),
        ("auto/smart", 0.10),
        ("auto/chaos", 0.0),
        ("auto/reasoning:pro", 0.05),
        ("combo:team", 0.05),
    ],
)
def test_route_exploration_fixes_smart_and_chaos_only(route_id, rate):
    assert route_exploration(route_id, 0.05) == rate


@pytest.mark.parametrize(
    ("route_id", "hint"),
    [
        ("auto", None),
        ("auto/cheap", None),  # a variant, not a tier suffix
        ("auto/coding:cheap", "cheap"),
        ("auto/coding:floor", "cheap"),
        ("auto/reasoning:free", "free"),
        ("auto/vision:pro", "premium"),
        ("auto/coding:fast", None),
        ("auto/coding:reliable", None),
        ("combo:pro", None),
    ],
)
def test_route_tier_hint_comes_from_the_tier_suffix(route_id, hint):
    assert route_tier_hint(route_id) == hint
