"""Behaviour fixes of the console audit (issue #15) in headless Chromium, with the
console fixtures of ``conftest`` (``admin_page``): an uploaded YAML file with a
change applies after its preview (the browser sends the previewed text back with
CRLF line ends)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

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
