"""``import_config`` (spec 07): validate the whole file, then upsert atomically."""

from __future__ import annotations

import hashlib
import io
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml
from django.core.management import call_command
from django.core.management.base import CommandError

from combos.models import (
    ApiKey,
    CandidateOverride,
    Combo,
    ComboTarget,
    GatewaySettings,
    ModelComboMapping,
    SmartRoute,
)
from gateway.dialects import REGISTRY
from providers import crypto
from providers.models import Connection, Provider, ProviderModel
from providers.services import config_version

pytestmark = pytest.mark.django_db

GENERATED_KEY = re.compile(r"^sk-or-[A-Za-z0-9_-]{43}$")


def table_counts() -> dict[str, int]:
    return {
        model.__name__: model.objects.count()
        for model in (
            Provider,
            Connection,
            ProviderModel,
            Combo,
            ComboTarget,
            ModelComboMapping,
            ApiKey,
            CandidateOverride,
            SmartRoute,
            GatewaySettings,
        )
    }


def test_spec07_example_file_imports_every_section(
    spec07_yaml: str, import_data: Callable[..., Any]
) -> None:
    report = import_data(spec07_yaml)

    assert report.changed is True
    assert report.warnings == []
    assert table_counts() == {
        "Provider": 3,
        "Connection": 4,
        "ProviderModel": 3,
        "Combo": 5,
        "ComboTarget": 7,
        "ModelComboMapping": 1,
        "ApiKey": 2,
        "CandidateOverride": 1,
        "SmartRoute": 1,
        "GatewaySettings": 1,
    }
    assert config_version() == 1
    main = Connection.objects.get(provider__slug="openai", name="main")
    assert (main.api_key_ref, main.api_key_encrypted) == ("env:OPENAI_API_KEY", "")
    assert (main.tier, main.default_model, main.quota_remaining_percent) == (
        "pro",
        "gpt-5-nano",
        100.0,
    )
    nano = ProviderModel.objects.get(model_id="gpt-5-nano")
    assert nano.capabilities == ["tools", "vision", "reasoning", "json"]
    assert (nano.cache_read_cost, nano.tier) == (0.005, "budget")
    ci = ApiKey.objects.get(name="ci")
    assert ci.failover_defaults == {
        "models": [
            "openai/gpt-5-nano",
            "anthropic/claude-sonnet-4",
            "google/gemini-2.5-flash",
        ],
        "timeout_ms": 30000,
        "first_token_timeout_ms": 5000,
        "on": ["connection_error", "server_error", "rate_limit", "timeout"],
    }
    assert ci.expires_at.isoformat() == "2027-01-01T00:00:00+00:00"
    my_combo = Combo.objects.get(name="my-combo")
    assert [str(t) for t in my_combo.targets.all()] == [
        "openai/gpt-5-nano",
        "combo:other-combo",
    ]
    assert Combo.objects.get(name="smart-pool").config == {
        "auto": {
            "modePack": "quality-first",
            "budgetCap": 0.02,
            "budgetFallback": "strict",
            "maxAttempts": 2,
        }
    }
    assert GatewaySettings.objects.get().data["breaker"]["open_seconds"] == 30


def test_importing_the_same_file_twice_changes_nothing(
    spec07_yaml: str, import_data: Callable[..., Any]
) -> None:
    import_data(spec07_yaml)
    before = table_counts()
    hashes = dict(ApiKey.objects.values_list("name", "key_hash"))

    report = import_data(spec07_yaml)

    assert report.changed is False
    assert report.generated_keys == []
    assert config_version() == 1
    assert table_counts() == before
    assert dict(ApiKey.objects.values_list("name", "key_hash")) == hashes
    assert {kind: c["unchanged"] for kind, c in report.counts.items()} == {
        "providers": 3,
        "connections": 4,
        "models": 3,
        "combos": 5,
        "api_keys": 2,
        "model_combo_mappings": 1,
        "candidate_overrides": 1,
        "smart_routes": 1,
        "settings": 1,
    }


def test_a_changed_field_is_reported_as_one_update_and_bumps_the_revision(
    small_config: Callable[[], dict[str, Any]], import_data: Callable[..., Any]
) -> None:
    import_data(small_config())
    data = small_config()
    data["combos"][0]["strategy"] = "round-robin"

    report = import_data(data)

    assert report.changed is True
    assert report.counts["combos"] == {
        "created": 0,
        "updated": 1,
        "unchanged": 0,
        "deleted": 0,
    }
    assert Combo.objects.get(name="team").strategy == "round-robin"
    assert config_version() == 2


def test_one_bad_combo_target_writes_nothing(
    small_config: Callable[[], dict[str, Any]],
    import_problems: Callable[..., list[str]],
) -> None:
    data = small_config()
    data["combos"][0]["targets"][0]["model"] = "opena/gpt-5-nano"

    problems = import_problems(data)

    assert problems == ["combos[0].targets[0].model: unknown provider 'opena'"]
    assert set(table_counts().values()) == {0}
    assert config_version() == 0


def test_a_failed_import_leaves_an_existing_configuration_untouched(
    small_config: Callable[[], dict[str, Any]],
    import_data: Callable[..., Any],
    import_problems: Callable[..., list[str]],
) -> None:
    import_data(small_config())
    before = table_counts()
    data = small_config()
    data["providers"][0]["base_url"] = "http://changed.example/v1"
    data["combos"].append(
        {"name": "extra", "targets": [{"model": "pa/m1", "weight": -1}]}
    )

    problems = import_problems(data)

    assert problems == ["combos[1].targets[0].weight: must be between 0 and 1 000 000"]
    assert table_counts() == before
    assert Provider.objects.get(slug="pa").base_url == "http://127.0.0.1:9/v1"
    assert config_version() == 1


def test_every_problem_of_a_file_is_reported_with_its_path(
    small_config: Callable[[], dict[str, Any]],
    import_problems: Callable[..., list[str]],
) -> None:
    data = small_config()
    data["providers"][1]["kind"] = "no-such-kind"
    data["combos"][0]["targets"][1] = {"model": "pa/nope"}
    data["api_keys"][0]["rpm"] = 0

    problems = import_problems(data)

    assert problems == [
        f"providers[1].kind: must be one of: {', '.join(REGISTRY)}",
        "combos[0].targets[1].model: unknown model 'nope' of provider 'pa'",
        "api_keys[0].rpm: must be between 1 and 10 000 000",
    ]


def mutate(data: dict[str, Any], path: str, value: Any) -> None:
    """Set ``value`` at a dotted path (``combos[0].config.x``), adding mappings."""
    parts = re.findall(r"[^.\[\]]+|\[\d+\]", path)
    node: Any = data
    for part in parts[:-1]:
        node = (
            node[int(part[1:-1])] if part.startswith("[") else node.setdefault(part, {})
        )
    last = parts[-1]
    if last.startswith("["):
        node[int(last[1:-1])] = value
    else:
        node[last] = value


@pytest.mark.parametrize(
    ("path", "expected"),
    [
        ("provider_list", "provider_list: unknown section"),
        ("providers[0].regio", "providers[0].regio: unknown key"),
        ("providers[0].connections[0].token", "providers[0].connections[0].token"),
        ("providers[0].connections[0].quota.left", "connections[0].quota.left"),
        ("providers[0].models[0].price", "providers[0].models[0].price: unknown key"),
        ("combos[0].strategi", "combos[0].strategi: unknown key"),
        ("combos[0].targets[0].wieght", "combos[0].targets[0].wieght: unknown key"),
        ("combos[0].config.stickyLimit", "combos[0].config.stickyLimit: unknown key"),
        ("combos[0].config.sticky_round_robin_limit", "config.sticky_round_robin"),
        ("model_combo_mappings[0].weight", "model_combo_mappings[0].weight: unknown"),
        ("api_keys[0].budget", "api_keys[0].budget: unknown key"),
        ("api_keys[0].failover_defaults.retries", "failover_defaults.retries: unknown"),
        ("candidate_overrides[0].include", "candidate_overrides[0].include: unknown"),
        ("smart_routes[0].medium", "smart_routes[0].medium: unknown key"),
        ("settings.breaker_seconds", "settings.breaker_seconds: unknown key"),
        ("settings.breaker.half_open", "settings.breaker.half_open: unknown key"),
        ("settings.adaptive.speed", "settings.adaptive.speed: unknown key"),
    ],
)
def test_an_unknown_key_is_an_error_at_every_level(
    small_config: Callable[[], dict[str, Any]],
    import_problems: Callable[..., list[str]],
    path: str,
    expected: str,
) -> None:
    data = small_config()
    mutate(data, path, 1)

    problems = import_problems(data)

    assert len(problems) == 1
    assert expected in problems[0]
    assert Provider.objects.count() == 0


def test_a_config_key_of_another_strategy_is_kept_with_a_warning(
    small_config: Callable[[], dict[str, Any]], import_data: Callable[..., Any]
) -> None:
    data = small_config()
    data["combos"][0]["config"] = {"stickyRoundRobinLimit": 2}

    report = import_data(data)

    assert [str(w) for w in report.warnings] == [
        "combos[0].config.stickyRoundRobinLimit: "
        "not used by strategy 'priority'; kept and ignored"
    ]
    assert Combo.objects.get(name="team").config == {"stickyRoundRobinLimit": 2}


@pytest.mark.parametrize(
    ("path", "value", "expected"),
    [
        ("providers[0].kind", "nope", "providers[0].kind: must be one of"),
        ("providers[0].connections[0].tier", "gold", "connections[0].tier: must be"),
        ("providers[0].models[0].tier", "cheap", "models[0].tier: must be one of"),
        ("providers[0].models[0].capabilities", ["audio"], "models[0].capabilities"),
        ("combos[0].strategy", "fastest", "combos[0].strategy: unknown strategy"),
        ("combos[0].config", {"objective": "speed"}, "config.objective: must be"),
        ("api_keys[0].budget_period", "year", "api_keys[0].budget_period: must be"),
        ("api_keys[0].failover_defaults.on", ["http_500"], "failover_defaults.on"),
        ("settings.smart_routing_mode", "strict", "settings.smart_routing_mode"),
        ("settings.adaptive", {"objective": "speed"}, "settings.adaptive.objective"),
    ],
)
def test_every_enum_is_checked(
    small_config: Callable[[], dict[str, Any]],
    import_problems: Callable[..., list[str]],
    path: str,
    value: Any,
    expected: str,
) -> None:
    data = small_config()
    mutate(data, path, value)

    problems = import_problems(data)

    assert len(problems) == 1
    assert expected in problems[0]


@pytest.mark.parametrize(
    ("config", "expected"),
    [
        ({"auto": {"modePack": "yolo"}}, "combos[0].config.auto.modePack: must be"),
        (
            {"auto": {"budgetFallback": "panic"}},
            "combos[0].config.auto.budgetFallback: must be",
        ),
        (
            {"auto": {"routerStrategy": "magic"}},
            "combos[0].config.auto.routerStrategy: must be",
        ),
        ({"auto": {"preferTier": "gold"}}, "combos[0].config.auto.preferTier: must"),
    ],
)
def test_every_enum_of_an_auto_config_is_checked(
    small_config: Callable[[], dict[str, Any]],
    import_problems: Callable[..., list[str]],
    config: dict[str, Any],
    expected: str,
) -> None:
    data = small_config()
    data["combos"][0].update(strategy="auto", targets=[], config=config)

    problems = import_problems(data)

    assert len(problems) == 1
    assert problems[0].startswith(expected)


def test_yaml_booleans_are_only_true_and_false(
    small_config: Callable[[], dict[str, Any]],
    import_problems: Callable[..., list[str]],
) -> None:
    data = small_config()
    data["providers"][0]["connections"][0]["active"] = "ACTIVE"
    text = yaml.safe_dump(data).replace("active: ACTIVE", "active: yes")

    problems = import_problems(text)

    assert problems == ["providers[0].connections[0].active: must be true or false"]


def test_prune_deletes_rows_of_listed_kinds_and_keeps_unlisted_kinds(
    small_config: Callable[[], dict[str, Any]],
    import_data: Callable[..., Any],
    make_provider: Callable[..., Provider],
    make_combo: Callable[..., Combo],
    make_api_key: Callable[..., Any],
) -> None:
    import_data(small_config())
    make_provider("old", models=("m9",))
    make_combo("stale", targets=[{"model": "old/m9"}])
    make_api_key("legacy")
    data = small_config()
    data["providers"][0]["connections"] = []
    data["providers"][0]["models"].append({"id": "m1b"})
    data = {"providers": data["providers"], "combos": data["combos"]}

    report = import_data(data, prune=True)

    assert sorted(Provider.objects.values_list("slug", flat=True)) == ["pa", "pb"]
    assert list(Combo.objects.values_list("name", flat=True)) == ["team"]
    assert sorted(ApiKey.objects.values_list("name", flat=True)) == ["ci", "legacy"]
    assert Connection.objects.filter(provider__slug="pa").count() == 0
    assert sorted(
        ProviderModel.objects.filter(provider__slug="pa").values_list(
            "model_id", flat=True
        )
    ) == ["m1", "m1b"]
    assert SmartRoute.objects.count() == 1
    assert report.counts["providers"]["deleted"] == 1
    assert report.counts["combos"]["deleted"] == 1
    assert report.counts["connections"]["deleted"] == 1


def test_without_prune_rows_missing_from_the_file_are_kept(
    small_config: Callable[[], dict[str, Any]],
    import_data: Callable[..., Any],
    make_combo: Callable[..., Combo],
) -> None:
    import_data(small_config())
    make_combo("extra", targets=[{"model": "pa/m1"}])

    report = import_data(small_config())

    assert sorted(Combo.objects.values_list("name", flat=True)) == ["extra", "team"]
    assert report.changed is False


def test_prune_validates_against_the_file_alone(
    small_config: Callable[[], dict[str, Any]],
    import_data: Callable[..., Any],
    import_problems: Callable[..., list[str]],
    make_provider: Callable[..., Provider],
) -> None:
    make_provider("old", models=("m9",))
    data = small_config()
    data["combos"][0]["targets"].append({"model": "old/m9"})

    assert import_problems(data, prune=True) == [
        "combos[0].targets[2].model: unknown provider 'old'"
    ]
    assert import_problems(data) == []


def test_a_literal_api_key_is_stored_only_as_its_hash_and_prefix(
    small_config: Callable[[], dict[str, Any]], import_data: Callable[..., Any]
) -> None:
    literal = small_config()["api_keys"][0]["key"]

    report = import_data(small_config())

    key = ApiKey.objects.get(name="ci")
    assert report.generated_keys == []
    assert key.key_hash == hashlib.sha256(literal.encode()).hexdigest()
    assert key.prefix == literal[:12]
    stored = yaml.safe_dump(list(ApiKey.objects.values()))
    assert literal not in stored


def test_a_generated_api_key_is_printed_once_and_stored_as_a_hash(
    small_config: Callable[[], dict[str, Any]], tmp_path: Path
) -> None:
    data = small_config()
    del data["api_keys"][0]["key"]
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(data))
    first, second = io.StringIO(), io.StringIO()

    call_command("import_config", str(path), stdout=first)
    call_command("import_config", str(path), stdout=second)

    printed = re.findall(r"^api key ci: (\S+)", first.getvalue(), re.M)
    assert len(printed) == 1
    assert GENERATED_KEY.fullmatch(printed[0])
    key = ApiKey.objects.get(name="ci")
    assert key.key_hash == hashlib.sha256(printed[0].encode()).hexdigest()
    assert key.prefix == printed[0][:12]
    assert "api key" not in second.getvalue()
    assert second.getvalue().endswith("no changes\n")


def test_a_connection_literal_secret_is_stored_encrypted(
    small_config: Callable[[], dict[str, Any]], import_data: Callable[..., Any]
) -> None:
    import_data(small_config())

    connection = Connection.objects.get(provider__slug="pb", name="main")
    assert connection.api_key_ref == ""
    assert "pb-literal-1234" not in connection.api_key_encrypted
    assert crypto.decrypt(connection.api_key_encrypted) == "pb-literal-1234"


def test_a_changed_connection_secret_is_an_update(
    small_config: Callable[[], dict[str, Any]], import_data: Callable[..., Any]
) -> None:
    import_data(small_config())
    data = small_config()
    data["providers"][1]["connections"][0]["api_key"] = "pb-literal-5678"

    report = import_data(data)

    connection = Connection.objects.get(provider__slug="pb", name="main")
    assert report.counts["connections"]["updated"] == 1
    assert crypto.decrypt(connection.api_key_encrypted) == "pb-literal-5678"


def test_a_combo_named_like_a_bare_model_imports_with_a_warning(
    small_config: Callable[[], dict[str, Any]], import_data: Callable[..., Any]
) -> None:
    data = small_config()
    data["combos"].append({"name": "M2", "targets": [{"model": "pa/m1"}]})

    report = import_data(data)

    assert [str(w) for w in report.warnings] == [
        "combos[1].name: COMBO_NAME_SHADOWS_MODEL: M2 (pb/m2)"
    ]
    assert Combo.objects.filter(name="M2").exists()


def test_the_command_exits_non_zero_with_each_problem_on_stderr(
    small_config: Callable[[], dict[str, Any]], tmp_path: Path
) -> None:
    data = small_config()
    data["combos"][0]["targets"][0]["model"] = "opena/x"
    data["api_keys"][0]["budget_period"] = "year"
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump(data))
    stderr = io.StringIO()

    with pytest.raises(CommandError, match=r"^2 problem\(s\); nothing was written$"):
        call_command("import_config", str(path), stderr=stderr)

    assert stderr.getvalue().splitlines() == [
        "error: combos[0].targets[0].model: unknown provider 'opena'",
        "error: api_keys[0].budget_period: must be one of: day, week, month",
    ]
    assert Provider.objects.count() == 0


def test_the_command_reports_an_unreadable_file(tmp_path: Path) -> None:
    with pytest.raises(CommandError, match="cannot read"):
        call_command("import_config", str(tmp_path / "missing.yaml"))


def test_a_file_that_is_not_yaml_is_one_problem(
    import_problems: Callable[..., list[str]],
) -> None:
    problems = import_problems("providers: [unclosed")

    assert len(problems) == 1
    assert problems[0].startswith("not valid YAML")


def test_the_command_prints_warnings_and_counts(
    small_config: Callable[[], dict[str, Any]], tmp_path: Path
) -> None:
    data = small_config()
    data["combos"][0]["config"] = {"tieBand": 0.1}
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(data))
    stdout = io.StringIO()

    call_command("import_config", str(path), stdout=stdout)

    lines = stdout.getvalue().splitlines()
    assert lines[0] == (
        "warning: combos[0].config.tieBand: "
        "not used by strategy 'priority'; kept and ignored"
    )
    assert "combos: 1 created" in lines
    assert lines[-1] == "configuration changed"


def test_a_combo_ref_cycle_inside_the_file_is_reported_on_the_closing_target(
    small_config: Callable[[], dict[str, Any]],
    import_problems: Callable[..., list[str]],
) -> None:
    data = small_config()
    data["combos"] = [
        {"name": "A", "targets": [{"model": "pa/m1"}, {"combo": "B"}]},
        {"name": "B", "targets": [{"combo": "A"}]},
    ]
    data["model_combo_mappings"] = []
    data["smart_routes"] = []

    problems = import_problems(data)

    assert problems == [
        "combos[0].targets[1].combo: cycle: A \u2192 B \u2192 A",
        "combos[1].targets[0].combo: cycle: B \u2192 A \u2192 B",
    ]
    assert Combo.objects.count() == 0


def test_a_chain_four_deep_inside_the_file_is_rejected(
    small_config: Callable[[], dict[str, Any]],
    import_problems: Callable[..., list[str]],
) -> None:
    data = small_config()
    data["combos"] = [
        {"name": "A", "targets": [{"combo": "B"}]},
        {"name": "B", "targets": [{"combo": "C"}]},
        {"name": "C", "targets": [{"combo": "D"}]},
        {"name": "D", "targets": [{"model": "pa/m1"}]},
    ]
    data["model_combo_mappings"] = []
    data["smart_routes"] = []

    problems = import_problems(data)

    assert problems[0] == (
        "combos[0].targets[0].combo: nesting deeper than 3: "
        "A \u2192 B \u2192 C \u2192 D"
    )


def test_combos_of_the_file_may_refer_to_each_other_in_any_order(
    small_config: Callable[[], dict[str, Any]], import_data: Callable[..., Any]
) -> None:
    data = small_config()
    data["combos"].insert(0, {"name": "outer", "targets": [{"combo": "team"}]})

    import_data(data)

    outer = Combo.objects.get(name="outer")
    assert outer.targets.get().ref == Combo.objects.get(name="team")


@pytest.mark.parametrize(
    ("section", "items", "expected"),
    [
        (
            "combos",
            [{"name": "x", "targets": [{"model": "pa/m1"}]}] * 2,
            "combos[1].name: duplicate of combos[0]",
        ),
        (
            "api_keys",
            [{"name": "ci"}, {"name": "ci"}],
            "api_keys[1].name: duplicate of api_keys[0]",
        ),
        (
            "providers",
            [{"slug": "Combo", "kind": "mock"}],
            "providers[0].slug: 'Combo' is reserved",
        ),
        ("combos", {"name": "x"}, "combos: must be a list"),
        ("combos", ["x"], "combos[0]: must be a mapping"),
    ],
)
def test_section_level_problems_name_the_item(
    import_problems: Callable[..., list[str]],
    section: str,
    items: Any,
    expected: str,
) -> None:
    data = {
        "providers": [{"slug": "pa", "kind": "mock", "models": [{"id": "m1"}]}],
        section: items,
    }

    assert import_problems(data) == [expected]


def test_a_file_that_is_not_a_mapping_is_one_problem(
    import_problems: Callable[..., list[str]],
) -> None:
    assert import_problems("- providers\n") == [
        "the file must be a mapping of sections"
    ]


def test_an_empty_file_changes_nothing(import_data: Callable[..., Any]) -> None:
    report = import_data("")

    assert report.changed is False
    assert config_version() == 0


def test_the_command_reads_standard_input_for_a_dash(
    small_config: Callable[[], dict[str, Any]], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("sys.stdin", io.StringIO(yaml.safe_dump(small_config())))
    stdout = io.StringIO()

    call_command("import_config", "-", stdout=stdout)

    assert stdout.getvalue().endswith("configuration changed\n")
    assert Combo.objects.get().name == "team"
