"""The operator's console (issue #15) in headless Chromium, against the real gateway
process and the mock provider on loopback, with traffic and a failure: the
dashboard's health board lists the failing connection first and re-enables it; a
smart alias that shadows a live combo needs its confirmation; the YAML download
round-trips through the upload's dry run; the playground sends a real request.

Chromium comes from ``make test`` (apt-get) where it is missing; without it the test
skips, except under ``CI=true`` where it fails.
"""

from __future__ import annotations

import os
import secrets
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from playwright.sync_api import sync_playwright

from tests.integration.conftest import KEY_ALL
from tests.services import unavailable

pytestmark = pytest.mark.integration
Gateway = Any  # tests/integration/conftest.py
CHROMIUM = Path(os.environ.get("OMNIROUTE_CHROMIUM", "/usr/bin/chromium"))
STEP_TIMEOUT_MS = 15_000


@pytest.fixture(scope="module")
def operator(gateway: Gateway) -> tuple[str, str]:
    """A superuser with a password (the admin login form needs one)."""
    username, password = "console-operator", secrets.token_urlsafe(16)
    code = (
        "from django.contrib.auth.models import User\n"
        f"User.objects.filter(username={username!r}).delete()\n"
        f"User.objects.create_superuser({username!r}, 'op@example.com', "
        f"{password!r})\n"
    )
    result = gateway.manage("shell", "-c", code)
    assert result.returncode == 0, result.stderr
    return username, password


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    if not CHROMIUM.exists():
        unavailable(f"Chromium is missing at {CHROMIUM} (make test installs it)")
    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(
            executable_path=str(CHROMIUM), headless=True, args=["--no-sandbox"]
        )
        yield chromium
        chromium.close()


@pytest.fixture
def page(browser: Any, gateway: Gateway, operator: tuple[str, str]) -> Iterator[Any]:
    context = browser.new_context(
        base_url=gateway.url, viewport={"width": 1440, "height": 900}
    )
    context.set_default_timeout(STEP_TIMEOUT_MS)
    tab = context.new_page()
    tab.goto("/admin/login/?next=/admin/")
    tab.fill("#id_username", operator[0])
    tab.fill("#id_password", operator[1])
    tab.click("#login-form [type=submit]")
    tab.wait_for_url("**/admin/")
    yield tab
    context.close()


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
    gateway: Gateway, upstream: Any, page: Any
):
    upstream.add("m1", status=401, times=1)  # pa@main: auth-disabled
    assert _chat(gateway, ["pa/m1", "pb/m2"]).status_code == 200

    page.goto("/admin/")
    first = page.locator("#omr-health tbody tr").first
    assert first.get_attribute("data-connection") == "pa@main"
    assert first.get_attribute("data-state") == "auth_disabled"
    assert "left" in first.locator("time").first.inner_text()
    assert page.locator("#omr-unhealthy-count").inner_text() == "1 unhealthy"
    assert "requests" in page.locator("#omr-traffic").inner_text()

    first.locator("button.omr-reenable").click()
    page.wait_for_url("**/admin/")
    row = page.locator("#omr-health tr[data-connection='pa@main']")
    assert row.get_attribute("data-state") == "healthy"


def test_a_smart_alias_shadowing_a_live_combo_needs_its_confirmation(
    gateway: Gateway, page: Any
):
    page.goto("/admin/combos/smartroute/add/")
    page.fill("#id_alias", "team")  # the live combo of the base config
    page.fill("#id_easy", "pa/m1")
    page.fill("#id_hard", "pb/m2")
    page.click("[name=_save]")

    error = page.locator("text=is also the live combo team")
    error.wait_for()
    assert "asked for" in error.inner_text()
    page.check("#id_confirm_shadow")
    page.click("[name=_save]")
    page.wait_for_url("**/admin/combos/smartroute/")
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
    gateway: Gateway, page: Any, tmp_path: Path
):
    page.goto("/admin/config/")
    with page.expect_download() as download:
        page.click("#config-download")
    saved = tmp_path / "omniroute.yaml"
    download.value.save_as(saved)
    text = saved.read_text(encoding="utf-8")
    assert "sk-upstream-secret" not in text  # secrets as *** or env: refs
    assert "providers:" in text

    page.set_input_files("#id_file", str(saved))
    page.click("#config-preview-button")
    page.locator("#config-no-changes").wait_for()
    assert page.locator("#config-apply-button").count() == 0


def test_the_playground_sends_a_real_request_and_shows_its_attempts(
    gateway: Gateway, upstream: Any, page: Any
):
    page.goto("/admin/playground/?model=team")
    page.select_option("#id_key", "all")
    page.click("#playground-send")
    page.locator("#playground-status").wait_for()
    assert page.locator("#playground-status").inner_text() == "HTTP 200"
    assert page.locator("#playground-attempts tbody tr[data-result='success']").count()
    assert page.locator("#playground-log-link").count() == 1
