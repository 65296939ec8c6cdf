"""Gemini's ``thinkingConfig`` from a client's exact thinking budget (the Messages
wire's ``thinking``, carried as the canonical ``thinking_budget``) and from a
``reasoning_effort`` level, clamped to what each model family takes.  Pure: no
server."""

from __future__ import annotations

import pytest

from gateway.dialects.gemini import GeminiDialect, thinking_range
from gateway.dialects.vertex import VertexDialect
from gateway.kernel.types import Auth

BASE_URL = "https://generativelanguage.googleapis.com"
PRO = "gemini-2.5-pro"
FLASH = "gemini-2.5-flash"
LITE = "gemini-2.5-flash-lite"


def thinking(model: str, **fields) -> dict | None:
    body = {"messages": [{"role": "user", "content": "Hi"}], **fields}
    call = GeminiDialect().build_request(
        base_url=BASE_URL, api_key="k", model=model, body=body, stream=False
    )
    return call.body.get("generationConfig", {}).get("thinkingConfig")


def shown(budget: int) -> dict:
    return {"thinkingBudget": budget, "includeThoughts": True}


@pytest.mark.parametrize(
    ("model", "low", "high"),
    [
        (PRO, 128, 32768),
        ("gemini-2.5-pro-preview-06-05", 128, 32768),
        (FLASH, 1, 24576),
        ("models/gemini-2.5-flash-preview-05-20", 1, 24576),
        (LITE, 512, 24576),
        ("Gemini-2.5-Flash-Lite", 512, 24576),
        ("gemini-3-pro-preview", 128, 32768),
        ("g1", 512, 24576),
    ],
)
def test_each_family_has_its_range(model, low, high):
    assert thinking_range(model) == (low, high)


@pytest.mark.parametrize(
    ("model", "budget", "sent"),
    [
        (FLASH, 3000, 3000),  # not the effort bucket (medium, 8192)
        (FLASH, 20000, 20000),  # not high's 24576
        (FLASH, 30000, 24576),
        (PRO, 30000, 30000),
        (PRO, 64000, 32768),
        (PRO, 100, 128),
        (LITE, 200, 512),
        (LITE, 1024, 1024),
        ("g1", 32000, 24576),
        ("g1", 100, 512),
    ],
)
def test_an_exact_budget_goes_as_it_is_within_the_model_s_range(model, budget, sent):
    assert thinking(model, reasoning_effort="medium", thinking_budget=budget) == shown(
        sent
    )


def test_an_exact_budget_is_fitted_under_max_output_tokens():
    fitted = thinking(
        FLASH, reasoning_effort="high", thinking_budget=9000, max_tokens=5000
    )
    assert fitted == shown(4999)
    # no room for the model's lowest budget: the model's default
    assert (
        thinking(LITE, reasoning_effort="low", thinking_budget=1024, max_tokens=300)
        is None
    )


def test_an_exact_budget_goes_only_with_an_effort():
    """A model known not to reason gets no ``reasoning_effort`` (the Messages
    ``thinking`` is named and left out): its exact budget is not sent either."""
    assert thinking(FLASH, thinking_budget=3000) is None
    assert thinking(FLASH, reasoning_effort="none", thinking_budget=3000) is None


def test_adaptive_thinking_lets_the_model_decide():
    assert thinking(PRO, reasoning_effort="medium", thinking_budget=-1) == shown(-1)


@pytest.mark.parametrize(
    ("model", "config"),
    [
        (FLASH, {"thinkingBudget": 0}),
        ("gemini-2.5-flash-preview-09-2025", {"thinkingBudget": 0}),
        (LITE, {"thinkingBudget": 0}),
        (PRO, {"thinkingBudget": 128}),  # 2.5 Pro cannot stop thinking: the least
        ("gemini-2.0-flash", None),  # no thinking model: no thinkingConfig at all
        ("gemini-3-pro-preview", None),
        ("g1", None),
    ],
)
def test_thinking_off_is_a_zero_budget_where_the_model_takes_one(model, config):
    assert thinking(model, thinking_budget=0) == config


def test_thinking_off_wins_over_an_effort_another_source_set():
    assert thinking(FLASH, reasoning_effort="high", thinking_budget=0) == {
        "thinkingBudget": 0
    }


@pytest.mark.parametrize(
    ("model", "effort", "sent"),
    [
        (FLASH, "low", 1024),
        (FLASH, "xhigh", 24576),  # Flash takes at most 24576
        (PRO, "xhigh", 32768),
        (LITE, "minimal", 512),
        (FLASH, "none", None),
        (FLASH, "unknown", None),
    ],
)
def test_an_effort_level_is_a_budget_by_level_within_the_range(model, effort, sent):
    expected = shown(sent) if sent is not None else None
    assert thinking(model, reasoning_effort=effort) == expected


@pytest.mark.parametrize("value", [True, "4000", 4000.0, None])
def test_a_budget_that_is_not_an_integer_leaves_the_effort_to_decide(value):
    assert thinking(FLASH, reasoning_effort="low", thinking_budget=value) == shown(1024)


def test_vertex_gemini_takes_the_exact_budget_for_its_model():
    body = {
        "messages": [{"role": "user", "content": "Hi"}],
        "reasoning_effort": "high",
        "thinking_budget": 5000,
    }
    auth = Auth(kind="vertex", settings={"project": "p", "region": "global"}, token="t")
    call = VertexDialect().build_request(
        base_url="https://aiplatform.googleapis.com",
        api_key=None,
        model=LITE,
        body=body,
        stream=False,
        auth=auth,
    )
    assert call.body["generationConfig"]["thinkingConfig"] == shown(5000)
    off = {**body, "thinking_budget": 0}
    call = VertexDialect().build_request(
        base_url="https://aiplatform.googleapis.com",
        api_key=None,
        model=FLASH,
        body=off,
        stream=False,
        auth=auth,
    )
    assert call.body["generationConfig"]["thinkingConfig"] == {"thinkingBudget": 0}
