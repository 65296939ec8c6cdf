"""Malformed sections are validation errors, never a traceback (found by fuzzing)."""

from __future__ import annotations

import pytest

from combos.config_file import ConfigFileError, plan_import

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize(
    "text",
    [
        "combos: [{name: x, strategy: priority, targets: 5}]",
        "combos: [{name: x, strategy: priority, targets: {a: 1}}]",
        "combos: 7",
        "providers: [1, 2]",
    ],
)
def test_wrong_shapes_are_reported(text):
    try:
        plan = plan_import(text)
    except ConfigFileError:
        return
    assert plan.problems
