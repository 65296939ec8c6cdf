"""Behaviour fixes of the console audit (issue #15) in headless Chromium, with the
fixtures of ``test_console_browser``: an uploaded YAML file applies after its
preview, and the combo editor marks only the cell an error names."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.integration import test_console_browser as console

pytestmark = pytest.mark.integration
Gateway = Any  # tests/integration/conftest.py
UPLOADED_COMBO = "uploaded-in-browser"
# the console test's fixtures: Chromium, a logged-in superuser's tab
browser, operator, page = console.browser, console.operator, console.page


@pytest.fixture
def forget_uploaded_combo(gateway: Gateway) -> Iterator[None]:
    yield
    code = (
        "from combos.models import Combo\n"
        f"Combo.objects.filter(name={UPLOADED_COMBO!r}).delete()\n"
    )
    assert gateway.manage("shell", "-c", code).returncode == 0


def test_an_uploaded_file_with_a_change_applies_after_its_preview(
    gateway: Gateway, page: Any, tmp_path: Path, forget_uploaded_combo: None
):
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


def test_the_combo_editor_marks_only_the_cell_an_error_names(
    gateway: Gateway, page: Any
):
    page.goto("/admin/combos/combo/add/")
    page.fill("#id_name", "cell-marks")
    page.select_option("#id_strategy", "priority")
    page.click("text=Add target")
    page.click("text=Add target")
    targets = page.locator("table.combo-targets input[data-cell='target']")
    targets.nth(0).fill("pa/m1")
    targets.nth(1).fill("nosuch/m9")
    page.click("[name=_save]")

    page.locator("text=targets (row 2).model: unknown provider 'nosuch'").wait_for()
    marked = page.locator("table.combo-targets .omr-cell-error")
    assert marked.count() == 1
    assert marked.get_attribute("data-cell") == "target"
    assert marked.input_value() == "nosuch/m9"
    row = page.locator("table.combo-targets tr[data-row='2']")
    assert row.locator(".omr-cell-error").count() == 1
    marked.fill("pb/m2")  # editing the cell clears its mark
    assert page.locator("table.combo-targets .omr-cell-error").count() == 0
