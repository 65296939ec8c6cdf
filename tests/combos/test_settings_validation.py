"""The gateway-wide ``settings:`` block (spec 07) for the amended keys:
``adaptive.trickle_fraction`` (05 §3.5) and ``self_healing`` (04 §6)."""

from __future__ import annotations

import pytest

from combos.settings_validation import validate_settings
from providers.validation import Checker


def _check(data):
    check = Checker("settings")
    out = validate_settings(data, check)
    return out, [str(p) for p in check.problems]


def test_the_amended_keys_are_accepted():
    out, problems = _check(
        {
            "adaptive": {"trickle_fraction": 0.05},
            "self_healing": {"exclusion_seconds": 10, "max_exclusion_seconds": 120},
        }
    )
    assert problems == []
    assert out["adaptive"] == {"trickle_fraction": 0.05}
    assert out["self_healing"] == {
        "exclusion_seconds": 10,
        "max_exclusion_seconds": 120,
    }


@pytest.mark.parametrize(
    ("data", "problem"),
    [
        ({"adaptive": {"trickle_fraction": 0.3}}, "settings.adaptive.trickle_fraction"),
        (
            {"self_healing": {"exclusion_seconds": 4}},
            "settings.self_healing.exclusion_seconds",
        ),
        (
            {"self_healing": {"exclusion_seconds": 3601}},
            "settings.self_healing.exclusion_seconds",
        ),
        (
            {"self_healing": {"exclusion_seconds": 60, "max_exclusion_seconds": 30}},
            "settings.self_healing.max_exclusion_seconds",
        ),
        (
            {"self_healing": {"max_exclusion_seconds": 100}},
            "settings.self_healing.max_exclusion_seconds",
        ),
        ({"self_healing": {"first": 10}}, "settings.self_healing.first"),
    ],
)
def test_out_of_range_values_are_named(data, problem):
    _, problems = _check(data)
    assert len(problems) == 1
    assert problems[0].startswith(problem + ":")
