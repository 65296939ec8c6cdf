"""Behaviour fixes of the console audits (issue #15) in headless Chromium, with the
console fixtures of ``conftest`` (``admin_page``): an uploaded YAML file with a
change applies after its preview (the browser sends the previewed text back with
CRLF line ends); the health board's Reset and Re-enable ask first, naming the
connection, and say what they did; the logout button is named "Log out" and the
sidebar's entries by their labels alone (no icon ligature text); the Jobs
page's counts wrap only between items; staff without the logs' view rights see no
link to the traffic overview or the live feed and get the admin's 403 page."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.integration.conftest import admin_user, logged_in, post_chat

pytestmark = pytest.mark.integration
Gateway = Any  # tests/integration/conftest.py
UPLOADED_COMBO = "uploaded-in-browser"


@pytest.fixture
def forget_uploaded_combo(gateway: Gateway) -> Iterator[None]:
    yield
    code = (
        "from combos.models import Combo\n"
        f"Combo.objects.filter(name={UPLOADED_COMBO!r}).delete()\n"
    )
    assert gateway.manage("shell", "-c", code).returncode == 0


def test_an_uploaded_file_with_a_change_applies_after_its_preview(
    gateway: Gateway, admin_page: Any, tmp_path: Path, forget_uploaded_combo: None
):
    page = admin_page
    page.goto("/admin/config/")
    with page.expect_download() as download:
        page.click("#config-download")
    saved = tmp_path / "omniroute.yaml"
    download.value.save_as(saved)
    data = yaml.safe_load(saved.read_text(encoding="utf-8"))
    data["combos"].append(
        {
            "name": UPLOADED_COMBO,
            "strategy": "priority",
            "targets": [{"model": "pa/m1"}],
        }
    )
    saved.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")

    page.set_input_files("#id_file", str(saved))
    page.click("#config-preview-button")
    assert UPLOADED_COMBO in page.locator("#config-diff").inner_text()
    page.click("#config-apply-button")

    page.locator("#config-applied").wait_for()
    assert page.locator("#config-problems").count() == 0
    page.goto("/admin/combos/combo/?q=" + UPLOADED_COMBO)
    assert UPLOADED_COMBO in page.locator("#result_list").inner_text()


def test_reset_and_reenable_ask_first_naming_the_connection(
    gateway: Gateway, upstream: Any, admin_page: Any
):
    page = admin_page
    upstream.add("m1", status=401, times=1)  # pa@main: auth-disabled
    post_chat(gateway, models=["pa/m1", "pb/m2"])
    page.goto("/admin/")
    row = page.locator("#omr-health tr[data-connection='pa@main']")
    assert row.get_attribute("data-state") == "auth_disabled"

    row.locator("button.omr-reset").click()
    asked = page.locator("#omr-health-confirm[data-connection='pa@main']")
    asked.wait_for()
    assert page.locator("#omr-confirm-heading").inner_text() == "Reset pa@main?"
    assert "auth disabled" in asked.inner_text()  # the state it is in now
    assert page.locator("#omr-confirm").inner_text() == "Yes, reset pa@main"
    page.click("#omr-confirm-cancel")  # No: nothing is done
    page.wait_for_url("**/admin/")
    row = page.locator("#omr-health tr[data-connection='pa@main']")
    assert row.get_attribute("data-state") == "auth_disabled"

    row.locator("button.omr-reenable").click()
    page.locator("#omr-health-confirm[data-action='reenable']").wait_for()
    assert page.locator("#omr-confirm-heading").inner_text() == "Re-enable pa@main?"
    page.click("#omr-confirm")
    page.wait_for_url("**/admin/")
    page.locator("text=Re-enabled pa@main.").first.wait_for()
    row = page.locator("#omr-health tr[data-connection='pa@main']")
    assert row.get_attribute("data-state") == "healthy"


def test_the_logout_button_is_named_log_out(admin_page: Any):
    page = admin_page
    page.goto("/admin/")
    # the user menu at the sidebar's foot opens the account links
    page.click("div[x-data*='openUserLinks'] > div.cursor-pointer")

    button = page.get_by_role("button", name="Log out", exact=True)
    button.wait_for()
    assert button.count() == 1
    assert page.get_by_role("button", name="Log out logout").count() == 0


def test_the_sidebar_entries_are_named_by_their_labels_alone(admin_page: Any):
    page = admin_page
    page.goto("/admin/")
    sidebar = page.locator("#nav-sidebar")
    for group in ("Upstreams", "Routing", "Operations"):  # collapsed until opened
        # named without its chevron icon, too
        sidebar.get_by_role("heading", name=group, exact=True).click()

    for label, icon in (
        ("Dashboard", "dashboard"),
        ("Providers", "dns"),
        ("Connections", "power"),
        ("Combos", "hub"),
        ("Jobs", "schedule"),
        ("Configuration as code", "code"),
    ):
        link = sidebar.get_by_role("link", name=label, exact=True)
        assert link.count() == 1, label
        # the icon is still drawn, only hidden from the accessibility tree
        assert link.locator("[aria-hidden=true]").inner_text().strip() == icon
        assert sidebar.get_by_role("link", name=f"{icon} {label}").count() == 0


def test_the_jobs_counts_break_between_items_only(gateway: Gateway, admin_page: Any):
    counts = {
        "created": 1200,
        "updated": 34,
        "unchanged": 15200,
        "missing": 3,
        "rejected": 0,
        "skipped_unknown_provider": 42,
    }
    with gateway.db() as conn:
        conn.execute(
            "insert into providers_jobrun (job, started_at, finished_at, outcome, "
            "counts, message, payload_sha256, triggered_by) values ("
            "'sync_models_dev', datetime('now'), datetime('now'), 'success', ?, "
            "'', '', 'beat')",
            (json.dumps(counts),),
        )
    page = admin_page
    page.goto("/admin/providers/jobrun/jobs/")

    items = page.locator("#jobs tr[data-job='sync_models_dev'] td.counts .omr-count")
    assert items.count() == len(counts)
    # an inline box broken across lines has one client rect per line
    lines = items.evaluate_all("els => els.map(e => e.getClientRects().length)")
    assert lines == [1] * len(counts)
    tops = items.evaluate_all("els => els.map(e => e.getBoundingClientRect().top)")
    assert len(set(tops)) > 1  # the column did wrap: between items
    assert int(page.evaluate("document.documentElement.scrollWidth")) <= 1440


def test_staff_without_the_logs_rights_see_no_traffic_links_and_get_the_admins_403(
    browser: Any, gateway: Gateway
):
    staff = admin_user(gateway, "plain-staff", superuser=False)
    with logged_in(browser, gateway, staff) as page:
        sidebar = page.locator("#nav-sidebar")
        assert sidebar.get_by_role("link", name="Explain route").count() == 1
        assert sidebar.get_by_role("link", name="Traffic overview").count() == 0
        assert sidebar.get_by_role("link", name="Live routing").count() == 0
        assert page.locator("a[href='/admin/telemetry/overview/']").count() == 0
        assert page.locator("a[href='/admin/telemetry/live-routing/']").count() == 0

        for url in ("/admin/telemetry/overview/", "/admin/telemetry/live-routing/"):
            response = page.goto(url)
            assert response is not None
            assert response.status == 403
            refused = page.locator("#omr-forbidden")
            assert "You may not open this page" in refused.inner_text()
            assert "telemetry.view_attemptlog" in refused.inner_text()
            assert page.locator("#nav-sidebar").is_visible()  # the admin's frame
