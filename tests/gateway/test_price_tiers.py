"""Catalog context tiers bill a whole attempt (spec 06 §1.3: ``gemini-2.5-pro`` at
P = 250 000 bills 2.5 / 15)."""

from __future__ import annotations

from decimal import Decimal

from gateway.kernel.types import ModelInfo, PriceTier
from gateway.pipeline.accounting import cost_usd
from providers.catalog import CatalogFacts, fill_model_info, price_tiers

GEMINI_TIERS = [
    {"type": "context", "size": 200_000, "input": 2.5, "output": 15, "cache_read": 0.25}
]


def _gemini(**fields) -> ModelInfo:
    facts = CatalogFacts(
        input_cost=1.25,
        output_cost=10.0,
        cache_read_cost=0.125,
        price_tiers=price_tiers(GEMINI_TIERS),
    )
    return fill_model_info(
        ModelInfo(provider="google", model_id="gemini-2.5-pro", **fields), facts
    )


def test_the_spec_example_bills_the_tier_prices() -> None:
    assert cost_usd(_gemini(), (250_000, 1_000, 0, 0)) == Decimal("0.64")


def test_a_prompt_at_the_tier_size_keeps_the_base_prices() -> None:
    # 200 000 × 1.25 + 1 000 × 10, per million
    assert cost_usd(_gemini(), (200_000, 1_000, 0, 0)) == Decimal("0.26")


def test_cached_tokens_use_the_tiers_cache_price() -> None:
    # (250 000 − 50 000) × 2.5 + 50 000 × 0.25 + 0 × 15, per million
    assert cost_usd(_gemini(), (250_000, 0, 50_000, 0)) == Decimal("0.5125")


def test_the_largest_exceeded_tier_applies() -> None:
    model = ModelInfo(
        provider="p",
        model_id="m",
        input_cost=1.0,
        output_cost=1.0,
        price_tiers=(
            PriceTier(size=100, input_cost=2.0, output_cost=2.0),
            PriceTier(size=1_000, input_cost=3.0, output_cost=3.0),
        ),
    )
    assert cost_usd(model, (1_001, 0, 0, 0)) == Decimal("0.003003")
    assert cost_usd(model, (1_000, 0, 0, 0)) == Decimal("0.002")


def test_an_operator_price_is_the_whole_price() -> None:
    model = _gemini(input_cost=1.0, output_cost=2.0)
    assert model.price_tiers == ()
    assert cost_usd(model, (250_000, 1_000, 0, 0)) == Decimal("0.252")


def test_tiers_other_than_context_or_without_prices_are_skipped() -> None:
    raw = [
        {"type": "batch", "size": 10, "input": 1, "output": 1},
        {"type": "context", "size": 10, "input": 1},
        {"type": "context", "size": 20, "input": 1, "output": True},
        "junk",
        {"type": "context", "size": 5, "input": 1, "output": 2},
    ]
    assert price_tiers(raw) == (PriceTier(size=5, input_cost=1.0, output_cost=2.0),)
