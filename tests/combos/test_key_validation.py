"""API keys and their ``failover_defaults`` (spec 02 §13, 07, 08 §5.1)."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

import pytest

from combos import services
from combos.models import ApiKey, Combo
from providers.models import Provider
from providers.services import config_version

pytestmark = pytest.mark.django_db

Problems = Callable[..., list[str]]
GENERATED_KEY = re.compile(r"^sk-or-[A-Za-z0-9_-]{43}$")


def key(name: str = "ci", **fields: Any) -> dict[str, Any]:
    return {"name": name, **fields}


def defaults(**fields: Any) -> dict[str, Any]:
    return key(failover_defaults=fields)


# ------------------------------------------------------------------ storage


def test_a_new_key_is_generated_and_returned_once(world: dict[str, Provider]) -> None:
    result = services.save_api_key(key())

    plaintext = result.plaintext_key
    assert plaintext is not None
    assert GENERATED_KEY.fullmatch(plaintext)
    stored = ApiKey.objects.get()
    assert stored.key_hash == hashlib.sha256(plaintext.encode()).hexdigest()
    assert stored.prefix == plaintext[:12]
    assert len(stored.prefix) == 12


def test_two_generated_keys_differ(world: dict[str, Provider]) -> None:
    first = services.save_api_key(key("a")).plaintext_key
    second = services.save_api_key(key("b")).plaintext_key

    assert first != second


def test_updating_a_key_keeps_its_hash_and_returns_no_plaintext(
    world: dict[str, Provider], make_api_key: Callable[..., Any]
) -> None:
    stored, _plaintext = make_api_key("ci")
    digest = stored.key_hash

    result = services.save_api_key(key("ci", rpm=60), stored)

    assert result.plaintext_key is None
    stored.refresh_from_db()
    assert (stored.key_hash, stored.rpm) == (digest, 60)


def test_a_literal_key_is_hashed(world: dict[str, Provider]) -> None:
    literal = "sk-or-literal-0000000000000000"

    result = services.save_api_key(key(key=literal))

    stored = ApiKey.objects.get()
    assert result.plaintext_key is None
    assert stored.key_hash == hashlib.sha256(literal.encode()).hexdigest()
    assert stored.prefix == "sk-or-litera"


def test_a_short_literal_key_is_accepted_and_hashed(world: dict[str, Provider]) -> None:
    services.save_api_key(key(key="sk-test"))
    stored = ApiKey.objects.get()
    assert stored.key_hash == hashlib.sha256(b"sk-test").hexdigest()


@pytest.mark.parametrize("bad", ["", "has space", "x" * 201, "tab\there", "é-key"])
def test_a_key_that_cannot_travel_in_a_header_is_rejected(
    world: dict[str, Provider], key_problems: Problems, bad: str
) -> None:
    assert key_problems(key(key=bad)) == [
        "key: must be 1..200 visible ASCII characters"
    ]


def test_an_env_reference_is_read_when_the_key_is_stored(
    world: dict[str, Provider],
    key_problems: Problems,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("OMNIROUTE_TEST_CI_KEY", raising=False)
    assert key_problems(key(key="env:OMNIROUTE_TEST_CI_KEY")) == [
        "key: environment variable 'OMNIROUTE_TEST_CI_KEY' is not set"
    ]
    monkeypatch.setenv("OMNIROUTE_TEST_CI_KEY", "sk-or-from-the-environment")
    services.save_api_key(key(key="env:OMNIROUTE_TEST_CI_KEY"))
    stored = ApiKey.objects.get()
    digest = hashlib.sha256(b"sk-or-from-the-environment").hexdigest()
    assert stored.key_hash == digest


def test_key_names_are_unique(
    world: dict[str, Provider], make_api_key: Callable[..., Any], key_problems: Problems
) -> None:
    make_api_key("ci")

    assert key_problems(key("ci")) == ["name: an API key named 'ci' already exists"]


def test_every_field_of_a_key_is_stored_normalised(world: dict[str, Provider]) -> None:
    services.save_api_key(
        key(
            active=False,
            expires_at="2027-01-01T00:00:00Z",
            allowed_models=["pa/*", "team"],
            rpm=600,
            tpm=200_000,
            budget_usd=12.5,
            budget_period="week",
        )
    )

    stored = ApiKey.objects.get()
    assert (stored.active, stored.rpm, stored.tpm, stored.budget_period) == (
        False,
        600,
        200_000,
        "week",
    )
    assert stored.expires_at == datetime(2027, 1, 1, tzinfo=UTC)
    assert stored.allowed_models == ["pa/*", "team"]
    assert stored.budget_usd == Decimal("12.5000")


@pytest.mark.parametrize(
    ("fields", "expected"),
    [
        ({"expires_at": "next year"}, "expires_at: must be an ISO 8601 date-time"),
        ({"rpm": 0}, "rpm: must be between 1 and 10 000 000"),
        ({"tpm": -5}, "tpm: must be between 1 and 2 147 483 647"),
        ({"budget_usd": -1}, "budget_usd: must be between 0 and 1 000 000 000"),
        ({"budget_period": "year"}, "budget_period: must be one of: day, week, month"),
        (
            {"allowed_models": "pa/*"},
            "allowed_models: must be a list of non-empty strings",
        ),
        ({"active": "yes"}, "active: must be true or false"),
        ({"owner": "me"}, "owner: unknown key"),
    ],
)
def test_a_bad_key_field_is_rejected_naming_it(
    world: dict[str, Provider],
    key_problems: Problems,
    fields: dict[str, Any],
    expected: str,
) -> None:
    assert key_problems(key(**fields)) == [expected]
    assert ApiKey.objects.count() == 0


def test_saving_a_key_bumps_the_config_revision(world: dict[str, Provider]) -> None:
    before = config_version()

    services.save_api_key(key())

    assert config_version() == before + 1


# ------------------------------------------------------------------ failover_defaults


def test_failover_defaults_are_stored_normalised(world: dict[str, Provider]) -> None:
    services.save_api_key(
        defaults(
            models=["pa/m1", "pb/m2"],
            timeout_ms=30_000,
            first_token_timeout_ms=5_000,
            on=["timeout", "server_error", "timeout", "connection_error"],
        )
    )

    assert ApiKey.objects.get().failover_defaults == {
        "models": ["pa/m1", "pb/m2"],
        "timeout_ms": 30_000,
        "first_token_timeout_ms": 5_000,
        "on": ["connection_error", "server_error", "timeout"],
    }


def test_unset_failover_options_are_absent_from_the_stored_object(
    world: dict[str, Provider],
) -> None:
    services.save_api_key(defaults(models=["pa/m1"]))

    assert ApiKey.objects.get().failover_defaults == {"models": ["pa/m1"]}


def test_clearing_failover_defaults_removes_them(
    world: dict[str, Provider], make_api_key: Callable[..., Any]
) -> None:
    stored, _ = make_api_key("ci", failover_defaults={"models": ["pa/m1"]})

    services.save_api_key(key("ci", failover_defaults={}), stored)

    stored.refresh_from_db()
    assert stored.failover_defaults is None


@pytest.mark.parametrize(
    ("fields", "expected"),
    [
        ({"timeout_ms": 30_000}, "failover_defaults.models: is required"),
        ({"models": []}, "failover_defaults.models: is required"),
        (
            {"models": ["pa/m1", "pb/m2", "pc/m3", "m1"]},
            "failover_defaults.models: is required: a list of 1..3 model strings",
        ),
        ({"models": "pa/m1"}, "failover_defaults.models: is required"),
        (
            {"models": ["pa/m1", "opena/x"]},
            "failover_defaults.models[1]: unknown model 'opena/x'",
        ),
        ({"models": ["pa/m1", ""]}, "failover_defaults.models[1]: must be a non-empty"),
        ({"models": ["auto/sideways"]}, "failover_defaults.models[0]: unknown model"),
        (
            {"models": ["pa/m1"], "timeout_ms": 999},
            "failover_defaults.timeout_ms: must be between 1 000 and 300 000",
        ),
        (
            {"models": ["pa/m1"], "timeout_ms": 300_001},
            "failover_defaults.timeout_ms: must be between 1 000 and 300 000",
        ),
        (
            {"models": ["pa/m1"], "first_token_timeout_ms": 499},
            "failover_defaults.first_token_timeout_ms: must be between 500 and 60 000",
        ),
        (
            {"models": ["pa/m1"], "first_token_timeout_ms": 60_001},
            "failover_defaults.first_token_timeout_ms: must be between 500 and 60 000",
        ),
        ({"models": ["pa/m1"], "on": ["http_500"]}, "failover_defaults.on: must be"),
        ({"models": ["pa/m1"], "on": "timeout"}, "failover_defaults.on: must be"),
        ({"models": ["pa/m1"], "retries": 2}, "failover_defaults.retries: unknown key"),
    ],
)
def test_bad_failover_defaults_are_rejected_naming_the_field(
    world: dict[str, Provider],
    key_problems: Problems,
    fields: dict[str, Any],
    expected: str,
) -> None:
    problems = key_problems(defaults(**fields))

    assert len(problems) == 1
    assert problems[0].startswith(expected)
    assert ApiKey.objects.count() == 0


def test_failover_defaults_that_are_not_a_mapping_are_rejected(
    world: dict[str, Provider], key_problems: Problems
) -> None:
    assert key_problems(key(failover_defaults=["pa/m1"])) == [
        "failover_defaults: must be a mapping"
    ]


@pytest.mark.parametrize(
    "models",
    [
        ["pa/m1", "pa/m1"],
        ["pa/m1", "m1"],
        ["m1", "PA/M1"],
        ["team", "combo/TEAM"],
        ["auto/chat:floor", "auto/chat:cheap"],
        ["AUTO/Coding", "auto/coding"],
    ],
)
def test_failover_models_with_the_same_identity_are_rejected(
    world: dict[str, Provider],
    make_combo: Callable[..., Combo],
    key_problems: Problems,
    models: list[str],
) -> None:
    make_combo("team")

    problems = key_problems(defaults(models=models))

    assert problems == [
        f"failover_defaults.models[1]: duplicate of an earlier entry ('{models[1]}')"
    ]


@pytest.mark.parametrize(
    "models",
    [
        ["pa/m1", "pb/m2", "pc/m3"],
        ["team", "auto", "auto/coding"],
        ["m1", "combo/team", "auto/chat:cheap"],
        ["groq/fast", "auto/fast"],
    ],
)
def test_failover_models_with_distinct_identities_are_accepted(
    world: dict[str, Provider],
    make_provider: Callable[..., Provider],
    make_combo: Callable[..., Combo],
    key_problems: Problems,
    models: list[str],
) -> None:
    make_provider("groq", models=("fast",))
    make_combo("team")

    assert key_problems(defaults(models=models)) == []


def test_a_bare_id_served_by_two_providers_is_its_own_identity(
    make_provider: Callable[..., Provider], key_problems: Problems
) -> None:
    make_provider("pa", models=("shared",))
    make_provider("pb", models=("shared",))

    assert key_problems(defaults(models=["shared", "pa/shared"])) == []


def test_failover_models_must_be_permitted_by_allowed_models(
    world: dict[str, Provider], key_problems: Problems
) -> None:
    problems = key_problems(
        key(allowed_models=["pa/*"], failover_defaults={"models": ["pa/m1", "pb/m2"]})
    )

    assert problems == [
        "failover_defaults.models[1]: 'pb/m2' is not permitted by allowed_models"
    ]


@pytest.mark.parametrize(
    ("allowed", "model"),
    [
        (["pa/*"], "m1"),
        (["PA/M1"], "pa/m1"),
        (["team"], "combo/team"),
        (["auto*"], "AUTO/Coding"),
        (["auto/coding"], "auto/CODING"),
    ],
)
def test_a_failover_model_is_permitted_by_its_form_as_sent_or_resolved(
    world: dict[str, Provider],
    make_combo: Callable[..., Combo],
    key_problems: Problems,
    allowed: list[str],
    model: str,
) -> None:
    make_combo("team")

    problems = key_problems(
        key(allowed_models=allowed, failover_defaults={"models": [model]})
    )

    assert problems == []


@pytest.mark.parametrize(
    ("threshold", "ok"), [(0, False), (1, True), (22, True), (23, False), (5000, False)]
)
def test_a_smart_route_threshold_is_1_to_the_highest_score(
    world: dict[str, Provider], threshold: int, ok: bool
) -> None:
    """Spec 05 §2.2: scores reach 22, so a higher threshold is never met."""
    check = services.Checker("")
    services.validate_smart_route(
        {"alias": "smart", "easy": "pa/m1", "hard": "pb/m2", "threshold": threshold},
        check,
        services.build_index(),
    )
    assert (check.problems == []) is ok
