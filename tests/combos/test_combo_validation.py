"""Combo rules (spec 03 §1.1, §2.1, §2.2; 04 §2.2), shared by every write path."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from combos import services
from combos.models import Combo, ComboTarget
from providers.models import Provider
from providers.services import config_version
from providers.validation import Problem

pytestmark = pytest.mark.django_db

Problems = Callable[..., list[str]]


def combo(name: str = "team", **fields: Any) -> dict[str, Any]:
    return {"name": name, "targets": [{"model": "pa/m1"}], **fields}


# ------------------------------------------------------------------ names


@pytest.mark.parametrize(
    "name", ["a", "Team", "gpt-4o:latest", "v1.2", "9lives", "x" * 64]
)
def test_a_combo_name_matching_the_pattern_is_accepted(
    world: dict[str, Provider], combo_problems: Problems, name: str
) -> None:
    assert combo_problems(combo(name)) == []
    assert Combo.objects.get().name == name


@pytest.mark.parametrize("name", ["-lead", ".dot", "a/b", "a b", "x" * 65, "tëam"])
def test_a_combo_name_outside_the_pattern_is_rejected(
    world: dict[str, Provider], combo_problems: Problems, name: str
) -> None:
    problems = combo_problems(combo(name))

    assert len(problems) == 1
    assert problems[0].startswith("name: ")
    assert Combo.objects.count() == 0


def test_an_empty_combo_name_is_required(
    world: dict[str, Provider], combo_problems: Problems
) -> None:
    assert combo_problems(combo("")) == ["name: must be a non-empty string"]


@pytest.mark.parametrize("name", ["auto", "AUTO", "Auto", "combo", "COMBO"])
def test_reserved_combo_names_are_rejected_in_any_case(
    world: dict[str, Provider], combo_problems: Problems, name: str
) -> None:
    assert combo_problems(combo(name)) == [f"name: '{name}' is reserved"]


def test_combo_names_are_unique_ignoring_case(
    world: dict[str, Provider],
    make_combo: Callable[..., Combo],
    combo_problems: Problems,
) -> None:
    make_combo("Team")

    problems = combo_problems(combo("TEAM"))

    assert problems == [
        "name: a combo named 'Team' already exists (names are unique ignoring case)"
    ]
    assert list(Combo.objects.values_list("name", flat=True)) == ["Team"]


def test_renaming_a_combo_to_another_case_of_its_own_name_is_allowed(
    world: dict[str, Provider],
    make_combo: Callable[..., Combo],
    combo_problems: Problems,
) -> None:
    team = make_combo("team")

    assert combo_problems(combo("TEAM"), team) == []
    assert list(Combo.objects.values_list("name", flat=True)) == ["TEAM"]


def test_a_combo_named_like_a_bare_model_is_saved_with_a_warning(
    world: dict[str, Provider],
) -> None:
    result = services.save_combo(combo("M1", targets=[{"model": "pb/m2"}]))

    assert result.warnings == [Problem("name", "COMBO_NAME_SHADOWS_MODEL: M1 (pa/m1)")]
    assert Combo.objects.get().name == "M1"


def test_a_combo_name_that_is_no_model_id_has_no_warning(
    world: dict[str, Provider],
) -> None:
    assert services.save_combo(combo("team")).warnings == []


# ------------------------------------------------------------------ strategy


@pytest.mark.parametrize(
    ("given", "stored"),
    [
        ("usage", "least-used"),
        ("context", "context-optimized"),
        ("failover", "priority"),
        ("Round-Robin", "round-robin"),
        ("p2c", "p2c"),
    ],
)
def test_strategy_aliases_are_stored_canonical(
    world: dict[str, Provider], given: str, stored: str
) -> None:
    services.save_combo(combo(strategy=given, targets=[{"model": "pa/m1"}]))

    assert Combo.objects.get().strategy == stored


def test_an_unknown_strategy_is_rejected(
    world: dict[str, Provider], combo_problems: Problems
) -> None:
    assert combo_problems(combo(strategy="fastest")) == [
        "strategy: unknown strategy 'fastest'"
    ]


def test_an_absent_strategy_means_priority(world: dict[str, Provider]) -> None:
    services.save_combo(combo())

    assert Combo.objects.get().strategy == "priority"


# ------------------------------------------------------------------ targets


def test_a_combo_needs_at_least_one_target(
    world: dict[str, Provider], combo_problems: Problems
) -> None:
    assert combo_problems(combo(targets=[])) == ["targets: must hold 1..16 targets"]


def test_a_combo_holds_at_most_sixteen_targets(
    make_provider: Callable[..., Provider], combo_problems: Problems
) -> None:
    make_provider("pa", models=tuple(f"m{i}" for i in range(17)))
    targets = [{"model": f"pa/m{i}"} for i in range(17)]

    assert combo_problems(combo(targets=targets[:16])) == []
    assert combo_problems(combo("big", targets=targets)) == [
        "targets: must hold 1..16 targets"
    ]


def test_an_auto_combo_may_have_no_targets(world: dict[str, Provider]) -> None:
    services.save_combo(combo("pool", strategy="auto", targets=[]))

    assert Combo.objects.get().targets.count() == 0


def test_an_auto_combo_cannot_reference_another_combo(
    world: dict[str, Provider],
    make_combo: Callable[..., Combo],
    combo_problems: Problems,
) -> None:
    make_combo("team")

    problems = combo_problems(
        combo("pool", strategy="auto", targets=[{"combo": "team"}])
    )

    assert problems == ["targets[0].combo: an auto combo cannot reference other combos"]


@pytest.mark.parametrize(
    ("target", "expected"),
    [
        ({"model": "opena/m1"}, "targets[0].model: unknown provider 'opena'"),
        ({"model": "pa/m9"}, "targets[0].model: unknown model 'm9' of provider 'pa'"),
        ({"model": "m1"}, "targets[0].model: 'm1' must be provider/model"),
        (
            {"model": "pa/m1", "connection": "nope"},
            "targets[0].connection: unknown connection 'nope' of provider 'pa'",
        ),
        (
            {"model": "pa/m1", "combo": "team"},
            "targets[0].model: exactly one of 'model' or 'combo' is required",
        ),
        (
            {"weight": 1},
            "targets[0].model: exactly one of 'model' or 'combo' is required",
        ),
        ({"combo": "nope"}, "targets[0].combo: unknown combo 'nope'"),
        (
            {"combo": "other", "connection": "main"},
            "targets[0].connection: is not allowed on a combo-ref",
        ),
        (
            {"model": "pa/m1", "weight": -1},
            "targets[0].weight: must be between 0 and 1 000 000",
        ),
        (
            {"model": "pa/m1", "weight": 1_000_001},
            "targets[0].weight: must be between 0 and 1 000 000",
        ),
        ({"model": "pa/m1", "weight": "1"}, "targets[0].weight: must be a number"),
        (
            {"model": "pa/m1", "timeout_ms": 999},
            "targets[0].timeout_ms: must be between 1 000 and 300 000",
        ),
        (
            {"model": "pa/m1", "timeout_ms": 300_001},
            "targets[0].timeout_ms: must be between 1 000 and 300 000",
        ),
        (
            {"model": "pa/m1", "timeout_ms": 1500.5},
            "targets[0].timeout_ms: must be an integer",
        ),
        ({"model": "pa/m1", "priority": 1}, "targets[0].priority: unknown key"),
    ],
)
def test_a_bad_target_is_rejected_naming_its_field(
    world: dict[str, Provider],
    make_combo: Callable[..., Combo],
    combo_problems: Problems,
    target: dict[str, Any],
    expected: str,
) -> None:
    make_combo("other")

    assert combo_problems(combo(targets=[target])) == [expected]
    assert list(Combo.objects.values_list("name", flat=True)) == ["other"]


@pytest.mark.parametrize(
    "target",
    [
        {"model": "pa/m1", "weight": 0},
        {"model": "pa/m1", "weight": 1_000_000},
        {"model": "pa/m1", "weight": 0.5},
        {"model": "pa/m1", "timeout_ms": 1000},
        {"model": "pa/m1", "timeout_ms": 300_000},
        {"model": "pa/m1", "connection": "backup"},
        {"model": "PA/m1"},
    ],
)
def test_targets_at_the_limits_of_their_ranges_are_accepted(
    world: dict[str, Provider], combo_problems: Problems, target: dict[str, Any]
) -> None:
    assert combo_problems(combo(targets=[target])) == []


def test_a_target_provider_is_stored_with_its_canonical_slug(
    world: dict[str, Provider],
) -> None:
    services.save_combo(combo(targets=[{"model": "PA/m1"}]))

    assert ComboTarget.objects.get().model == "pa/m1"


@pytest.mark.parametrize(
    ("targets", "expected"),
    [
        (
            [{"model": "pa/m1"}, {"model": "pa/m1"}],
            "targets[1]: duplicate target pa/m1@*",
        ),
        (
            [
                {"model": "pa/m1", "connection": "main"},
                {"model": "pa/m1", "connection": "main", "weight": 2},
            ],
            "targets[1]: duplicate target pa/m1@main",
        ),
        (
            [{"combo": "other"}, {"model": "pb/m2"}, {"combo": "OTHER"}],
            "targets[2]: duplicate target combo:other",
        ),
    ],
)
def test_two_targets_with_the_same_target_key_are_rejected(
    world: dict[str, Provider],
    make_combo: Callable[..., Combo],
    combo_problems: Problems,
    targets: list[dict[str, Any]],
    expected: str,
) -> None:
    make_combo("other")

    assert combo_problems(combo(targets=targets)) == [expected]


def test_the_same_model_on_two_connections_is_two_targets(
    world: dict[str, Provider], combo_problems: Problems
) -> None:
    targets = [
        {"model": "pa/m1", "connection": "main"},
        {"model": "pa/m1", "connection": "backup"},
        {"model": "pa/m1"},
    ]

    assert combo_problems(combo(targets=targets)) == []


# ------------------------------------------------------------------ combo-refs


def test_a_combo_ref_closing_a_cycle_is_rejected_with_its_path(
    world: dict[str, Provider],
    make_combo: Callable[..., Combo],
    combo_problems: Problems,
) -> None:
    b = make_combo("B")
    make_combo("A", targets=[{"combo": "B"}])

    problems = combo_problems(combo("B", targets=[{"combo": "A"}]), b)

    assert problems == ["targets[0].combo: cycle: B \u2192 A \u2192 B"]
    assert list(
        Combo.objects.get(name="B").targets.values_list("model", flat=True)
    ) == ["pa/m1"]


def test_a_cycle_is_reported_on_the_target_that_closes_it(
    world: dict[str, Provider],
    make_combo: Callable[..., Combo],
    combo_problems: Problems,
) -> None:
    b = make_combo("B")
    make_combo("A", targets=[{"combo": "B"}])

    problems = combo_problems(
        combo("B", targets=[{"model": "pb/m2"}, {"combo": "A"}]), b
    )

    assert problems == ["targets[1].combo: cycle: B \u2192 A \u2192 B"]


def test_a_combo_referencing_itself_is_a_cycle(
    world: dict[str, Provider], combo_problems: Problems
) -> None:
    assert combo_problems(combo("A", targets=[{"combo": "A"}])) == [
        "targets[0].combo: cycle: A \u2192 A"
    ]


def test_nesting_three_deep_is_accepted_and_four_deep_rejected(
    world: dict[str, Provider],
    make_combo: Callable[..., Combo],
    combo_problems: Problems,
) -> None:
    make_combo("D")
    make_combo("C", targets=[{"combo": "D"}])
    make_combo("B", targets=[{"combo": "C"}])

    problems = combo_problems(combo("A", targets=[{"combo": "B"}]))

    assert problems == [
        "targets[0].combo: nesting deeper than 3: A \u2192 B \u2192 C \u2192 D"
    ]
    assert combo_problems(combo("A2", targets=[{"combo": "C"}])) == []


def test_extending_a_chain_at_its_bottom_beyond_depth_three_is_rejected(
    world: dict[str, Provider],
    make_combo: Callable[..., Combo],
    combo_problems: Problems,
) -> None:
    make_combo("D")
    c = make_combo("C")
    make_combo("B", targets=[{"combo": "C"}])
    make_combo("A", targets=[{"combo": "B"}])

    problems = combo_problems(combo("C", targets=[{"combo": "D"}]), c)

    assert problems == [
        "targets[0].combo: nesting deeper than 3: A \u2192 B \u2192 C \u2192 D"
    ]
    assert Combo.objects.get(name="C").targets.get().ref_id is None


def test_a_combo_ref_is_stored_as_a_foreign_key(
    world: dict[str, Provider], make_combo: Callable[..., Combo]
) -> None:
    other = make_combo("other")

    team = make_combo("team", targets=[{"combo": "OTHER", "weight": 2}])

    target = team.targets.get()
    assert (target.ref_id, target.model, target.weight) == (other.id, "", 2.0)


# ------------------------------------------------------------------ config


def test_a_config_key_of_another_strategy_is_kept_with_a_warning(
    world: dict[str, Provider],
) -> None:
    result = services.save_combo(combo(config={"stickyRoundRobinLimit": 5}))

    assert result.warnings == [
        Problem(
            "config.stickyRoundRobinLimit",
            "not used by strategy 'priority'; kept and ignored",
        )
    ]
    assert Combo.objects.get().config == {"stickyRoundRobinLimit": 5}


def test_an_unknown_config_key_is_an_error(
    world: dict[str, Provider], combo_problems: Problems
) -> None:
    assert combo_problems(combo(config={"sticky_round_robin_limit": 5})) == [
        "config.sticky_round_robin_limit: unknown key"
    ]


@pytest.mark.parametrize(
    ("strategy", "config", "expected"),
    [
        ("round-robin", {"stickyRoundRobinLimit": 0}, "config.stickyRoundRobinLimit"),
        (
            "round-robin",
            {"stickyRoundRobinLimit": 1001},
            "config.stickyRoundRobinLimit",
        ),
        ("weighted", {"stickyWeightedLimit": 0}, "config.stickyWeightedLimit"),
        (
            "fill-first",
            {"fillFirstReservePercent": 51},
            "config.fillFirstReservePercent",
        ),
        ("reset-aware", {"tieBand": 0.6}, "config.tieBand"),
        ("reset-window", {"resetWindowTieBandMs": -1}, "config.resetWindowTieBandMs"),
        ("context-relay", {"handoffThreshold": 0}, "config.handoffThreshold"),
        ("context-relay", {"handoffThreshold": 0.95}, "config.handoffThreshold"),
        ("context-relay", {"maxMessagesForSummary": 4}, "config.maxMessagesForSummary"),
        ("priority", {"connectionAwareExpansion": "yes"}, "config.connectionAware"),
        ("adaptive", {"objective": "speed"}, "config.objective"),
        ("weighted", {"sessionAffinity": 1}, "config.sessionAffinity"),
    ],
)
def test_strategy_options_out_of_range_are_rejected(
    world: dict[str, Provider],
    combo_problems: Problems,
    strategy: str,
    config: dict[str, Any],
    expected: str,
) -> None:
    problems = combo_problems(combo(strategy=strategy, config=config))

    assert len(problems) == 1
    assert problems[0].startswith(expected)


@pytest.mark.parametrize(
    ("strategy", "config"),
    [
        ("round-robin", {"stickyRoundRobinLimit": 1000, "sessionAffinity": False}),
        ("fill-first", {"fillFirstReservePercent": 50}),
        ("reset-aware", {"tieBand": 0.5}),
        ("context-relay", {"handoffThreshold": 0.94, "maxMessagesForSummary": 100}),
        ("adaptive", {"objective": "cost", "sessionAffinity": True}),
        ("cost-optimized", {"connectionAwareExpansion": True}),
    ],
)
def test_strategy_options_within_range_are_stored(
    world: dict[str, Provider], strategy: str, config: dict[str, Any]
) -> None:
    result = services.save_combo(combo(strategy=strategy, config=config))

    assert result.warnings == []
    assert Combo.objects.get().config == config


@pytest.mark.parametrize(
    ("auto", "expected"),
    [
        ({"weights": {"speed": 1}}, "config.auto.weights.speed: unknown factor"),
        (
            {"weights": {"quota": -0.1}},
            "config.auto.weights.quota: must be a finite number >= 0",
        ),
        (
            {"weights": {"quota": 1}, "modePack": "ship-fast"},
            "config.auto.weights: cannot be combined with modePack",
        ),
        ({"modePack": "yolo"}, "config.auto.modePack: must be one of"),
        (
            {"explorationRate": 1.5},
            "config.auto.explorationRate: must be between 0 and 1",
        ),
        ({"budgetCap": 0}, "config.auto.budgetCap: must be more than 0"),
        ({"maxAttempts": 0}, "config.auto.maxAttempts: must be between 1 and 10"),
        ({"maxAttempts": 11}, "config.auto.maxAttempts: must be between 1 and 10"),
        (
            {"slaMaxErrorRate": 2},
            "config.auto.slaMaxErrorRate: must be between 0 and 1",
        ),
        ({"candidatePool": "pa/m1"}, "config.auto.candidatePool: must be a list"),
        (
            {"nadir": {"timeoutMs": 50}},
            "config.auto.nadir.timeoutMs: must be between 100 and",
        ),
        ({"nadir": {"baseUrl": "ftp://x"}}, "config.auto.nadir.baseUrl: must be an"),
        ({"nadir": {"token": "x"}}, "config.auto.nadir.token: unknown key"),
        ({"tiers": []}, "config.auto.tiers: unknown key"),
    ],
)
def test_auto_config_is_checked_key_by_key(
    world: dict[str, Provider],
    combo_problems: Problems,
    auto: dict[str, Any],
    expected: str,
) -> None:
    problems = combo_problems(
        combo("pool", strategy="auto", targets=[], config={"auto": auto})
    )

    assert len(problems) == 1
    assert problems[0].startswith(expected)


def test_a_full_auto_config_is_stored(world: dict[str, Provider]) -> None:
    config = {
        "auto": {
            "weights": {"quota": 0.2, "health": 0.3, "costInv": 0.5},
            "candidatePool": ["pa/m1", "pb/m2"],
            "explorationRate": 0,
            "budgetCap": 0.02,
            "budgetFallback": "cheapest-viable",
            "routerStrategy": "sla-aware",
            "maxAttempts": 10,
            "preferTier": "cheap",
            "complexityAware": True,
            "slaTargetP95Ms": 2000,
            "slaMaxErrorRate": 0.05,
            "slaMaxCostPer1MTokens": 3,
            "slaHardConstraints": True,
            "nadir": {"apiKey": "env:NADIR", "baseUrl": "https://n", "timeoutMs": 500},
        },
        "routerStrategy": "sla-aware",
    }

    result = services.save_combo(
        combo("pool", strategy="auto", targets=[], config=config)
    )

    assert result.warnings == []
    assert Combo.objects.get().config == config


def test_a_top_level_router_strategy_must_equal_the_auto_one(
    world: dict[str, Provider], combo_problems: Problems
) -> None:
    config = {"routerStrategy": "cost", "auto": {"routerStrategy": "latency"}}

    problems = combo_problems(combo("pool", strategy="auto", targets=[], config=config))

    assert problems == [
        "config.routerStrategy: must equal auto.routerStrategy when both are set"
    ]


def test_a_top_level_router_strategy_alone_is_accepted(
    world: dict[str, Provider], combo_problems: Problems
) -> None:
    config = {"routerStrategy": "cost"}

    assert (
        combo_problems(combo("pool", strategy="auto", targets=[], config=config)) == []
    )


@pytest.mark.parametrize(
    ("config", "expected"),
    [
        (
            {"fusionTuning": {"minPanel": 0}},
            "config.fusionTuning.minPanel: must be between 1 and",
        ),
        ({"fusionTuning": {"minPanel": 17}}, "config.fusionTuning.minPanel: must be"),
        (
            {"fusionTuning": {"stragglerGraceMs": 120_001}},
            "config.fusionTuning.stragglerGraceMs: must be between 0 and 120 000",
        ),
        (
            {"fusionTuning": {"panelHardTimeoutMs": 999}},
            "config.fusionTuning.panelHardTimeoutMs: must be between 1 000 and 300 000",
        ),
        ({"fusionTuning": {"grace": 1}}, "config.fusionTuning.grace: unknown key"),
        ({"judgeModel": "opena/x"}, "config.judgeModel: unknown model or combo"),
    ],
)
def test_fusion_config_is_checked(
    world: dict[str, Provider],
    combo_problems: Problems,
    config: dict[str, Any],
    expected: str,
) -> None:
    targets = [{"model": "pa/m1"}, {"model": "pb/m2"}]

    problems = combo_problems(combo(strategy="fusion", targets=targets, config=config))

    assert len(problems) == 1
    assert problems[0].startswith(expected)


def test_a_fusion_judge_may_be_a_model_or_a_combo(
    world: dict[str, Provider],
    make_combo: Callable[..., Combo],
    combo_problems: Problems,
) -> None:
    make_combo("judges")
    targets = [{"model": "pa/m1"}, {"model": "pb/m2"}]

    for judge in ("pc/m3", "judges", "m2"):
        config = {"judgeModel": judge, "fusionTuning": {"minPanel": 2}}
        assert (
            combo_problems(
                combo(
                    f"panel-{judge.replace('/', '-')}",
                    strategy="fusion",
                    targets=targets,
                    config=config,
                )
            )
            == []
        )


@pytest.mark.parametrize(
    ("config", "expected"),
    [
        (
            {"stagePrompts": ["a", "b", "c"]},
            "config.stagePrompts: must not be longer than targets",
        ),
        ({"stagePrompts": ["a", 1]}, "config.stagePrompts: must be a list of strings"),
        (
            {"agenticOrchestration": {"maxToolRounds": 33}},
            "config.agenticOrchestration.maxToolRounds: must be between 1 and 32",
        ),
        (
            {"agenticOrchestration": {"enabled": "on"}},
            "config.agenticOrchestration.enabled: must be true or false",
        ),
    ],
)
def test_pipeline_config_is_checked(
    world: dict[str, Provider],
    combo_problems: Problems,
    config: dict[str, Any],
    expected: str,
) -> None:
    targets = [{"model": "pa/m1"}, {"model": "pb/m2"}]

    problems = combo_problems(
        combo(strategy="pipeline", targets=targets, config=config)
    )

    assert len(problems) == 1
    assert problems[0].startswith(expected)


def test_a_valid_pipeline_config_is_stored(world: dict[str, Provider]) -> None:
    config = {
        "stagePrompts": ["summarise", None],
        "agenticOrchestration": {"enabled": True, "maxToolRounds": 32},
    }
    targets = [{"model": "pa/m1"}, {"model": "pb/m2"}]

    services.save_combo(combo(strategy="pipeline", targets=targets, config=config))

    assert Combo.objects.get().config == config


# ------------------------------------------------------------------ writes


def test_saving_a_combo_bumps_the_config_revision(world: dict[str, Provider]) -> None:
    before = config_version()

    services.save_combo(combo())

    assert config_version() == before + 1


def test_a_rejected_combo_does_not_bump_the_config_revision(
    world: dict[str, Provider], combo_problems: Problems
) -> None:
    before = config_version()

    combo_problems(combo(targets=[]))

    assert config_version() == before


def test_deleting_a_referenced_combo_is_refused_naming_the_referrers(
    world: dict[str, Provider], make_combo: Callable[..., Combo]
) -> None:
    other = make_combo("other")
    make_combo("team", targets=[{"combo": "other"}])
    services.save_mapping({"pattern": "gpt-*", "combo": "other"})

    with pytest.raises(services.ComboInUse) as caught:
        services.delete_combo(other)

    assert str(caught.value) == (
        "combo 'other' is referenced by: combo team, mapping gpt-*"
    )
    assert Combo.objects.filter(name="other").exists()


def test_deleting_an_unreferenced_combo_bumps_the_revision(
    world: dict[str, Provider], make_combo: Callable[..., Combo]
) -> None:
    team = make_combo("team")
    before = config_version()

    services.delete_combo(team)

    assert Combo.objects.count() == 0
    assert config_version() == before + 1
