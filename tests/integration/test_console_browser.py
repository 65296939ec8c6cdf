"""The operator's console (issue #15) in headless Chromium, against the real gateway
process and the mock provider on loopback, with traffic and a failure: the
dashboard's health board lists the failing connection first and re-enables it; a
smart alias that shadows a live combo needs its confirmation; the YAML download
round-trips through the upload's dry run; the playground sends a real request.

Chromium comes from ``make test`` (apt-get) where it is missing; without it the test
skips, except under ``CI=true`` where it fails.
"""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.integration.conftest import KEY_ALL

pytestmark = pytest.mark.integration
Gateway = Any  # tests/integration/conftest.py


def _chat(gateway: Gateway, models: list[str]) -> httpx.Response:
    return httpx.post(
        f"{gateway.url}/v1/chat/completions",
        headers={"Authorization": f"Bearer {KEY_ALL}"},
        json={
            "models": models,
            "messages": [{"role": "user", "content": uuid.uuid4().hex}],
        },
        timeout=30,
    )


def test_the_health_board_lists_the_failing_connection_first_and_reenables_it(
    gateway: Gateway, upstream: Any, admin_page: Any
):
    upstream.add("m1", status=401, times=1)  # pa@main: auth-disabled
    assert _chat(gateway, ["pa/m1", "pb/m2"]).status_code == 200

    admin_page.goto("/admin/")
    first = admin_page.locator("#omr-health tbody tr").first
    assert first.get_attribute("data-connection") == "pa@main"
    assert first.get_attribute("data-state") == "auth_disabled"
    assert "left" in first.locator("time").first.inner_text()
    assert admin_page.locator("#omr-unhealthy-count").inner_text() == "1 unhealthy"
    assert "requests" in admin_page.locator("#omr-traffic").inner_text()

    first.locator("button.omr-reenable").click()
    admin_page.locator("#omr-health-confirm[data-connection='pa@main']").wait_for()
    admin_page.click("#omr-confirm")
    admin_page.wait_for_url("**/admin/")
    row = admin_page.locator("#omr-health tr[data-connection='pa@main']")
    assert row.get_attribute("data-state") == "healthy"


def test_a_smart_alias_shadowing_a_live_combo_needs_its_confirmation(
    gateway: Gateway, admin_page: Any
):
    admin_page.goto("/admin/combos/smartroute/add/")
    admin_page.fill("#id_alias", "team")  # the live combo of the base config
    admin_page.fill("#id_easy", "pa/m1")
    admin_page.fill("#id_hard", "pb/m2")
    admin_page.click("[name=_save]")

    error = admin_page.locator("text=is also the live combo team")
    error.wait_for()
    assert "asked for" in error.inner_text()
    admin_page.check("#id_confirm_shadow")
    admin_page.click("[name=_save]")
    admin_page.wait_for_url("**/admin/combos/smartroute/")
    removed = gateway.manage(
        "shell",
        "-c",
        "from combos import services\n"
        "from combos.models import SmartRoute\n"
        "services.delete_instance(SmartRoute.objects.get(alias='team'))\n",
    )
    assert removed.returncode == 0, removed.stderr  # it was saved; now it is gone
    gateway.wait_for_version(gateway.config_version())


def test_the_yaml_download_round_trips_through_the_upload_dry_run(
    gateway: Gateway, admin_page: Any, tmp_path: Path
):
    admin_page.goto("/admin/config/")
    with admin_page.expect_download() as download:
        admin_page.click("#config-download")
    saved = tmp_path / "omniroute.yaml"
    download.value.save_as(saved)
    text = saved.read_text(encoding="utf-8")
    assert "sk-upstream-secret" not in text  # secrets as *** or env: refs
    assert "providers:" in text

    admin_page.set_input_files("#id_file", str(saved))
    admin_page.click("#config-preview-button")
    admin_page.locator("#config-no-changes").wait_for()
    assert admin_page.locator("#config-apply-button").count() == 0


def test_the_playground_sends_a_real_request_and_shows_its_attempts(
    gateway: Gateway, upstream: Any, admin_page: Any
):
    admin_page.goto("/admin/playground/?model=team")
    admin_page.select_option("#id_key", "all")
    admin_page.click("#playground-send")
    admin_page.locator("#playground-status").wait_for()
    assert admin_page.locator("#playground-status").inner_text() == "HTTP 200"
    assert admin_page.locator(
        "#playground-attempts tbody tr[data-result='success']"
    ).count()
    assert admin_page.locator("#playground-log-link").count() == 1
