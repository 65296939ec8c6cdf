"""The admin's provider workflow of spec 10 §2 in headless Chromium (Debian's, driven
by Playwright) against the real gateway process and the mock provider on loopback:
"Add provider" starts from the preset list, the chosen preset fills the form (its
base URL replaced by the mock's), a connection is added and "Test connection"
reports success, "List upstream models" offers the mock's ids and adds the one
ticked, which then serves a chat request.

Chromium comes from ``make test`` (apt-get) where it is missing; without it the test
skips, except under ``CI=true`` where it fails.
"""

from __future__ import annotations

import os
import secrets
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
SLUG = "viapreset"
UPSTREAM_KEY = "sk-upstream-secret-viapreset-1234567890"


@pytest.fixture(scope="module")
def operator(gateway: Gateway) -> tuple[str, str]:
    """A superuser with a password (the admin login form needs one)."""
    username, password = "preset-operator", secrets.token_urlsafe(16)
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
    context = browser.new_context(base_url=gateway.url)
    context.set_default_timeout(STEP_TIMEOUT_MS)
    tab = context.new_page()
    tab.goto("/admin/login/?next=/admin/")
    tab.fill("#id_username", operator[0])
    tab.fill("#id_password", operator[1])
    tab.click("#login-form [type=submit]")
    tab.wait_for_url("**/admin/")
    yield tab
    context.close()


def _model_ids(gateway: Gateway) -> set[str]:
    with gateway.db() as conn:
        rows = conn.execute(
            "select m.model_id from providers_providermodel m join providers_provider "
            "p on p.id = m.provider_id where p.slug = ?",
            (SLUG,),
        ).fetchall()
    return {row[0] for row in rows}


def test_add_a_provider_from_a_preset_test_it_and_add_an_upstream_model(
    gateway: Gateway, upstream: Any, page: Any
):
    upstream.add("browser-m1", content="Hello from the browser model.")

    # "Add provider" opens on the preset list; the OpenAI preset fills the form
    page.goto("/admin/providers/provider/")
    page.click("a.addlink")
    page.wait_for_url("**/admin/providers/provider/add/")
    assert page.locator("#presets tr[data-preset='groq']").is_visible()
    page.click("#preset-openai")
    page.wait_for_url("**/add/?preset=openai")
    assert page.input_value("#id_kind") == "openai"
    assert page.input_value("#id_base_url") == "https://api.openai.com/v1"
    assert page.input_value("#id_models_dev_id") == "openai"
    assert page.input_value("#id_preset") == "openai"
    page.fill("#id_slug", SLUG)
    page.fill("#id_base_url", upstream.url)  # the mock provider on loopback (…/v1)
    page.click("[name=_continue]")
    page.wait_for_url("**/admin/providers/provider/*/change/**")
    provider_change = page.url

    # a connection with a key; Test connection on its form reports success
    page.goto("/admin/providers/connection/add/")
    page.select_option("#id_provider", label=SLUG)
    page.fill("#id_name", "main")
    page.fill("#id_api_key", UPSTREAM_KEY)
    page.click("[name=_continue]")
    page.wait_for_url("**/admin/providers/connection/*/change/**")
    with page.expect_navigation():  # back to this same form, with the result
        page.click("#test-connection")
    # the theme shows a success message as a green box
    result = page.inner_text("div.bg-green-100").lower()  # capitalised
    assert f"{SLUG}@main: ok, http 200" in result
    listed = [r for r in upstream.requests() if r["path"].endswith("/models")]
    assert listed[-1]["headers"]["authorization"] == f"Bearer {UPSTREAM_KEY}"
    assert UPSTREAM_KEY not in page.content()

    # List upstream models offers what is not configured; add the one ticked
    page.goto(provider_change)
    page.click("text=List upstream models")
    page.wait_for_url("**/discover/")
    assert page.locator("#discovered input[value='mock-small']").count() == 1
    page.check("#discovered input[value='browser-m1']")
    page.click("#discovered input[type=submit]")
    page.wait_for_url("**/admin/providers/provider/*/change/")
    assert "added 1 model(s)" in page.inner_text("div.bg-green-100")
    assert _model_ids(gateway) == {"browser-m1"}

    # the model added from the upstream's list serves
    gateway.wait_for_version(gateway.config_version())
    answer = httpx.post(
        f"{gateway.url}/v1/chat/completions",
        headers={"Authorization": f"Bearer {KEY_ALL}"},
        json={
            "model": f"{SLUG}/browser-m1",
            "messages": [{"role": "user", "content": "hi"}],
        },
        timeout=30,
    )
    assert answer.status_code == 200, answer.text
    assert answer.json()["choices"][0]["message"]["content"] == (
        "Hello from the browser model."
    )
