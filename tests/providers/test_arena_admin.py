"""Admin for Arena scores and aliases (spec 06 §3.3): unmatched names are listed so
that staff can add aliases, from a link that pre-fills the alias form."""

from __future__ import annotations

import io
from datetime import timedelta

import pytest
from django.contrib.auth.models import User
from django.core.management import call_command
from django.test import Client
from django.utils import timezone

from providers.admin_arena import alias_add_url
from providers.models import ArenaAlias, ArenaScore
from tests.providers.conftest import MODELS_DEV_FIXTURE
from tests.providers.test_arena import ARENA_FIXTURE

pytestmark = pytest.mark.django_db
SCORES_URL = "/admin/providers/arenascore/"
ALIASES_URL = "/admin/providers/arenaalias/"
UNMATCHED = {
    "claude-opus-4-7",
    "gemini-3.1-pro-preview",
    "kimi-k2.6",
    "claude-sonnet-4-5-20250929-high-32k",
}


@pytest.fixture(autouse=True)
def synced(settings) -> None:
    settings.OMNIROUTE_MODELS_DEV_MIN_PROVIDERS = 1
    settings.OMNIROUTE_ARENA_MIN_MODELS = 1
    for command, fixture in (
        ("sync_models_dev", MODELS_DEV_FIXTURE),
        ("sync_arena_elo", ARENA_FIXTURE),
    ):
        call_command(
            command, "--source", str(fixture), "--no-progress", stdout=io.StringIO()
        )


@pytest.fixture
def superuser() -> Client:
    client = Client()
    client.force_login(User.objects.create_superuser("root", password="pw"))
    return client


def listed_names(client: Client, query: str) -> set[str]:
    response = client.get(f"{SCORES_URL}?{query}")
    assert response.status_code == 200
    return {row.model_name for row in response.context["cl"].result_list}


def test_the_unmatched_filter_lists_the_names_without_a_model(
    superuser: Client,
) -> None:
    assert listed_names(superuser, "match=unmatched") == UNMATCHED
    assert listed_names(superuser, "match=matched") == {
        "claude-sonnet-4-5-20250929",
        "claude-haiku-4-5-20251001",
        "gpt-4o-mini-2024-07-18",
        "gemini-2.5-pro",
        "gpt-5-high",
        "gemini-2.0-flash-001",
        "deepseek-v3.2-thinking",
    }


def test_an_ignored_name_leaves_the_unmatched_list(superuser: Client) -> None:
    ArenaAlias.objects.create(arena_name="kimi-k2.6", model_id="ignore")

    assert listed_names(superuser, "match=unmatched") == UNMATCHED - {"kimi-k2.6"}
    assert listed_names(superuser, "match=ignored") == {"kimi-k2.6"}


def test_an_unmatched_row_links_to_the_prefilled_alias_form(
    superuser: Client,
) -> None:
    link = alias_add_url("claude-sonnet-4-5-20250929-high-32k")

    page = superuser.get(f"{SCORES_URL}?match=unmatched").content.decode()
    form = superuser.get(link)

    assert link == (
        "/admin/providers/arenaalias/add/"
        "?arena_name=claude-sonnet-4-5-20250929-high-32k"
    )
    assert f'href="{link.replace("&", "&amp;")}"' in page
    assert form.status_code == 200
    assert (
        form.context["adminform"].form.initial["arena_name"]
        == "claude-sonnet-4-5-20250929-high-32k"
    )


def test_saving_an_alias_matches_the_stored_rows_at_once(superuser: Client) -> None:
    response = superuser.post(
        f"{ALIASES_URL}add/",
        {
            "arena_name": "claude-sonnet-4-5-20250929-high-32k",
            "model_id": "claude-sonnet-4-5",
        },
    )

    assert response.status_code == 302
    rows = ArenaScore.objects.filter(model_name="claude-sonnet-4-5-20250929-high-32k")
    assert {row.matched_model for row in rows} == {"claude-sonnet-4-5"}


def test_deleting_an_alias_unmatches_its_rows(superuser: Client) -> None:
    alias = ArenaAlias.objects.get(arena_name="gpt-5-high")

    response = superuser.post(f"{ALIASES_URL}{alias.pk}/delete/", {"post": "yes"})

    assert response.status_code == 302
    rows = ArenaScore.objects.filter(model_name="gpt-5-high")
    assert {row.matched_model for row in rows} == {None}


def test_an_alias_to_an_unknown_model_is_refused(superuser: Client) -> None:
    response = superuser.post(
        f"{ALIASES_URL}add/", {"arena_name": "kimi-k2.6", "model_id": "kimi-k2"}
    )

    assert response.status_code == 200
    assert "No catalog or configured model has this id" in response.content.decode()
    assert not ArenaAlias.objects.filter(arena_name="kimi-k2.6").exists()


def test_ignore_is_accepted_in_any_case(superuser: Client) -> None:
    superuser.post(
        f"{ALIASES_URL}add/", {"arena_name": "kimi-k2.6", "model_id": " Ignore "}
    )

    assert ArenaAlias.objects.get(arena_name="kimi-k2.6").model_id == "ignore"


def test_the_aliases_are_seeded_by_the_data_migration() -> None:
    assert dict(ArenaAlias.objects.values_list("arena_name", "model_id")) == {
        "gpt-5-high": "gpt-5",
        "gemini-2.0-flash-001": "gemini-2.0-flash",
        "deepseek-v3.2-thinking": "deepseek-reasoner",
    }


def test_scores_are_read_only(superuser: Client) -> None:
    row = ArenaScore.objects.first()
    assert row is not None

    assert superuser.get(f"{SCORES_URL}add/").status_code == 403
    page = superuser.get(f"{SCORES_URL}{row.pk}/change/")
    assert page.status_code == 200
    assert page.context["has_change_permission"] is False


def test_rematch_skips_expired_rows() -> None:
    from providers.arena_names import rematch

    expired = ArenaScore.objects.filter(model_name="kimi-k2.6")
    expired.update(expires_at=timezone.now() - timedelta(seconds=1))
    ArenaAlias.objects.create(arena_name="kimi-k2.6", model_id="gpt-5")

    assert rematch() == 0
    assert {row.matched_model for row in expired} == {None}
