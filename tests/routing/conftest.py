"""Builders for auto-engine tests: compact arguments in, frozen routing values out.

``pool_p`` is Pool P of spec 04 §11: three candidates whose inputs reproduce the
example's factors (every window large enough for contextAffinity 1, every 24 h row
all-success, one connection per provider, no cache key).
"""

from __future__ import annotations

from typing import Any

import pytest

from gateway.auto.engine.scoring import rank, score_pool
from gateway.auto.engine.types import CandidateInput, RequestFeatures
from gateway.auto.engine.weights import DEFAULT_WEIGHTS

A_KEY = "openai/gpt-5-nano@main"
B_KEY = "anthropic/claude-sonnet-4@main"
C_KEY = "google/gemini-2.5-flash@free"

#: §11 request: a Python code fence, est_in 500, max_tokens 1000, R 1500
POOL_P_REQUEST = RequestFeatures(
    task_type="coding", need_tokens=1500, est_in=500, est_out=1000
)


def _input(key: str, order: int = 0, **fields: Any) -> CandidateInput:
    provider, _, rest = key.partition("/")
    model, _, connection = rest.partition("@")
    return CandidateInput(
        key=key,
        provider=provider,
        model=model,
        connection=connection,
        order=order,
        **fields,
    )


@pytest.fixture
def make_input():
    """``make_input("p/m@c", order, **CandidateInput fields)``."""
    return _input


def _pool_p() -> tuple[CandidateInput, CandidateInput, CandidateInput]:
    shared = {"good_rate": 1.0, "failure_rate": 0.0, "context_window": 200_000}
    a = _input(
        A_KEY,
        0,
        input_cost=0.05,
        output_cost=0.40,
        p95_ms=2000,
        std_ms=500,
        quota_pct=40,
        circuit="closed",
        account_tier="pro",
        capabilities=frozenset({"tools", "json"}),
        fitness=0.65,
        **shared,
    )
    b = _input(
        B_KEY,
        1,
        input_cost=3.00,
        output_cost=15.00,
        p95_ms=1600,
        std_ms=200,
        quota_pct=100,
        circuit="closed",
        account_tier="ultra",
        capabilities=frozenset({"tools", "reasoning", "json"}),
        fitness=0.95,
        **shared,
    )
    c = _input(
        C_KEY,
        2,
        input_cost=0.30,
        output_cost=2.50,
        p95_ms=800,
        std_ms=400,
        quota_pct=90,
        circuit="half_open",
        account_tier="free",
        capabilities=frozenset({"tools", "json"}),
        fitness=0.82,
        **shared,
    )
    return a, b, c


@pytest.fixture
def pool_p():
    """(A, B, C) of Pool P as CandidateInputs."""
    return _pool_p()


@pytest.fixture
def ranked_p():
    """Pool P scored under ``weights`` (default: DEFAULT_WEIGHTS) and ranked."""

    def build(weights=DEFAULT_WEIGHTS, req=POOL_P_REQUEST):
        return rank(score_pool(_pool_p(), weights, req))

    return build
