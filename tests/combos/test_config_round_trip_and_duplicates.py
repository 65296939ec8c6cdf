"""``import_config`` / ``export_config`` against spec 07: the spec's example and every
documented combo ``config`` key import without a warning and round-trip, and the Nadir
API key is never exported in clear; duplicates that would break a unique index, a key
that is another key's literal and a value beyond its stored range are problems with
their path; a model string only a mapping resolves is a valid reference."""

from __future__ import annotations

import io
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml
from django.core.management import call_command
from django.core.management.base import CommandError

from combos import services
from combos.config_export import export_data, export_yaml
from combos.models import ApiKey, CandidateOverride, Combo, ModelComboMapping
from providers.models import Provider

pytestmark = pytest.mark.django_db

NADIR_SECRET = "nadir-literal-secret-4242"

# The second YAML block of spec 07 (one flow mapping wrapped to fit the line), plus
# the targets ``normal-hard`` needs (03 §2.1: 1..16 targets) and their provider.
SPEC07_COMBO_CONFIG_EXAMPLE = """
providers:
  - slug: pa
    kind: openai
    base_url: http://127.0.0.1:9/v1
    connections: [{name: main}]
    models: [{id: m1}, {id: m2}]
combos:
  - name: smart-pool
    strategy: auto
    config:
      auto: {modePack: quality-first, budgetCap: 0.02,
             budgetFallback: strict, maxAttempts: 2}
  - name: normal-hard
    strategy: adaptive
    targets: [{model: pa/m1}, {model: pa/m2}]
    config: {objective: latency, sessionAffinity: true}
"""


def _world() -> dict[str, Any]:
    return {
        "providers": [
            {
                "slug": "pa",
                "kind": "openai",
                "base_url": "http://127.0.0.1:9/v1",
                "connections": [{"name": "main"}, {"name": "backup"}],
                "models": [{"id": "m1"}, {"id": "m2"}],
            }
        ],
    }


def _combo(name: str, strategy: str, config: dict[str, Any]) -> dict[str, Any]:
    targets = [] if strategy == "auto" else [{"model": "pa/m1"}, {"model": "pa/m2"}]
    return {"name": name, "strategy": strategy, "targets": targets, "config": config}


# One combo per row of the "Combo config" table of spec 07, every key set.
EVERY_CONFIG_KEY = [
    _combo("c-rr", "round-robin", {"stickyRoundRobinLimit": 5}),
    _combo(
        "c-weighted",
        "weighted",
        {"stickyWeightedLimit": 3, "sessionAffinity": False},
    ),
    _combo("c-fill", "fill-first", {"fillFirstReservePercent": 10.5}),
    _combo("c-reset", "reset-aware", {"tieBand": 0.2}),
    _combo("c-window", "reset-window", {"resetWindowTieBandMs": 30000}),
    _combo(
        "c-relay",
        "context-relay",
        {"handoffThreshold": 0.7, "maxMessagesForSummary": 20},
    ),
    _combo(
        "c-fusion",
        "fusion",
        {
            "judgeModel": "pa/m1",
            "fusionTuning": {
                "minPanel": 2,
                "stragglerGraceMs": 5000,
                "panelHardTimeoutMs": 60000,
            },
        },
    ),
    _combo(
        "c-pipe",
        "pipeline",
        {
            "stagePrompts": ["draft", None],
            "agenticOrchestration": {"enabled": True, "maxToolRounds": 4},
        },
    ),
    _combo("c-expand", "priority", {"connectionAwareExpansion": True}),
    _combo(
        "c-auto",
        "auto",
        {
            "routerStrategy": "rules",
            "auto": {
                "weights": {"quality": 2, "costInv": 1},
                "candidatePool": ["pa"],
                "explorationRate": 0.1,
                "budgetCap": 0.5,
                "budgetFallback": "cheapest",
                "routerStrategy": "rules",
                "maxAttempts": 3,
                "preferTier": "cheap",
                "complexityAware": True,
                "slaTargetP95Ms": 1500,
                "slaMaxErrorRate": 0.1,
                "slaMaxCostPer1MTokens": 5,
                "slaHardConstraints": False,
                "nadir": {
                    "apiKey": "env:NADIR_KEY",
                    "baseUrl": "https://nadir.example/v1",
                    "timeoutMs": 2000,
                },
            },
        },
    ),
    _combo("c-adaptive", "adaptive", {"objective": "cost", "sessionAffinity": False}),
    _combo("c-p2c", "p2c", {"sessionAffinity": True}),
]


def _nadir_combo(api_key: str) -> dict[str, Any]:
    return {
        **_world(),
        "combos": [
            _combo(
                "smart",
                "auto",
                {"auto": {"nadir": {"apiKey": api_key, "timeoutMs": 1000}}},
            )
        ],
    }


def test_the_spec07_combo_config_example_imports_and_round_trips(
    import_data: Callable[..., Any],
) -> None:
    report = import_data(SPEC07_COMBO_CONFIG_EXAMPLE)

    assert report.warnings == []
    assert Combo.objects.get(name="smart-pool").config == {
        "auto": {
            "modePack": "quality-first",
            "budgetCap": 0.02,
            "budgetFallback": "strict",
            "maxAttempts": 2,
        }
    }
    assert import_data(export_yaml()).changed is False


def test_every_documented_config_key_imports_without_a_warning_and_round_trips(
    import_data: Callable[..., Any],
) -> None:
    report = import_data({**_world(), "combos": EVERY_CONFIG_KEY})

    assert report.warnings == []
    stored = {c.name: c.config for c in Combo.objects.all()}
    assert stored == {c["name"]: c["config"] for c in EVERY_CONFIG_KEY}
    again = import_data(export_yaml())
    assert again.changed is False


def test_a_literal_nadir_api_key_is_exported_masked(
    import_data: Callable[..., Any],
) -> None:
    import_data(_nadir_combo(NADIR_SECRET))

    text = export_yaml()

    assert NADIR_SECRET not in text
    nadir = export_data()["combos"][0]["config"]["auto"]["nadir"]
    assert nadir == {"apiKey": "***", "timeoutMs": 1000}
    # the engine still reads the real key from the row
    stored = Combo.objects.get(name="smart").config
    assert stored["auto"]["nadir"]["apiKey"] == NADIR_SECRET


def test_an_env_nadir_api_key_is_exported_as_its_reference(
    import_data: Callable[..., Any],
) -> None:
    import_data(_nadir_combo("env:NADIR_KEY"))

    nadir = export_data()["combos"][0]["config"]["auto"]["nadir"]

    assert nadir["apiKey"] == "env:NADIR_KEY"


def test_reimporting_a_masked_nadir_api_key_keeps_the_stored_key(
    import_data: Callable[..., Any],
) -> None:
    import_data(_nadir_combo(NADIR_SECRET))

    report = import_data(export_yaml())

    assert report.changed is False
    stored = Combo.objects.get(name="smart").config
    assert stored["auto"]["nadir"]["apiKey"] == NADIR_SECRET


def test_a_new_nadir_api_key_replaces_the_stored_one(
    import_data: Callable[..., Any],
) -> None:
    import_data(_nadir_combo(NADIR_SECRET))

    report = import_data(_nadir_combo("env:NADIR_KEY"))

    assert report.counts["combos"]["updated"] == 1
    stored = Combo.objects.get(name="smart").config
    assert stored["auto"]["nadir"]["apiKey"] == "env:NADIR_KEY"


def test_a_masked_nadir_api_key_on_a_new_combo_is_dropped(
    import_data: Callable[..., Any],
) -> None:
    import_data(_nadir_combo("***"))

    assert Combo.objects.get(name="smart").config == {
        "auto": {"nadir": {"timeoutMs": 1000}}
    }


def test_the_rest_and_admin_shape_masks_the_nadir_key_and_saving_it_keeps_it(
    import_data: Callable[..., Any],
) -> None:
    import_data(_nadir_combo(NADIR_SECRET))
    combo = Combo.objects.get(name="smart")
    data = services.combo_as_data(combo)
    assert data["config"]["auto"]["nadir"]["apiKey"] == "***"

    services.save_combo({**data, "active": False}, combo)

    combo.refresh_from_db()
    assert combo.active is False
    assert combo.config["auto"]["nadir"]["apiKey"] == NADIR_SECRET


def test_two_mappings_with_the_same_pattern_and_combo_are_one_problem(
    small_config: Callable[[], dict[str, Any]],
    import_problems: Callable[..., list[str]],
) -> None:
    data = small_config()
    data["model_combo_mappings"] = [
        {"pattern": "gpt-*", "combo": "team", "priority": 1},
        {"pattern": "gpt-*", "combo": "TEAM", "priority": 2},
    ]

    assert import_problems(data) == [
        "model_combo_mappings[1].pattern: duplicate of model_combo_mappings[0]"
    ]
    assert ModelComboMapping.objects.count() == 0


def test_one_pattern_may_map_to_two_combos(
    small_config: Callable[[], dict[str, Any]], import_data: Callable[..., Any]
) -> None:
    data = small_config()
    data["combos"].append({"name": "other", "targets": [{"model": "pa/m1"}]})
    data["model_combo_mappings"] = [
        {"pattern": "gpt-*", "combo": "team", "priority": 1},
        {"pattern": "gpt-*", "combo": "other", "priority": 2},
    ]

    import_data(data)

    assert import_data(data).changed is False
    assert ModelComboMapping.objects.count() == 2


def test_two_overrides_for_the_same_key_and_channel_are_one_problem(
    small_config: Callable[[], dict[str, Any]],
    import_problems: Callable[..., list[str]],
) -> None:
    data = small_config()
    data["candidate_overrides"].append(
        {"api_key": "ci", "channel": "coding", "exclude": []}
    )

    assert import_problems(data) == [
        "candidate_overrides[1].channel: duplicate of candidate_overrides[0]"
    ]
    assert CandidateOverride.objects.count() == 0


def test_the_same_literal_key_twice_in_a_file_is_one_problem(
    small_config: Callable[[], dict[str, Any]],
    import_problems: Callable[..., list[str]],
) -> None:
    data = small_config()
    data["api_keys"].append({"name": "other", "key": data["api_keys"][0]["key"]})

    assert import_problems(data) == ["api_keys[1].key: duplicate of api_keys[0]"]
    assert ApiKey.objects.count() == 0


def test_a_literal_key_of_another_stored_key_is_a_problem_with_its_path(
    small_config: Callable[[], dict[str, Any]],
    import_data: Callable[..., Any],
    tmp_path: Path,
) -> None:
    data = small_config()
    import_data(data)
    data["api_keys"] = [{"name": "thief", "key": data["api_keys"][0]["key"]}]
    data.pop("candidate_overrides")
    path = tmp_path / "clash.yaml"
    path.write_text(yaml.safe_dump(data))
    stderr = io.StringIO()

    with pytest.raises(CommandError, match="nothing was written"):
        call_command("import_config", str(path), stderr=stderr)

    assert stderr.getvalue().splitlines() == [
        "error: api_keys[0].key: is already the key of API key 'ci'"
    ]
    assert not ApiKey.objects.filter(name="thief").exists()


def test_saving_a_key_with_another_keys_literal_is_refused(
    small_config: Callable[[], dict[str, Any]],
    import_data: Callable[..., Any],
    key_problems: Callable[..., list[str]],
) -> None:
    data = small_config()
    import_data(data)

    assert key_problems({"name": "thief", "key": data["api_keys"][0]["key"]}) == [
        "key: is already the key of API key 'ci'"
    ]
    ci = ApiKey.objects.get(name="ci")
    assert key_problems({"name": "ci", "key": data["api_keys"][0]["key"]}, ci) == []


def test_a_tpm_beyond_the_stored_range_is_a_problem_not_a_crash(
    small_config: Callable[[], dict[str, Any]],
    import_problems: Callable[..., list[str]],
) -> None:
    data = small_config()
    data["api_keys"][0]["tpm"] = 3_000_000_000

    assert import_problems(data) == [
        "api_keys[0].tpm: must be between 1 and 2 147 483 647"
    ]
    assert Provider.objects.count() == 0


def test_a_model_string_only_a_mapping_resolves_is_a_valid_reference(
    small_config: Callable[[], dict[str, Any]], import_data: Callable[..., Any]
) -> None:
    data = small_config()
    data["model_combo_mappings"] = [{"pattern": "gpt-*", "combo": "team"}]
    data["api_keys"][0]["failover_defaults"] = {"models": ["gpt-x", "pa/m1"]}
    data["api_keys"][0].pop("allowed_models", None)
    data["smart_routes"] = [{"alias": "tiered", "easy": "gpt-mini", "hard": "pb/m2"}]

    import_data(data)

    stored = ApiKey.objects.get(name="ci")
    assert stored.failover_defaults["models"] == ["gpt-x", "pa/m1"]


def test_without_the_mapping_the_same_string_is_unknown(
    small_config: Callable[[], dict[str, Any]],
    import_problems: Callable[..., list[str]],
) -> None:
    data = small_config()
    data["model_combo_mappings"] = []
    data["api_keys"][0]["failover_defaults"] = {"models": ["gpt-x"]}
    data["api_keys"][0].pop("allowed_models", None)

    problems = import_problems(data)

    assert len(problems) == 1
    assert problems[0].startswith("api_keys[0].failover_defaults.models[0]:")


def test_a_providers_and_a_models_wire_round_trip(tmp_path: Path) -> None:
    source = tmp_path / "wire.yaml"
    source.write_text(
        """
providers:
  - slug: oai
    kind: openai
    wire: responses
    base_url: http://127.0.0.1:9/v1
    connections: [{name: main}]
    models: [{id: m1}, {id: chatty, wire: chat}]
  - slug: plain
    kind: openai
    base_url: http://127.0.0.1:9/v1
    connections: [{name: main}]
    models: [{id: m2, wire: responses}]
"""
    )
    call_command("import_config", str(source), stdout=io.StringIO())
    exported = {p["slug"]: p for p in export_data()["providers"]}
    assert exported["oai"]["wire"] == "responses"
    assert [m.get("wire") for m in exported["oai"]["models"]] == [None, "chat"]
    assert "wire" not in exported["plain"]
    assert exported["plain"]["models"][0]["wire"] == "responses"
    assert Provider.objects.get(slug="plain").wire == "chat"


def test_outbound_settings_round_trip_and_a_proxy_password_never_leaves(
    tmp_path: Path,
) -> None:
    pem = tmp_path / "ca.pem"
    pem.write_text("-----BEGIN CERTIFICATE-----\n")
    source = tmp_path / "outbound.yaml"
    source.write_text(
        f"""
providers:
  - slug: corp
    preset: openrouter
    proxy_url: http://user:s3cret-proxy-pass@proxy.local:3128
    ca_bundle: {pem}
    headers: {{HTTP-Referer: "https://me.example", X-Title: Me}}
    connections: [{{name: main}}]
    models: [{{id: m1}}]
  - slug: plain
    kind: openai
    base_url: http://127.0.0.1:9/v1
    proxy_url: none
"""
    )
    call_command("import_config", str(source), stdout=io.StringIO())
    exported = {p["slug"]: p for p in export_data()["providers"]}
    corp = exported["corp"]
    assert corp["preset"] == "openrouter"
    assert corp["proxy_url"] == "***"
    assert corp["ca_bundle"] == str(pem)
    assert corp["headers"] == {"HTTP-Referer": "https://me.example", "X-Title": "Me"}
    assert exported["plain"]["proxy_url"] == "none"
    assert "s3cret-proxy-pass" not in export_yaml()
    stored = Provider.objects.get(slug="corp")
    assert stored.proxy_url == "http://user:s3cret-proxy-pass@proxy.local:3128"
    assert "s3cret" not in stored.proxy_url_encrypted
    # re-importing the export keeps the stored proxy ("***" means unchanged)
    again = tmp_path / "again.yaml"
    again.write_text(export_yaml())
    call_command("import_config", str(again), stdout=io.StringIO())
    assert Provider.objects.get(slug="corp").proxy_url == stored.proxy_url
