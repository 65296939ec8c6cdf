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

from typing import Any

import httpx
import pytest

from tests.integration.conftest import KEY_ALL

pytestmark = pytest.mark.integration
Gateway = Any  # tests/integration/conftest.py
SLUG = "viapreset"
UPSTREAM_KEY = "sk-upstream-secret-viapreset-1234567890"


def _model_ids(gateway: Gateway) -> set[str]:
    with gateway.db() as conn:
        rows = conn.execute(
            "select m.model_id from providers_providermodel m join providers_provider "
            "p on p.id = m.provider_id where p.slug = ?",
            (SLUG,),
        ).fetchall()
    return {row[0] for row in rows}


def test_add_a_provider_from_a_preset_test_it_and_add_an_upstream_model(
    gateway: Gateway, upstream: Any, admin_page: Any
):
    upstream.add("browser-m1", content="Hello from the browser model.")

    # "Add provider" opens on the preset list; the OpenAI preset fills the form
    admin_page.goto("/admin/providers/provider/")
    admin_page.click("a.addlink")
    admin_page.wait_for_url("**/admin/providers/provider/add/")
    assert admin_page.locator("#presets tr[data-preset='groq']").is_visible()
    admin_page.click("#preset-openai")
    admin_page.wait_for_url("**/add/?preset=openai")
    assert admin_page.input_value("#id_kind") == "openai"
    assert admin_page.input_value("#id_base_url") == "https://api.openai.com/v1"
    assert admin_page.input_value("#id_models_dev_id") == "openai"
    assert admin_page.input_value("#id_preset") == "openai"
    admin_page.fill("#id_slug", SLUG)
    admin_page.fill(
        "#id_base_url", upstream.url
    )  # the mock provider on loopback (…/v1)
    admin_page.click("[name=_continue]")
    admin_page.wait_for_url("**/admin/providers/provider/*/change/**")
    provider_change = admin_page.url

    # a connection with a key; Test connection on its form reports success
    admin_page.goto("/admin/providers/connection/add/")
    admin_page.select_option("#id_provider", label=SLUG)
    admin_page.fill("#id_name", "main")
    admin_page.fill("#id_api_key", UPSTREAM_KEY)
    admin_page.click("[name=_continue]")
    admin_page.wait_for_url("**/admin/providers/connection/*/change/**")
    with admin_page.expect_navigation():  # back to this same form, with the result
        admin_page.click("#test-connection")
    # the theme shows a success message as a green box
    result = admin_page.inner_text("div.bg-green-100").lower()  # capitalised
    assert f"{SLUG}@main: ok, http 200" in result
    listed = [r for r in upstream.requests() if r["path"].endswith("/models")]
    assert listed[-1]["headers"]["authorization"] == f"Bearer {UPSTREAM_KEY}"
    assert UPSTREAM_KEY not in admin_page.content()

    # List upstream models offers what is not configured; add the one ticked
    admin_page.goto(provider_change)
    admin_page.click("text=List upstream models")
    admin_page.wait_for_url("**/discover/")
    assert admin_page.locator("#discovered input[value='mock-small']").count() == 1
    admin_page.check("#discovered input[value='browser-m1']")
    admin_page.click("#discovered input[type=submit]")
    admin_page.wait_for_url("**/admin/providers/provider/*/change/")
    assert "added 1 model(s)" in admin_page.inner_text("div.bg-green-100")
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
