"""Explain route: ``manage.py explain_route`` and /admin/explain-route/ (dry run)."""

from __future__ import annotations

import io
import json
import re
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from django.contrib.auth.models import User
from django.core.management import call_command
from django.core.management.base import CommandError
from django.test import Client

from combos.config_file import import_config
from gateway.config.snapshot import build_table
from gateway.kernel.breaker import HealthConfig
from gateway.kernel.types import RoutingTable
from gateway.ops.explain import _dry_run_store, explain
from gateway.planning.combo import plan_combo
from gateway.planning.plan import RequestFacts
from providers.health import board

pytestmark = pytest.mark.django_db

CONFIG = """
providers:
  - slug: pa
    kind: openai
    base_url: http://127.0.0.1:9/v1
    connections: [{name: main, priority: 0}, {name: backup, priority: 1}]
    models: [{id: m1}]
  - slug: pb
    kind: openai
    base_url: http://127.0.0.1:9/v1
    connections: [{name: main}]
    models: [{id: m2}]
  - slug: pc
    kind: openai
    base_url: http://127.0.0.1:9/v1
    connections: [{name: main}]
    models: [{id: m3}]
combos:
  - name: team
    strategy: priority
    targets: [{model: pb/m2}, {model: pa/m1}, {model: pc/m3}]
  - name: rr1
    strategy: round-robin
    config: {stickyRoundRobinLimit: 1}
    targets: [{model: pa/m1}, {model: pb/m2}, {model: pc/m3}]
api_keys:
  - name: narrow
    key: sk-or-narrow-literal-key-0123456789abcdef
    allowed_models: ["pb/*"]
"""
CONNECTIONS = ("pa@main", "pa@backup", "pb@main", "pc@main")


def _forget_state() -> None:
    for conn in CONNECTIONS:
        board.reset(conn)
    for key in board.store.keys("state:"):
        board.store.delete(key)


@pytest.fixture
def table() -> Iterator[RoutingTable]:
    import_config(CONFIG)
    _forget_state()
    yield build_table()
    _forget_state()


def run(*args: str) -> str:
    out = io.StringIO()
    call_command("explain_route", *args, stdout=out)
    return out.getvalue()


def open_breaker(conn: str) -> None:
    for _ in range(5):
        board.record(
            conn, "m2", "server_error", None, now=time.time(), config=HealthConfig()
        )


def test_a_direct_model_lists_its_connections_by_priority(table):
    text = run("pa/m1")

    assert "route: direct -> pa/m1" in text
    assert "1. pa/m1@main  connection order 1 (priority 0" in text
    assert "2. pa/m1@backup  connection order 2 (priority 1" in text
    assert "allow-list: allowed (no allow-list)" in text
    assert "dry run" in text


def test_a_combo_orders_its_targets_and_skips_an_open_breaker(table):
    open_breaker("pb@main")

    text = run("team")

    assert "route: combo:team -> team  strategy: priority" in text
    assert "1. pa/m1@main  strategy order 1 of 2 (priority), connection 1 of 2" in text
    assert (
        "2. pa/m1@backup  strategy order 1 of 2 (priority), connection 2 of 2" in text
    )
    assert "3. pc/m3@main  strategy order 2 of 2 (priority)" in text
    # the wait counts down from the breaker's 30 s while the test runs
    waits = re.findall(
        r"skipped pb/m2@main  circuit_open \[pre-filter, usable in ([0-9.]+) s\]", text
    )
    assert len(waits) == 1, text
    assert 25 < float(waits[0]) <= 30


def test_an_unknown_model_is_the_gateways_404(table):
    text = run("nope")

    assert "error: 404 model_not_found (param: model)" in text


def test_a_model_outside_the_keys_allow_list_is_a_403(table):
    text = run("pa/m1", "--key", "narrow")

    assert "error: 403 model_not_allowed (param: model)" in text


def test_an_allowed_model_names_the_matching_glob(table):
    text = run("pb/m2", "--key", "narrow")

    assert "allow-list: allowed (matches 'pb/*')" in text


def test_an_unknown_key_name_is_a_command_error(table):
    with pytest.raises(CommandError, match="no API key named 'ghost'"):
        run("pa/m1", "--key", "ghost")


def test_json_output_parses_and_carries_the_plan(table):
    report = json.loads(run("rr1", "--json"))

    assert report["dry_run"] is True
    assert report["status"] == 200
    slot = report["slots"][0]
    assert (slot["route"], slot["strategy"]) == ("combo:rr1", "round-robin")
    assert [t["target"] for t in slot["targets"]] == [
        "pa/m1@main",
        "pa/m1@backup",
        "pb/m2@main",
        "pc/m3@main",
    ]
    state = next(iter(slot["state"].values()))
    assert state == {
        "read": None,
        "written": True,
        "would_write": {"next": 1, "sticky": None},
    }


def test_a_body_file_is_validated_like_a_chat_request(table, tmp_path: Path):
    body = tmp_path / "body.json"
    body.write_text(json.dumps({"messages": [{"role": "user"}], "temperature": 5}))

    report = json.loads(run("pa/m1", "--body", str(body), "--json"))

    assert report["error"] == {
        "status": 400,
        "code": "invalid_value",
        "param": "temperature",
        "type": "invalid_request_error",
        "message": "'temperature' must be 0..2",
    }


def test_the_dry_run_does_not_advance_round_robin(table):
    combo = table.combos["rr1"]
    facts = RequestFacts(r_in=10, max_out=None)

    first = [explain(table, "rr1")["slots"][0]["targets"][0] for _ in range(2)]
    real = plan_combo(table, combo, facts)
    after = plan_combo(table, combo, facts)

    assert [t["target"] for t in first] == ["pa/m1@main", "pa/m1@main"]
    assert real.targets[0].key == "pa/m1@main"
    assert after.targets[0].key == "pb/m2@main"  # the real plan did advance


def test_live_traffic_during_a_dry_run_still_writes_the_real_store(table):
    def live_request() -> None:
        board.store.set("state:live", 2, None)

    with _dry_run_store():
        board.store.set("state:dry", 1, None)
        other = threading.Thread(target=live_request)
        other.start()
        other.join()
        assert board.store.get("state:dry") == 1

    assert board.store.get("state:dry") is None
    assert board.store.get("state:live") == 2


def test_the_admin_page_renders_a_report_for_a_superuser(table):
    client = Client()
    client.force_login(User.objects.create_superuser("root", "r@example.com", "pw"))

    response = client.get("/admin/explain-route/", {"model": "team"})

    assert response.status_code == 200
    html = response.content.decode()
    assert "Slot 0: team" in html
    assert "<code>pb/m2@main</code>" in html
    assert "strategy order 1 of 3 (priority)" in html


def test_the_admin_page_shows_a_skipped_breaker_as_time_left(table):
    open_breaker("pb@main")
    client = Client()
    client.force_login(User.objects.create_superuser("root", "r@example.com", "pw"))

    html = client.get("/admin/explain-route/", {"model": "team"}).content.decode()

    skipped = html.split("circuit open")[1].split("</td>")[0]
    assert '<time class="omr-time"' in skipped
    assert 'data-mode="left"' in skipped
    assert " left</time>" in skipped
    assert "Z</td>" not in html  # no raw ISO instant


def test_the_admin_page_shows_an_empty_form_without_parameters(table):
    client = Client()
    client.force_login(User.objects.create_superuser("root", "r@example.com", "pw"))

    response = client.get("/admin/explain-route/")

    assert response.status_code == 200
    assert 'id="explain-route-form"' in response.content.decode()
    assert response.context["report"] is None


@pytest.mark.parametrize("staff", [None, False])
def test_the_admin_page_redirects_anonymous_and_non_staff_users(table, staff):
    client = Client()
    if staff is not None:
        client.force_login(User.objects.create_user("plain", "p@example.com", "pw"))

    response = client.get("/admin/explain-route/", {"model": "team"})

    assert response.status_code == 302
    assert response["Location"].startswith("/admin/login/")


KEYED = """
providers:
  - slug: pa
    kind: openai
    base_url: http://127.0.0.1:9/v1
    connections:
      - {name: main, priority: 0, api_key: sk-test-pa-main-0000000000}
      - {name: backup, priority: 1, api_key: sk-test-pa-backup-000000000}
    models: [{id: m1}]
  - slug: pb
    kind: openai
    base_url: http://127.0.0.1:9/v1
    connections: [{name: main, api_key: sk-test-pb-main-0000000000}]
    models: [{id: m2}]
  - slug: pc
    kind: openai
    base_url: http://127.0.0.1:9/v1
    connections: [{name: main, api_key: sk-test-pc-main-0000000000}]
    models: [{id: m3}]
"""


def test_explain_without_credentials_is_no_healthy_candidate(table):
    [slot] = explain(table, "auto")["slots"]
    assert slot["refusal"]["code"] == "no_healthy_candidate"


def test_explain_runs_the_auto_pipeline_without_side_effects(table):
    import_config(KEYED)
    table = build_table()
    report = explain(table, "auto/cheap")
    [slot] = report["slots"]
    assert slot["route"] == "auto/cheap"
    assert slot["strategy"] == "rules"
    decision = slot["auto"]
    assert decision["route"] == "auto/cheap"
    assert decision["candidates_considered"] == 4
    assert len(slot["targets"]) == 3
    assert "primary by rules" in slot["targets"][0]["why"]
    assert board.store.keys("heal:") == []


def test_explain_auto_shows_the_filters_that_fell_open(table):
    import_config(KEYED)
    table = build_table()
    report = explain(table, "auto/reasoning:pro")
    [slot] = report["slots"]
    assert slot["auto"]["filter_fell_open"] == ["category", "tier"]


def test_explain_route_text_output_for_auto(table):
    import_config(KEYED)
    out = run("auto/cheap")
    assert "auto: task default, weights cost-saver" in out
    assert "decided by rules" in out


SMART = """
smart_routes:
  - alias: tiered
    easy: pc/m3
    hard: team
"""


def test_a_smart_alias_is_classified_and_replaced_without_side_effects(table):
    from prometheus_client import REGISTRY

    import_config(SMART)
    smart_table = build_table()
    counted = "omniroute_smartroute_requests_total"

    def total() -> float:
        return sum(
            sample.value
            for metric in REGISTRY.collect()
            if metric.name == counted.removesuffix("_total")
            for sample in metric.samples
            if sample.name == counted
        )

    before = total()
    easy = explain(smart_table, "tiered")
    hard = explain(
        smart_table,
        None,
        body=json.dumps(
            {
                "model": "tiered",
                "messages": [
                    {
                        "role": "user",
                        "content": "Fix this:\n```python\ndef f(x):\n    return x\n"
                        "```\nThink step by step.",
                    }
                ],
                "tools": [{"type": "function", "function": {"name": "ls"}}],
            }
        ).encode(),
    )

    assert (easy["smart"]["alias"], easy["smart"]["tier"]) == ("tiered", "easy")
    assert easy["slots"][0]["route"] == "direct"
    assert [t["target"] for t in easy["slots"][0]["targets"]][:1] == ["pc/m3@main"]
    assert (hard["smart"]["tier"], hard["smart"]["score"]) == ("hard", 9)
    assert hard["slots"][0]["route"] == "combo:team"
    assert total() == before  # a dry run counts nothing


def test_the_command_prints_the_smart_decision(table):
    import_config(SMART)
    text = run("tiered")
    assert "smart alias tiered: easy (classifier, score 0" in text
    assert "-> pc/m3  mode: enforce" in text
