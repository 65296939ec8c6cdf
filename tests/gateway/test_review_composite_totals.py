"""Review: a composite slot's request totals follow spec 06 §1.1 like any other
request: tokens summed over every attempt that reported usage (a failed panel
member's and an earlier slot's included), cost over the billable attempts."""

from __future__ import annotations

import time
import uuid
from decimal import Decimal
from types import SimpleNamespace

from gateway.composite import Composite
from gateway.engine.failover import Item
from gateway.engine.types import (
    ConnectionInfo,
    KeyPolicy,
    ModelInfo,
    ProviderInfo,
    ProviderKind,
    Target,
)
from gateway.outcome import RunRecord


def _target(slug: str, model: str) -> Target:
    return Target(
        provider=ProviderInfo(
            slug=slug, kind=ProviderKind("openai"), base_url="https://x.example/v1"
        ),
        model=ModelInfo(provider=slug, model_id=model, input_cost=1.0, output_cost=2.0),
        connection=ConnectionInfo(provider=slug, name="main"),
    )


def _usage(prompt: int, completion: int) -> SimpleNamespace:
    usage = {"prompt_tokens": prompt, "completion_tokens": completion}
    return SimpleNamespace(usage=usage, error=None, completion=None)


def _item(model: str, status: str) -> Item:
    return Item(model=model, slot=0, via=None, status=status, latency_ms=10)


def test_settling_a_fusion_keeps_the_tokens_of_every_reporting_attempt():
    run = RunRecord.start(
        uuid.uuid4(),
        "/v1/chat/completions",
        KeyPolicy(id=1, name="k", prefix="sk-or-k"),
        1,
        received_at=1_750_000_000.0,
        started=time.perf_counter(),
    )
    panel, judge = _target("pa", "m1"), _target("pb", "m2")
    # a panel member that answered unusably (usage reported, not billed)
    run.add_attempt(panel, _item("pa/m1", "failed"), 1.0, _usage(100, 5))
    billed = []
    for target, usage in ((panel, _usage(100, 50)), (judge, _usage(300, 20))):
        run.add_attempt(
            target, _item(target.model_key, "served"), 2.0, usage, billable=True
        )
        billed.append(run.attempts[-1])
    composite = SimpleNamespace(billed_rows=billed, loop=SimpleNamespace(rec=run))

    Composite._sum_totals(composite)  # type: ignore[arg-type]

    assert (run.prompt_tokens, run.completion_tokens) == (500, 75)
    assert run.cost == Decimal("0.00054")  # the billable calls only
