"""``config.auto`` is judged by the auto engine itself (spec 04 §2.2, §3.4, §3.5, §8):
weights by ``normalize_scoring_weights``, packs by ``MODE_PACKS``, router names by the
strategy registry, so a custom strategy registered at start-up is accepted and an
unregistered name is an error that lists the registered choices."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import pytest

from combos.combo_validation import registered_router_strategies
from combos.models import Combo
from gateway.auto.engine import MODE_PACKS, RouterStrategy, register_router_strategy
from gateway.auto.engine import routers as router_strategies
from gateway.auto.engine.types import RouterContext, Scored
from providers.models import Provider

pytestmark = pytest.mark.django_db

Problems = Callable[..., list[str]]
CUSTOM = "prefer-last"


class PreferLast(RouterStrategy):
    name = CUSTOM

    def select(self, pool: Sequence[Scored], ctx: RouterContext) -> Scored | None:
        return pool[-1] if pool else None


@pytest.fixture
def custom_strategy(monkeypatch: pytest.MonkeyPatch) -> str:
    """``prefer-last`` registered for one test; the registry is restored after."""
    monkeypatch.setattr(router_strategies, "_CUSTOM", {})
    register_router_strategy(PreferLast(), replace=True)
    return CUSTOM


@pytest.fixture
def no_custom_strategy(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(router_strategies, "_CUSTOM", {})


def auto_combo(auto: dict[str, Any] | None = None, **config: Any) -> dict[str, Any]:
    if auto is not None:
        config["auto"] = auto
    return {"name": "pool", "strategy": "auto", "targets": [], "config": config}


# ------------------------------------------------------------------ router strategy


def test_a_registered_custom_strategy_is_accepted_and_stored(
    world: dict[str, Provider], combo_problems: Problems, custom_strategy: str
) -> None:
    problems = combo_problems(auto_combo({"routerStrategy": custom_strategy}))

    assert problems == []
    assert Combo.objects.get().config == {"auto": {"routerStrategy": CUSTOM}}


def test_a_registered_custom_strategy_is_accepted_at_the_top_level_too(
    world: dict[str, Provider], combo_problems: Problems, custom_strategy: str
) -> None:
    config = {"routerStrategy": custom_strategy, "auto": {"routerStrategy": CUSTOM}}

    assert combo_problems(auto_combo(**config)) == []


def test_two_names_of_one_strategy_at_both_levels_agree(
    world: dict[str, Provider], combo_problems: Problems
) -> None:
    config = {"routerStrategy": "cost", "auto": {"routerStrategy": "eco"}}

    assert combo_problems(auto_combo(**config)) == []


def test_an_unregistered_strategy_is_an_error_naming_the_registered_choices(
    world: dict[str, Provider], combo_problems: Problems, custom_strategy: str
) -> None:
    problems = combo_problems(auto_combo({"routerStrategy": "prefer-first"}))

    assert problems == [
        "config.auto.routerStrategy: must be one of: rules, score, cost, latency, "
        "sla-aware, lkgp, nadir, chaos, eco, fast, sla, prefer-last "
        '(got "prefer-first"; custom strategies are registered by the modules in '
        "OMNIROUTE_ROUTER_STRATEGY_MODULES)"
    ]
    assert Combo.objects.count() == 0


def test_a_custom_name_is_unknown_once_nothing_registers_it(
    world: dict[str, Provider], combo_problems: Problems, no_custom_strategy: None
) -> None:
    problems = combo_problems(auto_combo(routerStrategy=CUSTOM))

    assert len(problems) == 1
    assert problems[0].startswith("config.routerStrategy: must be one of: rules,")
    assert f"{CUSTOM}," not in problems[0]


@pytest.mark.parametrize("name", ["Cost", "cost ", "", 3, True])
def test_router_names_are_exact_and_case_sensitive(
    world: dict[str, Provider],
    combo_problems: Problems,
    no_custom_strategy: None,
    name: object,
) -> None:
    problems = combo_problems(auto_combo({"routerStrategy": name}))

    assert len(problems) == 1
    assert problems[0].startswith("config.auto.routerStrategy: must be one of: ")


@pytest.mark.parametrize("name", ["eco", "fast", "sla", "rules", "nadir", "chaos"])
def test_built_in_names_and_aliases_are_accepted(
    world: dict[str, Provider],
    combo_problems: Problems,
    no_custom_strategy: None,
    name: str,
) -> None:
    assert combo_problems(auto_combo({"routerStrategy": name})) == []


def test_the_listed_choices_are_the_engines_names_then_the_custom_ones(
    custom_strategy: str,
) -> None:
    names = registered_router_strategies()

    assert names[-1] == CUSTOM
    assert all(router_strategies.is_known_strategy(n) for n in names)
    assert set(router_strategies.BUILTIN_NAMES) | set(router_strategies.ALIASES) == (
        set(names) - {CUSTOM}
    )


# ------------------------------------------------------------------ weights and packs


@pytest.mark.parametrize(
    ("weights", "expected"),
    [
        ({"quota": -1}, "config.auto.weights.quota: must be a finite number >= 0"),
        ({"speed": 1}, "config.auto.weights.speed: unknown factor; expected one of: "),
        ({"health": True}, "config.auto.weights.health: must be a finite number >= 0"),
        ({"health": "1"}, "config.auto.weights.health: must be a finite number >= 0"),
        (
            {"quality": float("inf")},
            "config.auto.weights.quality: must be a finite number >= 0",
        ),
    ],
)
def test_a_weight_the_engine_rejects_is_an_error_at_its_path(
    world: dict[str, Provider],
    combo_problems: Problems,
    weights: dict[str, Any],
    expected: str,
) -> None:
    problems = combo_problems(auto_combo({"weights": weights}))

    assert len(problems) == 1
    assert problems[0].startswith(expected)
    assert Combo.objects.count() == 0


def test_a_rejected_weight_names_the_value_as_written(
    world: dict[str, Provider], combo_problems: Problems
) -> None:
    problems = combo_problems(
        auto_combo({"weights": {"health": True, "quota": "1", "costInv": -1}})
    )

    assert problems == [
        "config.auto.weights.health: must be a finite number >= 0, got true",
        'config.auto.weights.quota: must be a finite number >= 0, got "1"',
        "config.auto.weights.costInv: must be a finite number >= 0, got -1",
    ]


def test_an_unknown_factor_lists_the_engines_factors(
    world: dict[str, Provider], combo_problems: Problems
) -> None:
    problems = combo_problems(auto_combo({"weights": {"speed": 1}}))

    assert problems == [
        "config.auto.weights.speed: unknown factor; expected one of: quota, health, "
        "costInv, latencyInv, taskFit, stability, tierPriority, tierAffinity, "
        "specificityMatch, contextAffinity, sessionAvailability, connectionDensity, "
        "cacheAffinity, resetWindowAffinity, quality, reliability"
    ]


@pytest.mark.parametrize(
    "weights", [{}, {"quota": 0}, {"reliability": 2.5, "health": 1}]
)
def test_weights_the_engine_accepts_are_stored(
    world: dict[str, Provider], combo_problems: Problems, weights: dict[str, Any]
) -> None:
    assert combo_problems(auto_combo({"weights": weights})) == []
    assert Combo.objects.get().config == {"auto": {"weights": weights}}


@pytest.mark.parametrize("pack", list(MODE_PACKS))
def test_every_engine_mode_pack_is_accepted(
    world: dict[str, Provider], combo_problems: Problems, pack: str
) -> None:
    assert combo_problems(auto_combo({"modePack": pack})) == []


def test_an_unknown_mode_pack_lists_the_engines_packs(
    world: dict[str, Provider], combo_problems: Problems
) -> None:
    problems = combo_problems(auto_combo({"modePack": "yolo"}))

    assert problems == [
        "config.auto.modePack: must be one of: " + ", ".join(MODE_PACKS)
    ]
