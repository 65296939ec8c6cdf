"""A ``vertex`` provider in configuration (spec 10 §2, §3, §5): the preset, the
credential fields checked at save naming the field, references kept, and the
snapshot resolving a connection's endpoint and publisher."""

from __future__ import annotations

import json

import pytest

from combos.admin_forms import format_targets, parse_target_line, split_target
from providers.validation import Checker, validate_provider

SA = json.dumps(
    {
        "type": "service_account",
        "client_email": "a@p.iam.gserviceaccount.com",
        # a placeholder, not a key: only its PEM framing is checked at save
        "private_key": "-----BEGIN " + "PRIVATE KEY-----\nAAAA\n-----END",
        "token_uri": "https://oauth2.googleapis.com/token",
    }
)


def check(**fields: object) -> tuple[dict, list[str]]:
    data = {"slug": "vx", "preset": "vertex", **fields}
    checker = Checker("providers[0]")
    clean = validate_provider(data, checker)
    return clean, [str(p) for p in checker.problems]


def test_the_vertex_preset_is_a_kind_now() -> None:
    clean, problems = check(
        project="my-proj",
        region="us-central1",
        connections=[{"name": "main", "service_account_json": SA}],
        models=[{"id": "gemini-2.5-flash"}, {"id": "claude-sonnet-4@20250514"}],
    )
    assert problems == []
    assert clean["kind"] == "vertex"
    assert clean["base_url"] == ""
    assert clean["settings"]["models_dev_id"] == "google-vertex"
    assert clean["settings"]["region"] == "us-central1"
    connection = clean["connections"][0]
    assert connection["secrets"] == {"service_account_json": SA}


def test_a_connection_may_name_its_own_region_and_a_reference() -> None:
    _, problems = check(
        project="my-proj",
        connections=[
            {"name": "a", "service_account_json": "env:VX_SA", "region": "global"},
            {"name": "b", "use_default_credentials": True, "region": "europe-west4"},
        ],
    )
    assert problems == []


@pytest.mark.parametrize(
    ("connection", "problem"),
    [
        (
            {"name": "m", "service_account_json": "{bad"},
            "providers[0].connections[0].service_account_json: is not valid JSON",
        ),
        (
            {"name": "m", "use_default_credentials": "yes"},
            "providers[0].connections[0].use_default_credentials: must be true",
        ),
        (
            {"name": "m", "service_account_json": SA, "api_key": "k"},
            "providers[0].connections[0].api_key: not a credential of kind 'vertex'",
        ),
        (
            {"name": "m", "service_account_json": SA, "region": "x.evil"},
            "providers[0].connections[0].region: must be a region name",
        ),
    ],
)
def test_an_unusable_credential_is_refused_naming_the_field(
    connection: dict, problem: str
) -> None:
    _, problems = check(project="my-proj", region="us-east5", connections=[connection])
    assert any(p.startswith(problem) for p in problems), problems


def test_a_missing_project_and_region_are_named() -> None:
    _, problems = check(connections=[{"name": "m", "service_account_json": SA}])
    assert problems == [
        "providers[0].connections[0].project: is required for kind 'vertex'",
        "providers[0].connections[0].region: is required for kind 'vertex'",
    ]


def test_a_model_may_pick_its_publisher_by_wire() -> None:
    _, problems = check(
        project="my-proj",
        region="us-east5",
        models=[
            {"id": "my-tuned-claude", "wire": "messages"},
            {"id": "g", "wire": "responses"},
        ],
    )
    assert problems == [
        "providers[0].models[1].wire: must be one of: chat, messages (kind 'vertex')"
    ]


# --- a model id holding "@" in a combo's target lines (the admin) -------------------


def connections(slug: str) -> set[str]:
    return {"vx": {"main", "backup"}}.get(slug, set())


@pytest.mark.parametrize(
    ("head", "expected"),
    [
        ("vx/claude-sonnet-4@20250514", ("vx/claude-sonnet-4@20250514", None)),
        ("vx/claude-sonnet-4@20250514@main", ("vx/claude-sonnet-4@20250514", "main")),
        ("vx/claude-sonnet-4@20250514@*", ("vx/claude-sonnet-4@20250514", None)),
        ("vx/gemini-2.5-flash@backup", ("vx/gemini-2.5-flash", "backup")),
        ("vx/gemini-2.5-flash", ("vx/gemini-2.5-flash", None)),
    ],
)
def test_the_connection_is_the_text_after_the_last_at_when_it_names_one(
    head: str, expected: tuple[str, str | None]
) -> None:
    assert split_target(head, connections) == expected


def test_a_target_line_with_an_at_in_the_model_reads_back_whole() -> None:
    targets = [
        {"model": "vx/claude-sonnet-4@20250514"},
        {"model": "vx/g", "connection": "main"},
    ]
    text = format_targets(targets)
    assert text == "vx/claude-sonnet-4@20250514@*\nvx/g@main"
    assert [
        parse_target_line(line, connections) for line in text.splitlines()
    ] == targets


# --- the admin ------------------------------------------------------------------------


@pytest.mark.django_db
def test_the_admin_names_a_malformed_key_and_stores_a_good_one_encrypted() -> None:
    from django.contrib.auth.models import User
    from django.test import Client

    from providers.models import Connection, Provider

    provider = Provider.objects.create(
        slug="vx", kind="vertex", settings={"project": "my-proj", "region": "us-east5"}
    )
    client = Client()
    client.force_login(User.objects.create_superuser("root", "r@example.com", "pw"))
    form = {
        "provider": provider.pk,
        "name": "main",
        "tier": "standard",
        "active": "on",
        "priority": 0,
        "max_concurrency": 0,
    }

    bad = client.post(
        "/admin/providers/connection/add/",
        {**form, "service_account_json": "{not json"},
    )
    good = client.post(
        "/admin/providers/connection/add/", {**form, "service_account_json": SA}
    )

    assert bad.status_code == 200
    assert "is not valid JSON" in bad.content.decode()
    assert good.status_code == 302
    stored = Connection.objects.get(provider=provider, name="main")
    assert stored.secret_names() == ["service_account_json"]
    assert "client_email" not in stored.secrets_encrypted
    assert stored.stored_secrets() == {"service_account_json": SA}


@pytest.mark.django_db
def test_the_snapshot_reads_a_file_reference_and_names_the_regional_host(
    tmp_path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from gateway.config.snapshot import _auth
    from providers.models import Connection, Provider

    key_file = tmp_path / "sa.json"
    key_file.write_text(SA)
    monkeypatch.delenv("VX_SA", raising=False)
    monkeypatch.setenv("VX_SA_FILE", str(key_file))
    provider = Provider.objects.create(
        slug="vx", kind="vertex", settings={"project": "my-proj", "region": "us-east5"}
    )
    connection = Connection(provider=provider, name="eu", settings={"region": "global"})
    connection.set_secrets({"service_account_json": "env:VX_SA"})
    connection.save()

    auth, base_url = _auth(provider, connection)

    assert auth is not None
    assert auth.secrets["service_account_json"] == SA
    assert dict(auth.settings) == {"project": "my-proj", "region": "global"}
    assert base_url == "https://aiplatform.googleapis.com"
    assert "VX_SA" not in connection.secrets_encrypted
