"""The request row's totals (spec 06 §1.1): tokens summed over every attempt that
reported usage, cost summed over the billable attempts (what the key is charged),
for a composite slot too (a failed panel member's and an earlier slot's tokens)."""

from __future__ import annotations

import time
import uuid
from decimal import Decimal
from types import SimpleNamespace

from gateway.kernel.failover import Item
from gateway.kernel.types import (
    ConnectionInfo,
    KeyPolicy,
    ModelInfo,
    ProviderInfo,
    Target,
)
from gateway.pipeline.record import RunRecord
from gateway.slots.composite import Composite


def _target(slug: str, model: str) -> Target:
    return Target(
        provider=ProviderInfo(
            slug=slug, kind="openai", base_url="https://x.example/v1"
        ),
        model=ModelInfo(provider=slug, model_id=model, input_cost=1.0, output_cost=2.0),
        connection=ConnectionInfo(provider=slug, name="main"),
    )


def _usage(prompt: int, completion: int) -> SimpleNamespace:
    usage = {"prompt_tokens": prompt, "completion_tokens": completion}
    return SimpleNamespace(usage=usage, error=None, completion=None)


def _item(model: str, status: str) -> Item:
    return Item(model=model, slot=0, via=None, status=status, latency_ms=10)


def _run() -> RunRecord:
    return RunRecord.start(
        uuid.uuid4(),
        "/v1/chat/completions",
        KeyPolicy(id=1, name="k", prefix="sk-or-k"),
        1,
        received_at=1_750_000_000.0,
        started=time.perf_counter(),
    )


def test_tokens_sum_every_reporting_attempt_and_cost_the_billable_ones():
    run = _run()
    panel, judge = _target("pa", "m1"), _target("pb", "m2")
    run.add_attempt(panel, _item("pa/m1", "failed"), 1.0, _usage(100, 5))
    run.add_attempt(
        panel, _item("pa/m1", "served"), 2.0, _usage(100, 50), billable=True
    )
    run.add_attempt(
        judge, _item("pb/m2", "served"), 3.0, _usage(300, 20), billable=True
    )

    assert (run.prompt_tokens, run.completion_tokens) == (500, 75)
    # (100 x 1 + 50 x 2) / 1e6 + (300 x 1 + 20 x 2) / 1e6: the failed call is not billed
    assert run.cost == Decimal("0.00054")
    costs = [a["cost_usd"] for a in run.attempts]
    assert costs[0] is not None  # the failed call's own cost stays on its attempt row


def test_no_priced_billable_attempt_leaves_the_cost_null():
    run = _run()
    unpriced = Target(
        provider=ProviderInfo(
            slug="pc", kind="openai", base_url="https://x.example/v1"
        ),
        model=ModelInfo(provider="pc", model_id="m3"),
        connection=ConnectionInfo(provider="pc", name="main"),
    )
    run.add_attempt(
        unpriced, _item("pc/m3", "served"), 1.0, _usage(10, 10), billable=True
    )
    assert run.cost is None
    assert (run.prompt_tokens, run.completion_tokens) == (10, 10)


def test_settling_a_fusion_keeps_the_tokens_of_every_reporting_attempt():
    run = _run()
    panel, judge = _target("pa", "m1"), _target("pb", "m2")
    # a panel member that answered unusably (usage reported, not billed)
    run.add_attempt(panel, _item("pa/m1", "failed"), 1.0, _usage(100, 5))
    billed = []
    for target, usage in ((panel, _usage(100, 50)), (judge, _usage(300, 20))):
        run.add_attempt(
            target, _item(target.model_key, "served"), 2.0, usage, billable=True
        )
        billed.append(run.attempts[-1])
    composite = SimpleNamespace(billed_rows=billed, run=SimpleNamespace(rec=run))

    Composite.sum_totals(composite)  # type: ignore[arg-type]

    assert (run.prompt_tokens, run.completion_tokens) == (500, 75)
    assert run.cost == Decimal("0.00054")  # the billable calls only
