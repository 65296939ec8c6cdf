"""Messages ``thinking`` as the canonical ``reasoning_effort`` (spec 09 §2.6) and as
its exact budget (``thinking_budget``, for Gemini's ``thinkingBudget``)."""

from __future__ import annotations

import orjson
import pytest

from gateway.dialects.gemini import THINKING_BUDGET_FIELD
from gateway.inbound.messages import (
    ADAPTIVE_BUDGET,
    THINKING_BUDGET,
    parse_messages_request,
    thinking_budget,
    thinking_effort,
)


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


@pytest.mark.parametrize(
    ("thinking", "budget"),
    [
        (None, None),
        ({"type": "enabled", "budget_tokens": 3000}, 3000),
        ({"type": "enabled", "budget_tokens": 20000}, 20000),
        ({"type": "enabled"}, None),  # the effort alone ("medium") says it
        ({"type": "enabled", "budget_tokens": 0}, None),
        ({"type": "enabled", "budget_tokens": True}, None),
        ({"type": "enabled", "budget_tokens": "3000"}, None),
        ({"type": "disabled"}, 0),
        ({"type": "adaptive"}, ADAPTIVE_BUDGET),
        ({"type": "other", "budget_tokens": 3000}, None),
        ("on", None),
    ],
)
def test_thinking_carries_its_exact_budget(thinking, budget):
    assert thinking_budget(thinking) == budget


def _request(thinking):
    body = {
        "model": "gm/g1",
        "max_tokens": 32000,
        "messages": [{"role": "user", "content": "hi"}],
        "thinking": thinking,
    }
    return parse_messages_request(orjson.dumps(body), {})


def test_the_budget_rides_beside_the_effort_and_only_to_gemini_dialects():
    request = _request({"type": "enabled", "budget_tokens": 20000})
    assert request.body["reasoning_effort"] == "high"
    assert request.body["thinking_budget"] == 20000
    assert THINKING_BUDGET in request.conditional
    assert THINKING_BUDGET.field == THINKING_BUDGET_FIELD  # the field Gemini reads
    assert THINKING_BUDGET.dialects == {"gemini/chat", "vertex/chat"}
    # never named: it only refines the effort (which is named where it is left out)
    assert THINKING_BUDGET.path == ""
    assert request.original["thinking"] == {"type": "enabled", "budget_tokens": 20000}


def test_disabled_thinking_carries_a_zero_budget_and_no_effort():
    request = _request({"type": "disabled"})
    assert "reasoning_effort" not in request.body
    assert request.body["thinking_budget"] == 0
    assert THINKING_BUDGET in request.conditional


def test_no_thinking_carries_no_budget():
    body = {
        "model": "gm/g1",
        "max_tokens": 5,
        "messages": [{"role": "user", "content": "hi"}],
    }
    request = parse_messages_request(orjson.dumps(body), {})
    assert "thinking_budget" not in request.body
    assert THINKING_BUDGET not in request.conditional
