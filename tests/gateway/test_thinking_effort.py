"""Messages ``thinking`` as the canonical ``reasoning_effort`` (spec 09 §2.6)."""

from __future__ import annotations

import pytest

from gateway.inbound.messages import thinking_effort


@pytest.mark.parametrize(
    ("thinking", "effort"),
    [
        (None, None),
        ({"type": "disabled"}, None),
        ({"type": "enabled", "budget_tokens": 1024}, "low"),
        ({"type": "enabled", "budget_tokens": 4095}, "low"),
        ({"type": "enabled", "budget_tokens": 4096}, "medium"),
        ({"type": "enabled", "budget_tokens": 16384}, "high"),
        ({"type": "enabled"}, "medium"),
        ({"type": "adaptive"}, "medium"),
        ("on", None),
    ],
)
def test_thinking_maps_to_an_effort_by_budget(thinking, effort):
    assert thinking_effort(thinking) == effort
