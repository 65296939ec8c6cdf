"""What ``import_config --prune`` may not delete (spec 07, 03 §2.1).

``--prune`` deletes the stored rows of the kinds a file lists but does not name.  Rows
of the kinds the file does not list stay as they are, so a pruned row they still
refer to would leave them dangling (a mapping to a deleted combo, a smart route to a
deleted model, an override of a deleted key) and the next export would not import.
Such a prune is refused, naming each referrer, as deleting a referenced combo is in
the admin and the REST API.  ``index`` is the reference index after the import:
stored rows of the pruned kinds are gone from it, the file's rows are in it.
"""

from __future__ import annotations

from typing import Any

from combos.models import CandidateOverride, ComboTarget, ModelComboMapping, SmartRoute
from providers.validation import ConfigIndex, Problem


def _combo_targets(index: ConfigIndex) -> list[Problem]:
    return [
        Problem(
            "providers",
            f"--prune would delete the provider or model of '{target.model}', still "
            f"a target of combo '{target.combo.name}'",
        )
        for target in ComboTarget.objects.filter(ref__isnull=True).select_related(
            "combo"
        )
        if target.model and not index.model_exists(target.model)
    ]


def _mappings(index: ConfigIndex) -> list[Problem]:
    return [
        Problem(
            "combos",
            f"--prune would delete combo '{mapping.combo.name}', still the combo of "
            f"mapping '{mapping.pattern}'",
        )
        for mapping in ModelComboMapping.objects.select_related("combo")
        if mapping.combo.name.lower() not in index.combos
    ]


def _smart_routes(index: ConfigIndex, path: str) -> list[Problem]:
    return [
        Problem(
            path,
            f"--prune would delete '{getattr(route, tier)}', still the {tier} target "
            f"of smart route '{route.alias}'",
        )
        for route in SmartRoute.objects.all()
        for tier in ("easy", "hard")
        if not index.resolves(getattr(route, tier))
    ]


def _overrides(index: ConfigIndex) -> list[Problem]:
    return [
        Problem(
            "api_keys",
            f"--prune would delete API key '{override.api_key.name}', which has a "
            f"candidate override for channel '{override.channel}'",
        )
        for override in CandidateOverride.objects.select_related("api_key")
        if override.api_key.name not in index.api_keys
    ]


def prune_problems(data: dict[str, Any], index: ConfigIndex) -> list[Problem]:
    """One problem per stored row of an unlisted kind that points at a pruned row."""
    listed = set(data)
    problems: list[Problem] = []
    if "providers" in listed and "combos" not in listed:
        problems += _combo_targets(index)
    if "combos" in listed and "model_combo_mappings" not in listed:
        problems += _mappings(index)
    if listed & {"providers", "combos"} and "smart_routes" not in listed:
        problems += _smart_routes(
            index, "combos" if "combos" in listed else "providers"
        )
    if "api_keys" in listed and "candidate_overrides" not in listed:
        problems += _overrides(index)
    return problems
