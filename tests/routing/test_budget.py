"""Budget headers, the cost estimate and filter F10 (spec 04 §5.2, §11 example 5)."""

import pytest

from gateway.auto.engine.budget import (
    BudgetHeaderError,
    apply_budget,
    estimate_cost,
    parse_budget,
    parse_fallback,
)
from gateway.auto.engine.scoring import rank, score_pool
from gateway.auto.engine.types import RequestFeatures
from gateway.auto.engine.weights import DEFAULT_WEIGHTS


def keys(items):
    return [s.key.split("/")[0] for s in items]  # provider is enough in Pool P


# --- §11 example 5 --------------------------------------------------------------------


def test_example_5_estimated_costs(ranked_p):
    costs = {s.key.split("/")[0]: s.est_cost_usd for s in ranked_p()}

    assert f"{costs['openai']:.6f}" == "0.000425"
    assert f"{costs['anthropic']:.6f}" == "0.016500"
    assert f"{costs['google']:.6f}" == "0.002650"


def test_example_5_a_cap_of_0_01_drops_b_and_keeps_rank_order(ranked_p):
    result = apply_budget(ranked_p(), parse_budget("0.01"), "cheapest")

    assert keys(result.eligible) == ["google", "openai"]
    assert [round(s.score, 4) for s in result.eligible] == [0.6435, 0.6113]
    assert result.outcome == "within"
    assert result.message is None
    assert result.explorable is True


def test_example_5_strict_rejects_with_the_402_message(ranked_p):
    result = apply_budget(ranked_p(), parse_budget("0.0004"), parse_fallback("strict"))

    assert result.outcome == "rejected"
    assert result.eligible == []
    assert result.message == (
        "No candidate fits the budget of $0.000400 per request "
        "(cheapest: openai/gpt-5-nano@main at $0.000425)"
    )


def test_example_5_cheapest_orders_everyone_by_estimated_cost(ranked_p):
    result = apply_budget(ranked_p(), parse_budget("0.0004"), "cheapest")

    assert keys(result.eligible) == ["openai", "google", "anthropic"]
    assert result.outcome == "cheapest"
    assert result.explorable is False
    assert result.message is None


def test_example_5_abc_is_an_invalid_budget():
    with pytest.raises(BudgetHeaderError, match="abc"):
        parse_budget("abc")


def test_no_cap_keeps_the_ranking(ranked_p):
    ranked = ranked_p()

    result = apply_budget(ranked, None, "strict")

    assert result.eligible == ranked
    assert result.outcome == "none"


def test_a_cost_equal_to_the_cap_fits(ranked_p):
    ranked = ranked_p()
    a = next(s for s in ranked if s.key.startswith("openai"))

    result = apply_budget(ranked, a.est_cost_usd, "strict")

    assert keys(result.eligible) == ["openai"]


def test_cheapest_ties_keep_rank_order(make_input):
    pool = [
        make_input("p/slow@c", 0, input_cost=5.0, p95_ms=900),
        make_input("p/fast@c", 1, input_cost=5.0, p95_ms=100),
        make_input("p/low@c", 2, input_cost=0.1, p95_ms=5000),
    ]
    ranked = rank(score_pool(pool, DEFAULT_WEIGHTS, RequestFeatures(est_in=100)))
    tied_in_rank_order = [s.key for s in ranked if s.key != "p/low@c"]

    result = apply_budget(ranked, 1e-12, "cheapest")

    assert [s.key for s in result.eligible] == ["p/low@c", *tied_in_rank_order]
    assert [s.key for s in apply_budget(ranked[::-1], 1e-12).eligible] == [
        "p/low@c",
        *tied_in_rank_order[::-1],
    ]
    assert result.outcome == "cheapest"


def test_an_empty_pool_is_left_to_the_503(ranked_p):
    assert apply_budget([], 0.01, "strict").eligible == []
    assert apply_budget([], 0.01, "strict").outcome == "within"


def test_an_unknown_fallback_is_a_programming_error(ranked_p):
    with pytest.raises(ValueError, match="soft"):
        apply_budget(ranked_p(), 0.01, "soft")


# --- X-OmniRoute-Budget ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "cap"),
    [
        (None, None),
        ("", None),
        ("   ", None),
        (" 0.01 ", 0.01),
        ("0.01", 0.01),
        ("1e-3", 0.001),
        ("2E+2", 200.0),
        (".5", 0.5),
        ("5", 5.0),
        ("007", 7.0),
    ],
)
def test_valid_budget_headers(value, cap):
    assert parse_budget(value) == cap


@pytest.mark.parametrize(
    "value",
    [
        "abc",
        "0",
        "0.0",
        "-1",
        "+1",
        "inf",
        "nan",
        "Infinity",
        "5.",
        "1e999",
        "0e5",
        "1,5",
        "$0.01",
        "0x10",
        "1_000",
        "١",  # an Arabic-Indic digit: \d would match it without re.ASCII
        "0.01 0.02",
    ],
)
def test_invalid_budget_headers_raise(value):
    with pytest.raises(BudgetHeaderError):
        parse_budget(value)


def test_budget_header_error_is_a_value_error():
    assert issubclass(BudgetHeaderError, ValueError)


# --- X-OmniRoute-Budget-Fallback ------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "fallback"),
    [
        ("cheapest", "cheapest"),
        ("cheapest-viable", "cheapest"),
        (" Soft ", "cheapest"),
        ("strict", "strict"),
        ("BLOCK", "strict"),
        ("hard", "strict"),
        ("", None),
        ("cheap", None),
        (None, None),
    ],
)
def test_budget_fallback_aliases(value, fallback):
    assert parse_fallback(value) == fallback


# --- the estimate ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("prices", "usd"),
    [
        ((0.05, 0.40), 0.000425),
        ((3.0, None), 0.0045),  # output borrows input
        ((None, 2.0), 0.003),  # input borrows output
        ((None, None), 0.0015),  # neither: 1.0 each
        ((0.0, 0.0), 0.0),
    ],
)
def test_estimate_cost(prices, usd):
    assert estimate_cost(500, 1000, *prices) == pytest.approx(usd)
