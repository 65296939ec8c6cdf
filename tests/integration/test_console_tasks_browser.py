"""The operator's routine tasks of issue #15, done in the console as an operator would
(headless Chromium driving the real gateway process, the mock provider on loopback
failing on cue), asserting what the operator sees: a failover combo built in the
targets editor fails over in the live feed; an ``auto`` combo and a key's failover
defaults set through their forms, not JSON; the gateway settings form; a job run
from the Jobs page; a failing connection found by the health filter and re-enabled
(the action asks first, listing the selection's states) with an honest count;
Explain route reached from the pages that link it; REST and import edits in a row's
History, saying who made them.

The dashboard's health board, the shadow confirmation, the YAML round trip and the
playground are in ``test_console_browser.py``; the live feed's filters, pause and
request-log link in ``test_telemetry_dashboards.py``; adding a provider from a preset
in ``test_admin_presets_browser.py``.
"""

from __future__ import annotations

import json
import re
import uuid
from typing import Any

import httpx
import pytest

from tests.integration.conftest import post_chat

pytestmark = pytest.mark.integration
Gateway = Any  # tests/integration/conftest.py
JOB_WAIT_MS = 60_000  # a job run from the page, until its outcome shows


def _newest_request_id(gateway: Gateway) -> str:
    with gateway.db() as conn:
        row = conn.execute(
            "select id from telemetry_requestlog order by created_at desc limit 1"
        ).fetchone()
    return str(uuid.UUID(row[0]))


def _api(gateway: Gateway, path: str) -> Any:
    response = httpx.get(
        f"{gateway.url}/api/{path}",
        headers={"Authorization": f"Bearer {gateway.admin_token}"},
        timeout=10,
    )
    assert response.status_code == 200, response.text
    return response.json()


def _combo(gateway: Gateway, name: str) -> dict[str, Any]:
    return next(c for c in _api(gateway, "combos") if c["name"] == name)


def _served(gateway: Gateway) -> None:
    """Wait until the gateway serves what the console just saved."""
    gateway.wait_for_version(gateway.config_version())


def _target_row(page: Any, number: int) -> Any:
    return page.locator(f"table.combo-targets tbody tr[data-row='{number}']")


def _see_it_fail_over_in_the_live_feed(gateway: Gateway, upstream: Any, page: Any):
    """fo-chain routes: pa fails once, the live feed shows the failover and links
    the request's row in the request log."""
    page.goto("/admin/telemetry/live-routing/")
    page.wait_for_selector("#live-status[data-state='open']")
    upstream.add("m1", status=500, times=1)
    reply = post_chat(gateway, model="fo-chain")
    assert reply.status_code == 200, reply.text
    request_id = _newest_request_id(gateway)
    row = page.locator(f"#live-routing tbody tr[data-request-id='{request_id}']")
    row.wait_for()
    assert row.locator("td.models").inner_text() == "fo-chain → pb/m2"
    row.locator("td.attempts summary").click()
    lines = row.locator("td.attempts pre").first.inner_text().splitlines()
    assert lines[0].startswith("pa/m1@main ")
    assert "success" not in lines[0]
    assert lines[-1].startswith("pb/m2@main success")
    row.locator("td.request-id a").click()
    page.wait_for_url(f"**/admin/telemetry/requestlog/{request_id}/change/")
    body = page.locator("#content").inner_text()
    assert "fo-chain" in body
    assert "pb/m2" in body


def test_build_a_failover_combo_in_the_editor_and_see_it_fail_over_live(
    gateway: Gateway, upstream: Any, admin_page: Any
):
    page = admin_page
    page.goto("/admin/combos/combo/add/")

    # every strategy says what it does; priority is the failover one
    options = page.locator("#id_strategy option")
    texts = [options.nth(i).inner_text() for i in range(options.count())]
    assert all(re.match(r"^[\w-]+: \S", text) for text in texts), texts
    priority = page.locator("#id_strategy option[value='priority']").inner_text()
    assert "failover" in priority
    # the targets editor suggests the catalog's models and combos
    for value in ("pa/m1", "pb/m2", "combo:team"):
        assert page.locator(f"#omr-routes option[value='{value}']").count() == 1

    page.fill("#id_name", "fo-chain")
    page.select_option("#id_strategy", "priority")
    add = page.get_by_role("button", name="Add target")
    add.click()
    add.click()
    first = _target_row(page, 1).locator("input").first
    assert first.get_attribute("list") == "omr-routes"
    first.fill("pa/m1")
    _target_row(page, 2).locator("input").first.fill("nosuch/m9")
    page.click("[name=_save]")

    # the error names row 2 as the page numbers it; only that cell is marked
    error = page.locator(".errorlist li", has_text="targets (row 2)")
    error.wait_for()
    assert "nosuch" in error.inner_text()
    marked = page.locator("table.combo-targets .omr-bad-cell")
    assert marked.count() == 1
    bad = _target_row(page, 2).locator("input").first
    assert bad.get_attribute("aria-invalid") == "true"
    assert _target_row(page, 1).locator("[aria-invalid]").count() == 0

    bad.fill("pb/m2")
    assert marked.count() == 0  # edited: no longer marked
    page.click("[name=_save]")
    page.wait_for_url("**/admin/combos/combo/")
    assert [t["model"] for t in _combo(gateway, "fo-chain")["targets"]] == [
        "pa/m1",
        "pb/m2",
    ]
    _served(gateway)

    _see_it_fail_over_in_the_live_feed(gateway, upstream, page)


def test_an_auto_combo_is_set_up_with_fields_not_json(
    gateway: Gateway, upstream: Any, admin_page: Any
):
    page = admin_page
    page.goto("/admin/combos/combo/add/")
    page.fill("#id_name", "auto-form")
    page.select_option("#id_strategy", "auto")
    page.get_by_role("button", name="Add target").click()
    _target_row(page, 1).locator("input").first.fill("pa/m1")
    page.get_by_role("button", name="Add target").click()
    _target_row(page, 2).locator("input").first.fill("pb/m2")

    # auto's options show as fields once auto is chosen; the others hide
    mode_pack = page.locator("#id_cfg_auto_modePack")
    assert mode_pack.is_visible()
    assert page.locator("#id_cfg_tieBand").is_hidden()
    packs = mode_pack.locator("option")
    assert packs.count() > 2  # "default" and the packs
    pack = packs.nth(1).get_attribute("value")
    routers = page.locator("#id_cfg_auto_routerStrategy option")
    router = routers.nth(routers.count() - 1).get_attribute("value")
    mode_pack.select_option(pack)
    page.select_option("#id_cfg_auto_routerStrategy", router)
    page.fill("#id_cfg_auto_budgetCap", "0.02")
    page.fill("#id_cfg_auto_explorationRate", "1.5")  # out of range
    page.click("[name=_save]")

    row = page.locator(".errors", has=page.locator("#id_cfg_auto_explorationRate"))
    row.wait_for()
    error = row.locator(".errorlist li")
    assert error.inner_text() == "must be between 0 and 1"  # the field's own words
    page.fill("#id_cfg_auto_explorationRate", "0.2")
    page.click("[name=_save]")
    page.wait_for_url("**/admin/combos/combo/")

    assert _combo(gateway, "auto-form")["config"] == {
        "auto": {
            "modePack": pack,
            "routerStrategy": router,
            "budgetCap": 0.02,
            "explorationRate": 0.2,
        }
    }
    # the saved options read back into their fields; the JSON box stays empty
    page.click("text=auto-form")
    page.wait_for_url("**/admin/combos/combo/*/change/")
    assert page.input_value("#id_cfg_auto_modePack") == pack
    assert page.input_value("#id_cfg_auto_explorationRate") == "0.2"
    assert page.input_value("#id_config_text") == ""
    _served(gateway)
    assert post_chat(gateway, model="auto-form").status_code == 200


def test_a_keys_failover_defaults_are_set_with_pickers_and_take_effect(
    gateway: Gateway, upstream: Any, admin_page: Any
):
    page = admin_page
    page.goto("/admin/combos/apikey/add/")
    page.fill("#id_name", "fo-key")
    # the fallbacks are picked from what the gateway routes
    fallback = page.locator("#id_fo_model_1")
    for value in ("pa/m1", "pb/m2", "team", "auto"):
        assert fallback.locator(f"option[value='{value}']").count() == 1
    fallback.select_option("pa/m1")
    page.select_option("#id_fo_model_2", "pb/m2")
    page.fill("#id_fo_timeout_ms", "20000")
    page.check("#id_fo_on input[value='server_error']")
    page.check("#id_fo_on input[value='rate_limit']")
    page.click("[name=_save]")
    page.wait_for_url("**/admin/combos/apikey/")
    shown = page.locator("text=New API key (shown once").inner_text()
    key = re.search(r"(sk-\S+)", shown)
    assert key is not None
    plaintext = key.group(1).rstrip(".")

    stored = next(k for k in _api(gateway, "api-keys") if k["name"] == "fo-key")
    assert stored["failover_defaults"] == {
        "models": ["pa/m1", "pb/m2"],
        "timeout_ms": 20000,
        "on": ["server_error", "rate_limit"],
    }
    _served(gateway)

    # pa/m1 fails: the key's chain goes on to pb/m2; a key without one gets the error
    upstream.add("m1", status=500)
    reply = post_chat(gateway, key=plaintext, model="pa/m1")
    assert reply.status_code == 200, reply.text
    assert reply.headers["x-omniroute-served-model"] == "pb/m2"
    assert post_chat(gateway, model="pa/m1").status_code >= 500


def _beside(page: Any, field: str) -> str:
    """What the form shows on a field's row: its label, help and errors."""
    return str(page.locator(f"div.field-{field}").inner_text())


def test_gateway_settings_are_one_field_per_key_with_its_default(
    gateway: Gateway, admin_page: Any
):
    page = admin_page
    page.goto("/admin/combos/gatewaysettings/")  # straight to the one row (or Add)
    page.wait_for_url(re.compile(r"/admin/combos/gatewaysettings/(add|\d+/change)/"))
    field = page.locator("#id_model_lock_minutes")
    assert field.get_attribute("placeholder") == "10"
    assert "Default 10; allowed" in _beside(page, "model_lock_minutes")
    assert "Default 30; allowed" in _beside(page, "breaker__open_seconds")
    objective = page.locator("#id_adaptive__objective option").first.inner_text()
    assert objective == "default (balanced)"

    field.fill("100000000")  # out of range
    page.click("[name=_save]")
    page.locator("div.field-model_lock_minutes .errorlist").wait_for()
    shown = _beside(page, "model_lock_minutes")
    assert "less than or equal to" in shown
    assert "^" not in shown  # plain words, no pattern

    page.fill("#id_model_lock_minutes", "12")
    page.click("[name=_save]")
    page.wait_for_url("**/admin/combos/gatewaysettings/**")
    with gateway.db() as conn:
        data = json.loads(
            conn.execute("select data from combos_gatewaysettings").fetchone()[0]
        )
    assert data == {"model_lock_minutes": 12}
    page.goto("/admin/combos/gatewaysettings/")
    assert page.input_value("#id_model_lock_minutes") == "12"  # as typed, not 12.0
    assert page.input_value("#id_breaker__open_seconds") == ""  # default, not stored


def test_run_a_job_from_the_jobs_page_and_see_its_outcome_coloured(
    gateway: Gateway, admin_page: Any
):
    page = admin_page
    with gateway.db() as conn:  # an earlier run that failed
        conn.execute(
            "insert into providers_jobrun (job, started_at, finished_at, outcome, "
            "counts, message, payload_sha256, triggered_by) values ('sync_arena_elo', "
            "datetime('now', '-1 minute'), datetime('now', '-1 minute'), 'failed', "
            "'{}', 'upstream said 503', '', 'beat')"
        )
    page.goto("/admin/providers/jobrun/jobs/")
    failed = page.locator("#jobs tr[data-job='sync_arena_elo'] td.outcome")
    assert failed.inner_text() == "failed"
    assert "outcome-failed" in (failed.get_attribute("class") or "")
    colour = failed.evaluate("el => getComputedStyle(el).color")
    assert colour == "rgb(186, 33, 33)"
    assert page.locator("#scheduler-status").inner_text()  # names the scheduler

    job = "compute_reliability_24h"
    runs = _job_runs(gateway, job)
    row = page.locator(f"#jobs tr[data-job='{job}']")
    assert "every 600 s" in row.inner_text()  # its schedule, in words
    row.locator("input[type=submit][value='Run now']").click()
    page.wait_for_url("**/admin/providers/jobrun/jobs/")
    assert page.locator(f"text={job}: started").count() == 1
    # the page refreshes while the job runs, until its outcome shows, in green
    done = row.filter(has=page.locator("td.outcome-success, td.outcome-unchanged"))
    done.filter(has_text="(admin)").wait_for(timeout=JOB_WAIT_MS)
    assert _job_runs(gateway, job) == runs + 1
    colour = done.locator("td.outcome").evaluate("el => getComputedStyle(el).color")
    assert colour == "rgb(26, 127, 55)"


def _job_runs(gateway: Gateway, job: str) -> int:
    with gateway.db() as conn:
        row = conn.execute(
            "select count(*) from providers_jobrun where job = ?", (job,)
        ).fetchone()
    return int(row[0])


def test_find_the_failing_connection_by_health_and_reenable_it_honestly(
    gateway: Gateway, upstream: Any, admin_page: Any
):
    page = admin_page
    upstream.add("m1", status=401, times=1)  # pa@main: auth-disabled
    assert post_chat(gateway, models=["pa/m1", "pb/m2"]).status_code == 200

    page.goto("/admin/providers/connection/")
    page.locator("a", has_text="Filters").first.click()
    page.click("#changelist-filter a[title=unhealthy]")
    page.wait_for_url("**health=unhealthy**")
    rows = page.locator("#result_list tbody tr")
    assert rows.count() == 1
    assert "pa@main" in rows.first.inner_text()
    badge = rows.first.locator(".omr-badge")
    assert badge.get_attribute("data-health") == "auth_disabled"
    assert badge.inner_text() == "auth disabled"

    # select two connections, one of them disabled: the count is the one
    page.goto("/admin/providers/connection/")
    for name in ("pa@main", "pb@main"):
        page.locator("#result_list tbody tr", has_text=name).locator(
            "input.action-select"
        ).check()
    page.select_option("select[name=action]", "reenable_now")
    page.click("button[name=index]")
    # the action asks first, listing both with their state; Yes acts
    asked = page.locator("#omr-bulk-confirm[data-action='reenable_now']")
    asked.wait_for()
    listed = asked.locator("#omr-bulk-connections tbody tr")
    assert listed.count() == 2
    disabled = asked.locator("tr[data-connection='pa@main'] .omr-badge")
    assert disabled.get_attribute("data-health") == "auth_disabled"
    page.click("#omr-bulk-yes")
    message = page.locator("text=Re-enabled 1: pa@main.")
    message.wait_for()
    page.goto("/admin/providers/connection/?health=unhealthy")
    assert page.locator("#result_list tbody tr").count() == 0


@pytest.mark.parametrize(
    ("changelist", "link_text", "model"),
    [
        ("/admin/combos/combo/", "team", "team"),
        ("/admin/combos/apikey/", "all", None),
        ("/admin/providers/provider/", "pa", "pa/m1"),
        ("/admin/combos/smartroute/", "sr-explain", "sr-explain"),
    ],
    ids=["combo", "key", "provider", "smart-route"],
)
def test_explain_route_is_linked_from_the_pages_it_explains(
    gateway: Gateway, admin_page: Any, changelist: str, link_text: str, model: str
):
    page = admin_page
    if "smartroute" in changelist and not any(
        r["alias"] == link_text for r in _api(gateway, "smart-routes")
    ):
        created = httpx.post(
            f"{gateway.url}/api/smart-routes",
            headers={"Authorization": f"Bearer {gateway.admin_token}"},
            json={"alias": link_text, "easy": "pa/m1", "hard": "pb/m2"},
            timeout=10,
        )
        assert created.status_code == 201, created.text
    page.goto(changelist)
    page.locator("#result_list").get_by_role("link", name=link_text, exact=True).click()
    page.wait_for_url("**/change/")
    page.click("a.omr-explain-link")
    page.wait_for_url("**/admin/explain-route/**")
    if model is None:  # a key's link picks the key; the operator names a model
        assert page.input_value("#id_key") == "all"
        page.fill("#id_model", "team")
        page.click("#explain-route-form [type=submit]")
    slots = page.locator(".explain-slot")
    slots.first.wait_for()
    assert "pa/m1" in slots.first.inner_text()


def test_rest_and_import_edits_show_in_the_history_with_who_made_them(
    gateway: Gateway, admin_page: Any
):
    page = admin_page
    auth = {"Authorization": f"Bearer {gateway.admin_token}"}  # the "ops" user's
    created = httpx.post(
        f"{gateway.url}/api/combos",
        headers=auth,
        json={
            "name": "hist-combo",
            "strategy": "priority",
            "targets": [{"model": "pa/m1"}, {"model": "pb/m2"}],
        },
        timeout=10,
    )
    assert created.status_code == 201, created.text
    pk = created.json()["id"]
    edited = httpx.patch(
        f"{gateway.url}/api/combos/{pk}",
        headers=auth,
        json={"strategy": "round-robin"},
        timeout=10,
    )
    assert edited.status_code == 200, edited.text
    imported = gateway.apply(
        "combos:\n  - name: hist-combo\n    strategy: priority\n"
        "    targets:\n      - model: pb/m2\n"
    )
    assert imported.returncode == 0, imported.stderr

    page.goto(f"/admin/combos/combo/{pk}/change/")
    page.get_by_role("link", name="History").click()
    page.wait_for_url(f"**/admin/combos/combo/{pk}/history/")
    rows = page.locator("#content table tbody tr")
    assert rows.count() == 3
    texts = [rows.nth(i).inner_text() for i in range(3)]
    assert "ops" in texts[0]
    assert "REST API: added." in texts[0]
    assert "ops" in texts[1]
    assert "REST API: changed strategy: priority → round-robin." in texts[1]
    assert "config-import" in texts[2]
    assert (
        "config import: changed strategy: round-robin → priority; targets: "
        in (texts[2])
    )
