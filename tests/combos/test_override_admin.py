"""The candidate override editor (spec 04 §2.3 F4, 07 ``candidate_overrides``): a
channel select, the catalog's candidate keys as checkboxes plus an "Other keys" box,
and the overrides of a key listed on its page."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import pytest
from django.test import Client
from django.urls import reverse

from combos import services
from combos.admin_forms import OverrideForm, channel_choices
from combos.key_validation import validate_override
from combos.models import ApiKey, CandidateOverride
from providers.models import Connection, Provider
from providers.services import config_version
from providers.validation import Checker, ConfigIndex

pytestmark = pytest.mark.django_db

ADD_URL = "admin:combos_candidateoverride_add"


@pytest.fixture
def ci_key(
    world: dict[str, Provider], make_api_key: Callable[..., tuple[ApiKey, Any]]
) -> ApiKey:
    return make_api_key("ci")[0]


def override_form(key: ApiKey, **fields: Any) -> dict[str, Any]:
    return {
        "api_key": str(key.pk),
        "channel": "coding",
        "exclude_keys": [],
        "exclude_other": "",
        **fields,
    }


def change_url(override: CandidateOverride) -> str:
    return reverse("admin:combos_candidateoverride_change", args=[override.pk])


def offered_values(choices: list[tuple[str, Any]]) -> list[str]:
    values: list[str] = []
    for value, label in choices:
        if isinstance(label, list):
            values.extend(v for v, _ in label)
        else:
            values.append(value)
    return values


# ------------------------------------------------------------------ choices


def test_the_channel_select_offers_auto_and_every_canonical_suffix() -> None:
    tiers = ("fast", "cheap", "reliable", "free", "pro")
    categories = ("coding", "reasoning", "vision", "chat", "multimodal")

    assert offered_values(channel_choices()) == [
        "auto",
        *("coding", "fast", "cheap", "offline", "smart", "lkgp", "chaos"),
        *("reasoning", "vision", "chat", "multimodal"),
        *(f"{c}:{t}" for c in categories for t in tiers),
    ]


def test_every_offered_channel_passes_the_validator() -> None:
    index = ConfigIndex(api_keys={"ci"})
    for channel in offered_values(channel_choices()):
        check = Checker("")
        validate_override({"api_key": "ci", "channel": channel}, check, index)
        assert check.problems == [], channel


def test_the_candidate_keys_are_active_connections_times_the_catalog(
    world: dict[str, Provider],
) -> None:
    Connection.objects.filter(provider__slug="pb").update(default_model="m9")
    Connection.objects.filter(provider__slug="pc").update(default_model="m3")
    Connection.objects.filter(name="backup").update(active=False)

    assert services.candidate_keys() == {
        "pa": ["pa/m1@main"],
        "pb": ["pb/m2@main", "pb/m9@main"],
        "pc": ["pc/m3@main"],
    }


def test_candidate_keys_follow_connection_priority_then_catalog_order(
    make_provider: Callable[..., Provider],
) -> None:
    make_provider("pz", connections=("first", "second"), models=("b", "a"))
    Connection.objects.filter(name="second").update(priority=-1)

    assert services.candidate_keys() == {
        "pz": ["pz/b@second", "pz/a@second", "pz/b@first", "pz/a@first"]
    }


def test_the_checkboxes_are_grouped_by_provider(ci_key: ApiKey) -> None:
    form = OverrideForm()

    assert form.fields["exclude_keys"].choices == [
        ("pa", [("pa/m1@main", "pa/m1@main"), ("pa/m1@backup", "pa/m1@backup")]),
        ("pb", [("pb/m2@main", "pb/m2@main")]),
        ("pc", [("pc/m3@main", "pc/m3@main")]),
    ]


# ------------------------------------------------------------------ saving


def test_creating_an_override_stores_the_checked_and_the_typed_keys(
    ci_key: ApiKey, superuser_client: Client
) -> None:
    before = config_version()

    response = superuser_client.post(
        reverse(ADD_URL),
        override_form(
            ci_key,
            exclude_keys=["pa/m1@backup", "pb/m2@main"],
            exclude_other="openai/gpt-5-nano@main\n\n  pb/m2@main  \n",
        ),
    )

    assert response.status_code == 302, response.context["adminform"].form.errors
    override = CandidateOverride.objects.get()
    assert (override.api_key, override.channel) == (ci_key, "coding")
    assert override.exclude == [
        "pa/m1@backup",
        "pb/m2@main",
        "openai/gpt-5-nano@main",
    ]
    assert config_version() == before + 1


def test_editing_shows_listed_keys_checked_and_the_others_in_the_text_box(
    ci_key: ApiKey, superuser_client: Client
) -> None:
    override = services.save_override(
        {
            "api_key": "ci",
            "channel": "reasoning:pro",
            "exclude": ["gone/old-model@main", "pb/m2@main", "pa/m1@retired"],
        }
    ).instance

    response = superuser_client.get(change_url(override))

    form = response.context["adminform"].form
    assert form["channel"].value() == "reasoning:pro"
    assert form["exclude_keys"].value() == ["pb/m2@main"]
    assert form["exclude_other"].value() == "gone/old-model@main\npa/m1@retired"
    page = response.content.decode()
    assert re.search(r'<option value="reasoning:pro" selected>', page)
    assert re.search(r'value="pb/m2@main"[^>]*checked', page)


def test_saving_an_edit_unchanged_keeps_every_stored_key(
    ci_key: ApiKey, superuser_client: Client
) -> None:
    override = services.save_override(
        {"api_key": "ci", "channel": "auto", "exclude": ["x/y@z", "pa/m1@main"]}
    ).instance

    response = superuser_client.post(
        change_url(override),
        override_form(
            ci_key, channel="auto", exclude_keys=["pa/m1@main"], exclude_other="x/y@z"
        ),
    )

    assert response.status_code == 302
    override.refresh_from_db()
    assert override.exclude == ["pa/m1@main", "x/y@z"]


def test_unchecking_a_key_removes_it(ci_key: ApiKey, superuser_client: Client) -> None:
    override = services.save_override(
        {"api_key": "ci", "channel": "fast", "exclude": ["pa/m1@main", "pb/m2@main"]}
    ).instance

    superuser_client.post(
        change_url(override),
        override_form(ci_key, channel="fast", exclude_keys=["pb/m2@main"]),
    )

    override.refresh_from_db()
    assert override.exclude == ["pb/m2@main"]


@pytest.mark.parametrize("channel", ["turbo", "coding:floor", "Coding", "auto/coding"])
def test_an_invalid_channel_shows_the_validator_error_on_the_channel_field(
    ci_key: ApiKey, superuser_client: Client, channel: str
) -> None:
    response = superuser_client.post(
        reverse(ADD_URL), override_form(ci_key, channel=channel)
    )

    errors = response.context["adminform"].form.errors
    assert list(errors) == ["channel"]
    assert errors["channel"][0].startswith(
        "must be 'auto' or the suffix of a built-in auto id"
    )
    assert CandidateOverride.objects.count() == 0


def test_a_malformed_typed_key_shows_the_error_on_the_text_box_naming_it(
    ci_key: ApiKey, superuser_client: Client
) -> None:
    response = superuser_client.post(
        reverse(ADD_URL),
        override_form(
            ci_key, exclude_keys=["pa/m1@main"], exclude_other="pb/m2@main\nnot-a-key"
        ),
    )

    assert response.context["adminform"].form.errors == {
        "exclude_other": ["not-a-key: must be provider/model@connection"]
    }
    assert CandidateOverride.objects.count() == 0


def test_a_second_override_for_the_same_key_and_channel_is_refused(
    ci_key: ApiKey, superuser_client: Client
) -> None:
    services.save_override({"api_key": "ci", "channel": "coding"})

    response = superuser_client.post(reverse(ADD_URL), override_form(ci_key))

    assert response.status_code == 200
    assert response.context["adminform"].form.errors
    assert CandidateOverride.objects.count() == 1


def test_a_stored_channel_that_is_no_longer_offered_stays_visible(
    ci_key: ApiKey, superuser_client: Client
) -> None:
    override = CandidateOverride.objects.create(api_key=ci_key, channel="legacy")

    response = superuser_client.get(change_url(override))

    page = response.content.decode()
    assert '<option value="legacy" selected>legacy (not valid)</option>' in page


# ------------------------------------------------------------------ the key page


def test_the_key_page_lists_its_overrides_with_links_to_edit_them(
    ci_key: ApiKey, superuser_client: Client
) -> None:
    coding = services.save_override(
        {"api_key": "ci", "channel": "coding", "exclude": ["pa/m1@main", "x/y@z"]}
    ).instance
    services.save_override({"api_key": "ci", "channel": "vision:free"})

    response = superuser_client.get(
        reverse("admin:combos_apikey_change", args=[ci_key.pk])
    )

    assert response.status_code == 200
    page = response.content.decode()
    assert "pa/m1@main, x/y@z" in page
    assert "vision:free" in page
    assert "(none)" in page
    assert f'href="{change_url(coding)}"' in page
    assert f'href="{reverse(ADD_URL)}?api_key={ci_key.pk}"' in page


def test_the_add_link_preselects_the_key(
    ci_key: ApiKey, superuser_client: Client
) -> None:
    response = superuser_client.get(f"{reverse(ADD_URL)}?api_key={ci_key.pk}")

    assert response.context["adminform"].form["api_key"].value() == str(ci_key.pk)


def test_saving_the_key_page_keeps_its_overrides(
    ci_key: ApiKey, superuser_client: Client
) -> None:
    override = services.save_override(
        {"api_key": "ci", "channel": "coding", "exclude": ["pa/m1@main"]}
    ).instance

    response = superuser_client.post(
        reverse("admin:combos_apikey_change", args=[ci_key.pk]),
        {
            "name": "ci",
            "active": "on",
            "budget_period": "month",
            "rpm": "60",
            "overrides-TOTAL_FORMS": "1",
            "overrides-INITIAL_FORMS": "1",
            "overrides-MIN_NUM_FORMS": "0",
            "overrides-MAX_NUM_FORMS": "1000",
            "overrides-0-id": str(override.pk),
            "overrides-0-api_key": str(ci_key.pk),
        },
    )

    assert response.status_code == 302, response.context["adminform"].form.errors
    ci_key.refresh_from_db()
    override.refresh_from_db()
    assert ci_key.rpm == 60
    assert (override.channel, override.exclude) == ("coding", ["pa/m1@main"])
