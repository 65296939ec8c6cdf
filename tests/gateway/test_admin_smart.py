"""The smart route page (/admin/smart-routes/<alias>/, spec 05 §2): config, the
easy/hard split and score histogram of the last 24 h, and the "Classify this
request" tester; the SmartRoute admin links to it."""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from combos.models import GatewaySettings, SmartRoute
from providers.pins import PinStore
from telemetry.models import RequestLog

pytestmark = pytest.mark.django_db

ALIAS = "coder"
URL = f"/admin/smart-routes/{ALIAS}/"


@pytest.fixture
def route() -> SmartRoute:
    return SmartRoute.objects.create(
        alias=ALIAS, easy="cheap/m", hard="smart/m", threshold=4
    )


@pytest.fixture
def superuser_client() -> Client:
    client = Client()
    client.force_login(User.objects.create_superuser("root", "r@example.com", "pw"))
    return client


@pytest.fixture
def make_log() -> Callable[..., RequestLog]:
    """``make_log(tier, source, score, signals, age=..., alias=...)``: one logged
    request through a smart alias, ``age`` before now."""

    def make(
        tier: str,
        source: str,
        score: int | None,
        signals: list[str],
        *,
        age: timedelta = timedelta(minutes=5),
        alias: str = ALIAS,
        mode: str = "enforce",
    ) -> RequestLog:
        return RequestLog.objects.create(
            created_at=timezone.now() - age,
            endpoint="/v1/chat/completions",
            requested_model=alias,
            status=RequestLog.Status.SUCCESS,
            http_status=200,
            smart_alias=alias,
            smart_mode=mode,
            tier=tier,
            tier_source=source,
            tier_score=score,
            tier_signals=signals,
            tier_target="smart/m" if tier == "hard" else "cheap/m",
        )

    return make


@pytest.fixture
def traffic(route: SmartRoute, make_log: Callable[..., RequestLog]) -> None:
    for _ in range(3):
        make_log("easy", "classifier", 0, [])
    make_log("easy", "classifier", 1, ["context:+1"])
    make_log("easy", "bypass", None, [])
    for _ in range(2):
        make_log("hard", "classifier", 4, ["effort_keyword:+4:root cause"])
    make_log("hard", "classifier", 7, ["effort_keyword:+4:debug this", "code:+3"])
    make_log("hard", "classifier", 9, ["code:+3", "context:+6"], mode="observe")
    make_log("hard", "session_pin", 2, ["tools:+2"])
    # neither counts: older than 24 h, another alias
    make_log("hard", "classifier", 12, ["context:+6"], age=timedelta(hours=25))
    make_log("easy", "classifier", 0, ["thread_depth:+1"], alias="writer")


def histogram(response: Any) -> dict[str, int]:
    return {b.label: b.count for b in response.context["stats"].buckets}


def classify(client: Client, body: str, **headers: str) -> Any:
    return client.post(
        URL,
        {"body": body, "tier_header": "", "smart_header": "", **headers},
    )


# ------------------------------------------------------------------ access


def test_an_unknown_alias_is_a_404(superuser_client: Client, route: SmartRoute):
    response = superuser_client.get("/admin/smart-routes/nope/")

    assert response.status_code == 404


@pytest.mark.parametrize("staff", [None, False])
def test_anonymous_and_non_staff_users_are_sent_to_the_login_page(route, staff):
    client = Client()
    if staff is not None:
        client.force_login(User.objects.create_user("plain", "p@example.com", "pw"))

    response = client.get(URL)

    assert response.status_code == 302
    assert response["Location"].startswith("/admin/login/")


def test_staff_without_the_smart_route_view_permission_is_refused(route):
    client = Client()
    client.force_login(
        User.objects.create_user("staff", "s@example.com", "pw", is_staff=True)
    )

    response = client.get(URL)

    assert response.status_code == 403


# ------------------------------------------------------------------ config


def test_the_page_shows_the_route_config_and_the_gateway_mode(
    superuser_client: Client, route: SmartRoute
):
    GatewaySettings.objects.create(data={"smart_routing_mode": "observe"})

    response = superuser_client.get(URL)

    assert response.status_code == 200
    html = response.content.decode()
    assert "<code>cheap/m</code>" in html
    assert "<code>smart/m</code>" in html
    assert "1800 s" in html
    assert '<code id="smart-mode">observe</code>' in html
    assert "No request through this alias was logged in the last 24 h." in html


def test_the_gateway_mode_defaults_to_enforce(
    superuser_client: Client, route: SmartRoute
):
    response = superuser_client.get(URL)

    assert response.context["mode"] == "enforce"


# ------------------------------------------------------------------ last 24 h


def test_the_split_counts_easy_and_hard_of_this_alias_in_the_last_24_hours(
    superuser_client: Client, traffic: None
):
    response = superuser_client.get(URL)

    stats = response.context["stats"]
    assert (stats.total, stats.easy, stats.hard) == (10, 5, 5)
    html = response.content.decode()
    assert '<tr id="split-easy"><td>easy</td><td>5</td><td>50.0 %</td></tr>' in html
    assert '<tr id="split-hard"><td>hard</td><td>5</td><td>50.0 %</td></tr>' in html


def test_the_split_by_source_and_by_mode(superuser_client: Client, traffic: None):
    response = superuser_client.get(URL)

    stats = response.context["stats"]
    assert [(r.source, r.easy, r.hard) for r in stats.by_source] == [
        ("bypass", 1, 0),
        ("classifier", 4, 4),
        ("session_pin", 0, 1),
    ]
    assert stats.by_mode == (("enforce", 9), ("observe", 1))


def test_the_histogram_counts_each_score_in_the_smallest_bound_at_or_above_it(
    superuser_client: Client, traffic: None
):
    response = superuser_client.get(URL)

    assert histogram(response) == {
        "0": 3,
        "1": 1,
        "2": 1,
        "3": 0,
        "4": 2,
        "5": 0,
        "6": 0,
        "7": 1,
        "8": 0,
        "9–10": 1,
        "11–12": 0,
        "13–16": 0,
        "17–22": 0,
    }
    stats = response.context["stats"]
    assert (stats.scored, stats.at_or_above) == (9, 4)


def test_the_threshold_line_sits_above_the_first_hard_bucket(
    superuser_client: Client, traffic: None
):
    response = superuser_client.get(URL)

    buckets = response.context["stats"].buckets
    assert [b.label for b in buckets if b.threshold_before] == ["4"]
    assert {b.side for b in buckets[:4]} == {"easy"}
    assert {b.side for b in buckets[4:]} == {"hard"}
    html = response.content.decode()
    assert html.count('<tr class="threshold">') == 1
    assert "threshold 4: scores &ge; 4 are hard" in html


def test_a_threshold_inside_a_bucket_marks_that_bucket_mixed(
    superuser_client: Client, traffic: None
):
    SmartRoute.objects.filter(alias=ALIAS).update(threshold=10)

    response = superuser_client.get(URL)

    buckets = {b.label: b for b in response.context["stats"].buckets}
    assert buckets["8"].side == "easy"
    assert buckets["9–10"].side == "mixed"
    assert buckets["9–10"].threshold_before
    assert buckets["11–12"].side == "hard"


def test_a_threshold_above_every_bucket_draws_the_line_under_the_last_one(
    superuser_client: Client, traffic: None
):
    SmartRoute.objects.filter(alias=ALIAS).update(threshold=30)

    response = superuser_client.get(URL)

    stats = response.context["stats"]
    assert {b.side for b in stats.buckets} == {"easy"}
    assert stats.threshold_after_all
    assert "threshold 30: every bucket is below it" in response.content.decode()


def test_a_score_above_the_last_bound_gets_its_own_bar(
    superuser_client: Client, route: SmartRoute, make_log: Callable[..., RequestLog]
):
    make_log("hard", "classifier", 25, [])  # above the classifier's maximum of 22

    response = superuser_client.get(URL)

    assert histogram(response)["> 22"] == 1
    assert response.context["stats"].buckets[-1].side == "hard"


def test_the_most_frequent_signals_are_counted_by_name(
    superuser_client: Client, traffic: None
):
    response = superuser_client.get(URL)

    stats = response.context["stats"]
    assert stats.signals == (
        ("effort_keyword", 3),
        ("code", 2),
        ("context", 2),
        ("tools", 1),
    )
    assert not stats.signals_capped


# ------------------------------------------------------------------ tester


@pytest.fixture
def no_pins(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*args: Any, **kwargs: Any) -> None:
        raise AssertionError("the tester must not touch session pins")

    for name in ("get", "set", "delete"):
        monkeypatch.setattr(PinStore, name, refuse)


def test_the_tester_classifies_an_effort_keyword_as_hard_with_score_4(
    superuser_client: Client, route: SmartRoute, no_pins: None
):
    response = classify(superuser_client, "Find the ROOT-CAUSE of this flaky test")

    result = response.context["result"]
    assert (result.tier, result.source, result.verdict.score) == (
        "hard",
        "classifier",
        4,
    )
    assert result.signals == ("effort_keyword:+4:root cause",)
    assert result.enforce_target == "smart/m"
    html = response.content.decode()
    assert '<code id="verdict-target">smart/m</code>' in html
    assert "no session pin is read or written" in html


def test_the_tester_classifies_thanks_as_easy(
    superuser_client: Client, route: SmartRoute, no_pins: None
):
    response = classify(superuser_client, "thanks!")

    result = response.context["result"]
    assert (result.tier, result.verdict.score, result.signals) == ("easy", 0, ())
    assert result.enforce_target == "cheap/m"


def test_the_tester_reads_a_json_chat_body(
    superuser_client: Client, route: SmartRoute, no_pins: None
):
    body = {
        "model": ALIAS,
        "messages": [{"role": "user", "content": "hi"}],
        "reasoning_effort": "high",
        "session_id": "s-1",
    }

    response = classify(superuser_client, json.dumps(body))

    result = response.context["result"]
    assert (result.tier, result.source) == ("hard", "explicit_reasoning")
    assert result.verdict.explicit_reasoning


def test_the_tester_applies_the_headers(
    superuser_client: Client, route: SmartRoute, no_pins: None
):
    forced = classify(
        superuser_client, "Find the ROOT-CAUSE of this flaky test", tier_header="EASY"
    ).context["result"]
    bypassed = classify(
        superuser_client, "Find the ROOT-CAUSE", smart_header="off"
    ).context["result"]
    ignored = classify(superuser_client, "thanks!", tier_header="medium").context[
        "result"
    ]

    assert (forced.tier, forced.source, forced.enforce_target) == (
        "easy",
        "forced",
        "cheap/m",
    )
    assert (bypassed.tier, bypassed.source, bypassed.classified) == (
        "easy",
        "bypass",
        False,
    )
    assert bypassed.signals == ()
    assert (ignored.tier, ignored.signals) == ("easy", ("header_ignored",))


def test_the_tester_shows_a_form_error_for_invalid_json(
    superuser_client: Client, route: SmartRoute
):
    response = classify(superuser_client, '{"messages": [')

    assert response.status_code == 200
    assert response.context["result"] is None
    assert response.context["form"].errors["body"][0].startswith("Invalid JSON")
    assert "Invalid JSON" in response.content.decode()


def test_the_tester_wants_a_messages_list(superuser_client: Client, route):
    response = classify(superuser_client, '{"model": "coder"}')

    assert response.context["form"].errors["body"] == [
        "A chat body needs a 'messages' list."
    ]


# ------------------------------------------------------------------ links


def test_the_smart_route_changelist_links_to_each_alias_page(
    superuser_client: Client, route: SmartRoute
):
    response = superuser_client.get(reverse("admin:combos_smartroute_changelist"))

    assert f'<a href="{URL}">Details</a>' in response.content.decode()


def test_the_smart_route_change_page_links_to_its_alias_page(
    superuser_client: Client, route: SmartRoute
):
    response = superuser_client.get(
        reverse("admin:combos_smartroute_change", args=[route.pk])
    )

    assert f'href="{URL}" id="smart-route-details-link"' in response.content.decode()


def test_an_alias_with_a_slash_gets_its_own_page(superuser_client: Client):
    SmartRoute.objects.create(alias="team/smart", easy="a/b", hard="c/d")

    response = superuser_client.get(reverse("smart-route-detail", args=["team/smart"]))

    assert response.status_code == 200
    assert response.context["route"].alias == "team/smart"
