"""The start-up refusal (spec 08 §1) agrees with ``manage.py check``: a check the
settings silence (``SILENCED_SYSTEM_CHECKS``) stops neither of them."""

from __future__ import annotations

import pytest
from django.core import checks

from gateway.edge import lifecycle


def test_a_silenced_check_does_not_refuse_the_startup(monkeypatch, settings):
    def failing(**kwargs):
        return [checks.Error("session headers name credentials", id="omniroute.E010")]

    monkeypatch.setattr(checks, "run_checks", failing)
    settings.SILENCED_SYSTEM_CHECKS = ["omniroute.E010"]
    lifecycle.refuse_on_failed_checks()  # manage.py check passes too

    settings.SILENCED_SYSTEM_CHECKS = []
    with pytest.raises(RuntimeError, match=r"omniroute\.E010"):
        lifecycle.refuse_on_failed_checks()
