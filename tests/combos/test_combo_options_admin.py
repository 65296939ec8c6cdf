"""The combo editor's "Strategy options": one admin field per ``config`` key of spec
03 §2.2 and 05 §3.7, merged with the "Other config" JSON (see ``combos.admin``)."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest
from django import forms
from django.contrib.messages import get_messages
from django.test import Client
from django.urls import reverse

from combos.admin import CONFIG_FIELD_NAMES, ComboForm, add_problems
from combos.combo_validation import CONFIG_USERS
from combos.models import Combo
from providers.models import Provider
from providers.validation import Problem

pytestmark = pytest.mark.django_db


def combo_form(**fields: str) -> dict[str, str]:
    return {
        "name": "team",
        "strategy": "priority",
        "active": "on",
        "targets_text": "pa/m1\npb/m2",
        "config_text": "",
        **fields,
    }


def add_combo(client: Client, **fields: str) -> Any:
    return client.post(reverse("admin:combos_combo_add"), combo_form(**fields))


def messages_of(response: Any) -> list[str]:
    return [str(m) for m in get_messages(response.wsgi_request)]


def initial_values(form: forms.BaseForm) -> dict[str, Any]:
    """What each option field and the JSON textarea show (empty ones left out)."""
    names = (*CONFIG_FIELD_NAMES, "config_text")
    return {name: form[name].value() for name in names if form[name].value()}


# ------------------------------------------------------------------ saving


@pytest.mark.parametrize(
    ("strategy", "fields", "config"),
    [
        (
            "round-robin",
            {
                "cfg_stickyRoundRobinLimit": "5",
                "cfg_connectionAwareExpansion": "true",
                "cfg_sessionAffinity": "false",
            },
            {
                "stickyRoundRobinLimit": 5,
                "connectionAwareExpansion": True,
                "sessionAffinity": False,
            },
        ),
        ("weighted", {"cfg_stickyWeightedLimit": "3"}, {"stickyWeightedLimit": 3}),
        (
            "fill-first",
            {"cfg_fillFirstReservePercent": "12.5"},
            {"fillFirstReservePercent": 12.5},
        ),
        ("reset-aware", {"cfg_tieBand": "0.1"}, {"tieBand": 0.1}),
        (
            "reset-window",
            {"cfg_resetWindowTieBandMs": "0"},
            {"resetWindowTieBandMs": 0},
        ),
        (
            "context-relay",
            {"cfg_handoffThreshold": "0.7", "cfg_maxMessagesForSummary": "20"},
            {"handoffThreshold": 0.7, "maxMessagesForSummary": 20},
        ),
        (
            "fusion",
            {
                "cfg_judgeModel": "pc/m3",
                "cfg_fusion_minPanel": "2",
                "cfg_fusion_stragglerGraceMs": "1500",
                "cfg_fusion_panelHardTimeoutMs": "60000",
            },
            {
                "judgeModel": "pc/m3",
                "fusionTuning": {
                    "minPanel": 2,
                    "stragglerGraceMs": 1500,
                    "panelHardTimeoutMs": 60000,
                },
            },
        ),
        (
            "pipeline",
            {
                "cfg_stagePrompts": "summarise\r\n\r\n",
                "cfg_agentic_enabled": "false",
                "cfg_agentic_maxToolRounds": "4",
            },
            {
                "stagePrompts": ["summarise"],
                "agenticOrchestration": {"enabled": False, "maxToolRounds": 4},
            },
        ),
        (
            "adaptive",
            {"cfg_objective": "cost", "cfg_sessionAffinity": "true"},
            {"objective": "cost", "sessionAffinity": True},
        ),
    ],
)
def test_option_fields_are_saved_as_the_config_the_strategy_reads(
    world: dict[str, Provider],
    superuser_client: Client,
    strategy: str,
    fields: dict[str, str],
    config: dict[str, Any],
) -> None:
    response = add_combo(superuser_client, strategy=strategy, **fields)

    assert response.status_code == 302
    assert Combo.objects.get().config == config


def test_empty_option_fields_store_no_keys(
    world: dict[str, Provider], superuser_client: Client
) -> None:
    response = add_combo(
        superuser_client,
        strategy="round-robin",
        cfg_stickyRoundRobinLimit="",
        cfg_sessionAffinity="",
        cfg_objective="",
        cfg_stagePrompts="\n \n",
    )

    assert response.status_code == 302
    assert Combo.objects.get().config == {}


def test_a_blank_prompt_line_is_a_stage_without_a_prompt(
    world: dict[str, Provider], superuser_client: Client
) -> None:
    response = add_combo(
        superuser_client,
        strategy="pipeline",
        targets_text="pa/m1@main\npa/m1@backup\npb/m2\npc/m3",
        cfg_stagePrompts="\nsummarise\n  \ntranslate\n",
    )

    assert response.status_code == 302
    assert Combo.objects.get().config == {
        "stagePrompts": [None, "summarise", None, "translate"]
    }


def test_option_fields_merge_into_the_json_and_win_over_its_keys(
    world: dict[str, Provider], superuser_client: Client
) -> None:
    response = add_combo(
        superuser_client,
        strategy="fusion",
        config_text=json.dumps(
            {"judgeModel": "pa/m1", "fusionTuning": {"stragglerGraceMs": 100}}
        ),
        cfg_judgeModel="pb/m2",
        cfg_fusion_minPanel="3",
    )

    assert response.status_code == 302
    assert Combo.objects.get().config == {
        "judgeModel": "pb/m2",
        "fusionTuning": {"stragglerGraceMs": 100, "minPanel": 3},
    }


def test_option_fields_of_other_strategies_are_not_saved_and_are_reported(
    world: dict[str, Provider], superuser_client: Client
) -> None:
    response = add_combo(
        superuser_client,
        strategy="priority",
        cfg_connectionAwareExpansion="true",
        cfg_stickyRoundRobinLimit="5",
        cfg_sessionAffinity="false",
        cfg_fusion_minPanel="3",
        cfg_agentic_enabled="true",
    )

    assert response.status_code == 302
    assert Combo.objects.get().config == {"connectionAwareExpansion": True}
    assert (
        "Not saved, strategy priority does not read them: sessionAffinity, "
        "stickyRoundRobinLimit, fusionTuning.minPanel, agenticOrchestration.enabled"
    ) in messages_of(response)


def test_a_json_key_of_another_strategy_is_still_kept_with_a_warning(
    world: dict[str, Provider], superuser_client: Client
) -> None:
    response = add_combo(superuser_client, config_text='{"stickyRoundRobinLimit": 5}')

    assert response.status_code == 302
    assert Combo.objects.get().config == {"stickyRoundRobinLimit": 5}
    assert (
        "config.stickyRoundRobinLimit: not used by strategy 'priority'; "
        "kept and ignored"
    ) in messages_of(response)


# ------------------------------------------------------------------ errors


@pytest.mark.parametrize(
    ("strategy", "fields", "errors"),  # on its own field: the message alone
    [
        (
            "round-robin",
            {"cfg_stickyRoundRobinLimit": "0"},
            {"cfg_stickyRoundRobinLimit": ["must be between 1 and 1 000"]},
        ),
        (
            "context-relay",
            {"cfg_handoffThreshold": "0.95"},
            {"cfg_handoffThreshold": ["must be more than 0 and less than 0.95"]},
        ),
        (
            "fusion",
            {"cfg_fusion_minPanel": "17", "cfg_judgeModel": "nope/x"},
            {
                "cfg_fusion_minPanel": ["must be between 1 and 16"],
                "cfg_judgeModel": ["unknown model or combo 'nope/x'"],
            },
        ),
        (
            "pipeline",
            {"cfg_stagePrompts": "a\nb\nc", "cfg_agentic_maxToolRounds": "33"},
            {
                "cfg_stagePrompts": ["must not be longer than targets"],
                "cfg_agentic_maxToolRounds": ["must be between 1 and 32"],
            },
        ),
    ],
)
def test_an_out_of_range_option_shows_the_error_on_its_field(
    world: dict[str, Provider],
    superuser_client: Client,
    strategy: str,
    fields: dict[str, str],
    errors: dict[str, list[str]],
) -> None:
    response = add_combo(superuser_client, strategy=strategy, **fields)

    assert response.status_code == 200
    assert response.context["adminform"].form.errors == errors
    assert Combo.objects.count() == 0


def test_a_bad_key_typed_in_the_json_shows_the_error_on_the_json(
    world: dict[str, Provider], superuser_client: Client
) -> None:
    response = add_combo(
        superuser_client,
        strategy="fusion",
        config_text='{"fusionTuning": {"minPanel": 0, "quorum": 2}}',
    )

    assert response.context["adminform"].form.errors == {
        "config_text": [
            "config.fusionTuning.quorum: unknown key",
            "config.fusionTuning.minPanel: must be between 1 and 16",
        ]
    }


def test_json_that_is_not_an_object_is_an_error_on_the_json(
    world: dict[str, Provider], superuser_client: Client
) -> None:
    response = add_combo(
        superuser_client,
        strategy="round-robin",
        config_text="[1]",
        cfg_stickyRoundRobinLimit="5",
    )

    assert response.context["adminform"].form.errors == {
        "config_text": ["must be a mapping"]  # the field is the whole config
    }


def test_a_dotted_alias_matches_whole_segments_only() -> None:
    class Form(forms.Form):
        config_text = forms.CharField(required=False)
        cfg_fusion_minPanel = forms.IntegerField(required=False)

    form = Form({})
    form.is_valid()
    aliases = {
        "config": "config_text",
        "config.fusionTuning.minPanel": "cfg_fusion_minPanel",
    }

    add_problems(
        form,
        [
            Problem("config.fusionTuning.minPanel", "too big"),
            Problem("config.fusionTuning.minPanelX", "unknown key"),
            Problem("elsewhere", "lost"),
        ],
        aliases,
    )

    assert form.errors == {
        "cfg_fusion_minPanel": ["too big"],  # its own field: the message alone
        "config_text": ["config.fusionTuning.minPanelX: unknown key"],
        "__all__": ["elsewhere: lost"],
    }


# ------------------------------------------------------------------ editing


def test_editing_a_combo_shows_its_options_in_fields_and_the_rest_as_json(
    world: dict[str, Provider],
    superuser_client: Client,
    make_combo: Callable[..., Combo],
) -> None:
    team = make_combo(
        "team",
        strategy="fusion",
        targets=[{"model": "pa/m1"}, {"model": "pb/m2"}],
        config={
            "judgeModel": "pb/m2",
            "fusionTuning": {"minPanel": 3, "stragglerGraceMs": 500},
            "sessionAffinity": False,
            "auto": {"explorationRate": 0.1},
        },
    )

    response = superuser_client.get(
        reverse("admin:combos_combo_change", args=[team.pk])
    )

    assert initial_values(response.context["adminform"].form) == {
        "cfg_sessionAffinity": "false",
        "cfg_judgeModel": "pb/m2",
        "cfg_fusion_minPanel": 3,
        "cfg_fusion_stragglerGraceMs": 500,
        "cfg_auto_explorationRate": 0.1,  # issue #15: auto's options are fields too
    }


def test_prompts_that_lines_cannot_hold_stay_in_the_json_and_survive_a_save(
    world: dict[str, Provider],
    superuser_client: Client,
    make_combo: Callable[..., Combo],
) -> None:
    config = {
        "stagePrompts": ["first line\nsecond line", None],
        "agenticOrchestration": {"enabled": True},
    }
    team = make_combo(
        "team",
        strategy="pipeline",
        targets=[{"model": "pa/m1"}, {"model": "pb/m2"}],
        config=config,
    )
    url = reverse("admin:combos_combo_change", args=[team.pk])
    form = superuser_client.get(url).context["adminform"].form
    shown = initial_values(form)

    response = superuser_client.post(
        url,
        combo_form(
            strategy="pipeline",
            **{name: str(value) for name, value in shown.items()},
        ),
    )

    assert shown == {
        "cfg_agentic_enabled": "true",
        "config_text": json.dumps({"stagePrompts": config["stagePrompts"]}, indent=2),
    }
    assert response.status_code == 302
    assert Combo.objects.get().config == config


def test_switching_strategy_drops_the_options_only_the_old_one_read(
    world: dict[str, Provider],
    superuser_client: Client,
    make_combo: Callable[..., Combo],
) -> None:
    team = make_combo(
        "team",
        strategy="round-robin",
        targets=[{"model": "pa/m1"}, {"model": "pb/m2"}],
        config={"stickyRoundRobinLimit": 5, "connectionAwareExpansion": True},
    )

    response = superuser_client.post(
        reverse("admin:combos_combo_change", args=[team.pk]),
        combo_form(
            strategy="fill-first",
            cfg_stickyRoundRobinLimit="5",
            cfg_connectionAwareExpansion="true",
        ),
    )

    assert response.status_code == 302
    assert Combo.objects.get().config == {"connectionAwareExpansion": True}
    assert (
        "Not saved, strategy fill-first does not read them: stickyRoundRobinLimit"
    ) in messages_of(response)


# ------------------------------------------------------------------ rendering


def test_every_option_field_names_its_key_and_the_strategies_that_read_it() -> None:
    form = ComboForm()

    for name in CONFIG_FIELD_NAMES:
        attrs = form.fields[name].widget.attrs
        head = attrs["data-config-key"].partition(".")[0]
        assert attrs["data-strategies"].split() == sorted(CONFIG_USERS[head]), name
    assert {form.fields[n].widget.attrs["data-config-key"] for n in CONFIG_FIELD_NAMES}
    assert set(CONFIG_USERS) - {
        form.fields[n].widget.attrs["data-config-key"].partition(".")[0]
        for n in CONFIG_FIELD_NAMES
    } == {"routerStrategy"}  # the top-level alias of auto.routerStrategy


def test_the_add_page_groups_the_option_fields_under_strategy_options(
    superuser_client: Client,
) -> None:
    page = superuser_client.get(reverse("admin:combos_combo_add")).content.decode()

    assert "Strategy options" in page
    assert "Other config (advanced)" in page
    assert 'data-config-key="fusionTuning.minPanel"' in page
    assert 'data-strategies="round-robin"' in page
    assert "Integer 1..1000; empty = settings.sticky_round_robin_limit (3)." in page


def test_auto_options_are_fields_and_every_strategy_has_a_description(
    world: dict[str, Provider], superuser_client: Client
) -> None:
    from django.utils.html import escape

    from gateway.planning.strategies import SPECS

    page = superuser_client.get(reverse("admin:combos_combo_add")).content.decode()
    for name, spec in SPECS.items():
        assert spec.traits.summary, name
        assert f">{name}: {escape(spec.traits.summary)}</option>" in page
    assert 'data-config-key="auto.modePack"' in page
    assert 'data-config-key="auto.budgetCap"' in page

    saved = superuser_client.post(
        reverse("admin:combos_combo_add"),
        {
            "name": "cheap-auto",
            "strategy": "auto",
            "active": "on",
            "targets_text": "",
            "config_text": "",
            "cfg_auto_routerStrategy": "cost",
            "cfg_auto_budgetCap": "0.01",
            "cfg_auto_maxAttempts": "2",
        },
    )

    assert saved.status_code == 302
    assert Combo.objects.get(name="cheap-auto").config == {
        "auto": {"routerStrategy": "cost", "budgetCap": 0.01, "maxAttempts": 2}
    }


def test_the_targets_editor_suggests_models_and_combos(
    world: dict[str, Provider],
    superuser_client: Client,
    make_combo: Callable[..., Combo],
) -> None:
    make_combo("team")
    page = superuser_client.get(reverse("admin:combos_combo_add")).content.decode()

    assert '<datalist id="omr-routes">' in page
    assert '<option value="pa/m1">pa/m1</option>' in page
    assert '<option value="combo:team">team (combo)</option>' in page
