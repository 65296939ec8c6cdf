"""The shared validator: Checker paths, ConfigIndex resolution, and the provider,
connection and model rules of spec 07 (pure: no database)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from gateway.dialects import REGISTRY
from providers.validation import (
    ALL_WIRES,
    Checker,
    ConfigIndex,
    Problem,
    validate_connection,
    validate_model,
    validate_provider,
)

BAD_ENV = "env reference must look like env:NAME (at most 200 characters)"


@pytest.fixture
def check_provider() -> Callable[..., tuple[dict[str, Any], list[str]]]:
    """Validate a provider at ``providers[0]``; (normalised copy, problem lines)."""

    def run(**fields: Any) -> tuple[dict[str, Any], list[str]]:
        data = {"slug": "pa", "kind": "openai", "base_url": "http://x/v1", **fields}
        check = Checker("providers[0]")
        clean = validate_provider(data, check)
        return clean, [str(p) for p in check.problems]

    return run


@pytest.fixture
def index() -> ConfigIndex:
    """Providers ``pa`` (m1, Mixed), ``pb`` (m2, shared), ``pc`` (shared); combo
    ``Team``."""
    return ConfigIndex(
        providers={
            "pa": ("pa", {"main", "backup"}, {"m1", "Mixed"}),
            "pb": ("pb", {"main"}, {"m2", "shared"}),
            "pc": ("pc", {"main"}, {"shared", "dup", "DUP"}),
        },
        combos={"team": ("Team", "priority", [])},
    )


# ------------------------------------------------------------------ Checker


def test_checker_paths_join_names_and_indexes() -> None:
    check = Checker("combos[2]")

    check.error("targets[0].model", "bad")
    check.error("[1]", "bad")
    check.error("", "bad")

    assert [p.path for p in check.problems] == [
        "combos[2].targets[0].model",
        "combos[2][1]",
        "combos[2]",
    ]


def test_a_problem_without_a_path_prints_its_message_alone() -> None:
    assert str(Problem("", "the file must be a mapping")) == (
        "the file must be a mapping"
    )
    assert str(Problem("a.b", "bad")) == "a.b: bad"


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (True, "x: must be an integer"),
        ("5", "x: must be an integer"),
        (1.5, "x: must be an integer"),
        (0, "x: must be between 1 and 10"),
        (11, "x: must be between 1 and 10"),
    ],
)
def test_integers_reject_bools_strings_fractions_and_out_of_range(
    value: Any, expected: str
) -> None:
    check = Checker("")

    check.integer({"x": value}, "x", 1, 10)

    assert [str(p) for p in check.problems] == [expected]


def test_an_integral_float_counts_as_an_integer() -> None:
    check = Checker("")

    assert check.integer({"x": 5.0}, "x", 1, 10) == 5
    assert check.problems == []


@pytest.mark.parametrize("value", [float("nan"), float("inf"), True, "1"])
def test_numbers_reject_non_finite_bools_and_strings(value: Any) -> None:
    check = Checker("")

    check.number({"x": value}, "x", 0, 10)

    assert [str(p) for p in check.problems] == ["x: must be a number"]


# ------------------------------------------------------------------ ConfigIndex


@pytest.mark.parametrize(
    ("text", "resolved"),
    [
        ("team", "Team"),
        ("TEAM", "Team"),
        ("combo/team", "Team"),
        ("Combo/TEAM", "Team"),
        ("combo/nope", None),
        ("auto", "auto"),
        ("AUTO/Coding", "auto/coding"),
        ("auto/chat:floor", "auto/chat:cheap"),
        ("auto/sideways", None),
        ("pa/m1", "pa/m1"),
        ("PA/mixed", "pa/Mixed"),
        ("pa/m2", None),
        ("pc/dup", "pc/dup"),
        ("pc/Dup", None),
        ("m1", "pa/m1"),
        ("M2", "pb/m2"),
        ("shared", "*/shared"),
        ("nope", None),
        ("opena/m1", None),
    ],
)
def test_the_index_resolves_like_the_engine(
    index: ConfigIndex, text: str, resolved: str | None
) -> None:
    assert index.resolved_name(text) == resolved
    assert index.resolves(text) is (resolved is not None)


def test_the_owner_of_a_bare_id_is_the_first_provider_by_slug(
    index: ConfigIndex,
) -> None:
    assert index.bare_model_owner("SHARED") == ("pb", "shared")
    assert index.bare_model_owner("m9") is None


def test_a_model_exists_only_in_its_own_provider(index: ConfigIndex) -> None:
    assert index.model_exists("pa/m1") is True
    assert index.model_exists("PA/m1") is True
    assert index.model_exists("pb/m1") is False
    assert index.model_exists("m1") is False


# ------------------------------------------------------------------ providers


def test_a_valid_provider_is_normalised(check_provider: Callable[..., Any]) -> None:
    clean, problems = check_provider(
        connections=[{"name": "main", "api_key": "env:PA_KEY"}],
        models=[{"id": "m1", "capabilities": ["json", "tools"]}],
    )

    assert problems == []
    assert clean["slug"] == "pa"
    assert clean["connections"] == [
        {
            "name": "main",
            "tier": "standard",
            "default_model": "",
            "active": True,
            "priority": 0,
            "max_concurrency": 0,
            "api_key": "env:PA_KEY",
            "secrets": {},
            "credential_settings": {},
            "quota": None,
        }
    ]
    assert clean["models"][0]["capabilities"] == ["tools", "json"]


@pytest.mark.parametrize("slug", ["auto", "Auto", "COMBO", "combo"])
def test_reserved_provider_slugs_are_rejected_in_any_case(
    check_provider: Callable[..., Any], slug: str
) -> None:
    _clean, problems = check_provider(slug=slug)

    assert problems == [f"providers[0].slug: '{slug}' is reserved"]


@pytest.mark.parametrize("slug", ["-pa", "p/a", "p a", "", "x" * 65])
def test_a_provider_slug_outside_the_pattern_is_rejected(
    check_provider: Callable[..., Any], slug: str
) -> None:
    _clean, problems = check_provider(slug=slug)

    assert len(problems) == 1
    assert problems[0].startswith("providers[0].slug: ")


@pytest.mark.parametrize(
    ("fields", "expected"),
    [
        (
            {"kind": "nope"},
            f"providers[0].kind: must be one of: {', '.join(REGISTRY)}",
        ),
        ({"kind": None}, "providers[0].kind: is required"),
        ({"base_url": ""}, "providers[0].base_url: is required for this kind"),
        (
            {"base_url": "ftp://x"},
            "providers[0].base_url: must be an http or https URL",
        ),
        ({"base_url": "api.example.com"}, "providers[0].base_url: must be an http or"),
        (
            {"kind": "mock", "base_url": "file:///etc"},
            "providers[0].base_url: must be an http or https URL",
        ),
        ({"regio": "eu"}, "providers[0].regio: unknown key"),
        ({"connections": {"name": "main"}}, "providers[0].connections: must be a list"),
        ({"models": ["m1"]}, "providers[0].models[0]: must be a mapping"),
    ],
)
def test_a_bad_provider_field_is_rejected_naming_it(
    check_provider: Callable[..., Any], fields: dict[str, Any], expected: str
) -> None:
    _clean, problems = check_provider(**fields)

    assert len(problems) == 1
    assert problems[0].startswith(expected)


def test_a_mock_provider_needs_no_base_url(check_provider: Callable[..., Any]) -> None:
    _clean, problems = check_provider(kind="mock", base_url=None)

    assert problems == []


def test_two_connections_with_the_same_name_are_rejected(
    check_provider: Callable[..., Any],
) -> None:
    _clean, problems = check_provider(connections=[{"name": "main"}, {"name": "MAIN"}])

    assert problems == ["providers[0].connections[1].name: duplicate 'MAIN'"]


def test_two_models_with_the_same_id_are_rejected(
    check_provider: Callable[..., Any],
) -> None:
    _clean, problems = check_provider(models=[{"id": "m1"}, {"id": "m1"}])

    assert problems == ["providers[0].models[1].id: duplicate 'm1'"]


# ------------------------------------------------------------------ connections


@pytest.mark.parametrize(
    ("fields", "expected"),
    [
        ({"name": "a b"}, "name: 'a b' is not allowed here: use letters, digits"),
        ({"name": None}, "name: is required"),
        ({"tier": "gold"}, "tier: must be one of: free, standard, pro, ultra"),
        ({"api_key": 1234}, "api_key: must be a string (a literal or env:NAME)"),
        ({"api_key": "env:1BAD"}, f"api_key: {BAD_ENV}"),
        ({"api_key": "env:"}, f"api_key: {BAD_ENV}"),
        ({"api_key": "env:" + "A" * 197}, f"api_key: {BAD_ENV}"),
        ({"priority": 1_000_001}, "priority: must be between 0 and 1 000 000"),
        ({"max_concurrency": -1}, "max_concurrency: must be between 0 and 1 000 000"),
        ({"active": "true"}, "active: must be true or false"),
        ({"quota": 5}, "quota: must be a mapping"),
        (
            {"quota": {"remaining_percent": 101}},
            "quota.remaining_percent: must be between 0 and 100",
        ),
        (
            {"quota": {"reset_interval_seconds": 0}},
            "quota.reset_interval_seconds: must be between 1 and 31 536 000",
        ),
        ({"quota": {"left": 1}}, "quota.left: unknown key"),
        ({"token": "x"}, "token: unknown key"),
    ],
)
def test_a_bad_connection_field_is_rejected_naming_it(
    fields: dict[str, Any], expected: str
) -> None:
    check = Checker("")

    validate_connection({"name": "main", **fields}, check)

    assert len(check.problems) == 1
    assert str(check.problems[0]).startswith(expected)


def test_a_connection_quota_is_normalised() -> None:
    check = Checker("")

    clean = validate_connection(
        {"name": "main", "quota": {"remaining_percent": 40}, "tier": "pro"}, check
    )

    assert check.problems == []
    assert clean["quota"] == {"remaining_percent": 40.0, "reset_interval_seconds": None}
    assert clean["tier"] == "pro"


# ------------------------------------------------------------------ models


@pytest.mark.parametrize(
    ("fields", "expected"),
    [
        ({"id": None}, "id: is required"),
        ({"id": "bad model id!"}, "id: 'bad model id!' is not allowed here: use"),
        ({"id": "/m1"}, "id: '/m1' is not allowed here"),
        ({"input_cost": -0.01}, "input_cost: must be between 0 and 1 000 000"),
        ({"output_cost": "free"}, "output_cost: must be a number"),
        ({"cache_write_cost": -1}, "cache_write_cost: must be between 0 and 1 000 000"),
        ({"context_window": 0}, "context_window: must be between 1 and 100 000 000"),
        ({"max_output_tokens": 1.5}, "max_output_tokens: must be an integer"),
        ({"capabilities": ["audio"]}, "capabilities: must be a list of: tools, vision"),
        ({"capabilities": "tools"}, "capabilities: must be a list of"),
        ({"tier": "cheap"}, "tier: must be one of: budget, fast, standard, premium"),
        ({"price": 1}, "price: unknown key"),
    ],
)
def test_a_bad_model_field_is_rejected_naming_it(
    fields: dict[str, Any], expected: str
) -> None:
    check = Checker("")

    validate_model({"id": "m1", **fields}, check)

    assert len(check.problems) == 1
    assert str(check.problems[0]).startswith(expected)


def test_an_empty_capability_list_is_known_to_be_empty() -> None:
    check = Checker("")

    clean = validate_model({"id": "m1", "capabilities": []}, check)

    assert (clean["capabilities"], clean["tier"]) == ([], "")


def test_an_integral_float_is_stored_as_the_integer_it_is() -> None:
    data = {"maxAttempts": 2.0}
    assert Checker("").integer(data, "maxAttempts", 1, 10) == 2
    assert type(data["maxAttempts"]) is int  # what is saved is 2, not 2.0


# --- wire (spec 10 §5) ---------------------------------------------------------------


def test_the_wire_defaults_to_chat_and_openai_may_speak_responses(check_provider):
    clean, problems = check_provider()
    assert (clean["wire"], problems) == ("chat", [])
    clean, problems = check_provider(
        wire="responses", models=[{"id": "m", "wire": "chat"}]
    )
    assert problems == []
    assert clean["wire"] == "responses"
    assert clean["models"][0]["wire"] == "chat"


def test_a_wire_the_kind_does_not_speak_is_named(check_provider):
    _, problems = check_provider(kind="anthropic", wire="responses")
    assert problems == ["providers[0].wire: must be one of: chat"]
    _, problems = check_provider(
        kind="anthropic", models=[{"id": "m", "wire": "responses"}]
    )
    assert problems == [
        "providers[0].models[0].wire: must be one of: chat (kind 'anthropic')"
    ]
    _, problems = check_provider(models=[{"id": "m", "wire": "grpc"}])
    assert problems == [
        f"providers[0].models[0].wire: must be one of: {', '.join(ALL_WIRES)}"
    ]


# --- presets and outbound settings (spec 10 §2, §4, §5) -------------------------------


def test_a_preset_fills_kind_base_url_and_the_catalog_id():
    check = Checker("providers[0]")
    clean = validate_provider({"slug": "g", "preset": "groq"}, check)
    assert check.problems == []
    assert (clean["kind"], clean["base_url"], clean["preset"]) == (
        "openai",
        "https://api.groq.com/openai/v1",
        "groq",
    )
    assert clean["settings"] == {"models_dev_id": "groq"}


def test_what_is_given_overrides_the_preset():
    check = Checker("")
    clean = validate_provider(
        {
            "slug": "g",
            "preset": "openai",
            "base_url": "http://127.0.0.1:9/v1",
            "models_dev_id": "azure",
        },
        check,
    )
    assert check.problems == []
    assert clean["base_url"] == "http://127.0.0.1:9/v1"
    assert clean["settings"]["models_dev_id"] == "azure"


@pytest.mark.parametrize(
    ("data", "problem"),
    [
        ({"preset": "nope"}, "preset: must be one of:"),
        ({"preset": "vllm"}, "base_url: is required for this kind"),
        (
            {"kind": "openai", "base_url": "http://x/v1", "proxy_url": "socks://p"},
            "proxy_url:",
        ),
        (
            {"kind": "openai", "base_url": "http://x/v1", "proxy_url": "http://p"},
            "proxy_url:",
        ),
        (  # TLS to the proxy is not built: refused, never bypassed
            {
                "kind": "openai",
                "base_url": "http://x/v1",
                "proxy_url": "https://u:p@proxy.local:3128",
            },
            "proxy_url: must be none or http://",
        ),
        (
            {
                "kind": "openai",
                "base_url": "http://x/v1",
                "proxy_url": "http://proxy.local:3128/path",
            },
            "proxy_url:",
        ),
        (
            {
                "kind": "openai",
                "base_url": "http://x/v1",
                "ca_bundle": "/nonexistent.pem",
            },
            "ca_bundle: cannot read /nonexistent.pem",
        ),
        (
            {"kind": "openai", "base_url": "http://x/v1", "headers": {"X Bad": "v"}},
            "headers: 'X Bad' is not a header name",
        ),
        (
            {"kind": "openai", "base_url": "http://x/v1", "headers": {"X-T": "a\nb"}},
            "headers.X-T: must be a one-line string",
        ),
    ],
)
def test_bad_presets_and_outbound_settings_are_named(data, problem):
    check = Checker("")
    validate_provider({"slug": "p", **data}, check)
    assert any(str(p).startswith(problem) for p in check.problems), check.problems


def test_good_outbound_settings_pass(tmp_path):
    pem = tmp_path / "ca.pem"
    pem.write_text("-----BEGIN CERTIFICATE-----\n")
    check = Checker("")
    clean = validate_provider(
        {
            "slug": "p",
            "kind": "openai",
            "base_url": "https://x/v1",
            "proxy_url": "http://user:pass@proxy.local:3128",
            "ca_bundle": str(pem),
            "headers": {"HTTP-Referer": "https://me.example", "X-Title": "Me"},
        },
        check,
    )
    assert check.problems == []
    assert clean["proxy_url"] == "http://user:pass@proxy.local:3128"
    assert clean["settings"]["ca_bundle"] == str(pem)
    assert (
        validate_provider(
            {
                "slug": "p",
                "kind": "openai",
                "base_url": "https://x/v1",
                "proxy_url": "none",
            },
            Checker(""),
        )["proxy_url"]
        == "none"
    )


@pytest.mark.parametrize(
    "model_id",
    [
        "gpt-5-nano",
        "meta-llama/Llama-3-8b",
        "claude-sonnet-4@20250514",
        "us.anthropic.claude-3-5-sonnet-20240620-v1:0",
        "openai/gpt-4o:free",
        "~anthropic/claude-latest",
        "Qwen2.5+vision",
    ],
)
def test_model_ids_upstreams_use_are_accepted(model_id: str) -> None:
    check = Checker("")
    validate_model({"id": model_id}, check)
    assert check.problems == []


@pytest.mark.parametrize(("priority", "ok"), [(-1, False), (0, True), (10**6, True)])
def test_a_connection_priority_is_from_0(priority: int, ok: bool) -> None:
    check = Checker("")
    validate_connection({"name": "main", "priority": priority}, check)
    assert (check.problems == []) is ok
