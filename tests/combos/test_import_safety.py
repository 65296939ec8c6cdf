"""Configuration that would leave the database inconsistent is refused: ``--prune``
never leaves rows of unlisted kinds dangling (spec 07; 03 §2.1: a referenced combo is
not deleted), a YAML key given twice is an error, and the admin checks provider slugs
ignoring case, as REST and YAML do."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from combos.models import CandidateOverride, Combo, ModelComboMapping, SmartRoute

pytestmark = pytest.mark.django_db


def test_pruning_a_combo_a_stored_mapping_uses_is_refused(
    small_config: Callable[[], dict[str, Any]],
    import_data: Callable[..., Any],
    import_problems: Callable[..., list[str]],
) -> None:
    import_data(small_config())
    data = small_config()
    data["combos"] = [{"name": "other", "targets": [{"model": "pa/m1"}]}]

    problems = import_problems({"combos": data["combos"]}, prune=True)

    assert problems == [
        "combos: --prune would delete combo 'team', still the combo of mapping 'gpt-*'",
        "combos: --prune would delete 'team', still the hard target of smart route "
        "'normal'",
    ]
    assert list(Combo.objects.values_list("name", flat=True)) == ["team"]
    assert ModelComboMapping.objects.count() == 1


def test_pruning_a_combo_is_allowed_when_the_file_also_lists_its_referrers(
    small_config: Callable[[], dict[str, Any]],
    import_data: Callable[..., Any],
) -> None:
    import_data(small_config())
    data = {
        "combos": [{"name": "other", "targets": [{"model": "pa/m1"}]}],
        "model_combo_mappings": [{"pattern": "gpt-*", "combo": "other"}],
        "smart_routes": [{"alias": "normal", "easy": "pa/m1", "hard": "other"}],
    }

    import_data(data, prune=True)

    assert list(Combo.objects.values_list("name", flat=True)) == ["other"]
    assert list(ModelComboMapping.objects.values_list("combo__name", flat=True)) == [
        "other"
    ]
    assert SmartRoute.objects.get().hard == "other"


def test_pruning_a_provider_a_stored_combo_targets_is_refused(
    small_config: Callable[[], dict[str, Any]],
    import_data: Callable[..., Any],
    import_problems: Callable[..., list[str]],
) -> None:
    import_data(small_config())
    providers = [small_config()["providers"][0]]  # pb is left out

    problems = import_problems({"providers": providers}, prune=True)

    assert problems == [
        "providers: --prune would delete the provider or model of 'pb/m2', still a "
        "target of combo 'team'"
    ]


def test_pruning_an_api_key_with_a_stored_override_is_refused(
    small_config: Callable[[], dict[str, Any]],
    import_data: Callable[..., Any],
    import_problems: Callable[..., list[str]],
) -> None:
    import_data(small_config())

    problems = import_problems({"api_keys": [{"name": "other"}]}, prune=True)

    assert problems == [
        "api_keys: --prune would delete API key 'ci', which has a candidate override "
        "for channel 'coding'"
    ]
    assert CandidateOverride.objects.count() == 1


def test_a_key_given_twice_in_one_mapping_is_a_problem(
    import_problems: Callable[..., list[str]],
) -> None:
    text = "providers:\n  - slug: pa\n    slug: pb\n    kind: openai\n"

    [problem] = import_problems(text)

    assert "the key 'slug' is given twice" in problem


def test_the_admin_refuses_a_provider_slug_differing_only_by_case(
    make_provider: Callable[..., Any],
) -> None:
    from providers.admin import ProviderForm

    make_provider("pa")
    form = ProviderForm(
        data={"slug": "PA", "kind": "openai", "base_url": "http://127.0.0.1:9/v1"}
    )

    assert not form.is_valid()
    assert form.errors["slug"] == ["a provider 'pa' already exists"]
