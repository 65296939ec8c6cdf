"""Per-request budget: the headers, the cost estimate and filter F10 (spec 04 §5.2).

* ``X-OmniRoute-Budget``: empty -> no cap; otherwise the trimmed value must match
  ``BUDGET_RE`` and be finite and > 0, else ``BudgetHeaderError`` (a 400
  ``invalid_budget``: a budget is never silently ignored).
* ``X-OmniRoute-Budget-Fallback``: cheapest (the default) or strict, by alias.
* F10 runs on the ranked list, before selection.  Candidates above the cap are
  removed.  If none is left, ``cheapest`` keeps everyone ordered by estimated cost
  (ties by rank) with no exploration, and ``strict`` rejects with the 402 message.

The cap is inclusive: an estimate equal to the cap fits.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass

from gateway.auto.engine.types import Scored

BUDGET_RE = re.compile(r"^\d*\.?\d+([eE][-+]?\d+)?$", re.ASCII)
TOKENS_PER_PRICE_UNIT = 1_000_000  # catalog prices are USD per million tokens
UNKNOWN_PRICE_USD_PER_MTOK = 1.0  # §5.2: neither price known

CHEAPEST = "cheapest"
STRICT = "strict"
_FALLBACKS = {
    "cheapest": CHEAPEST,
    "cheapest-viable": CHEAPEST,
    "soft": CHEAPEST,
    "strict": STRICT,
    "block": STRICT,
    "hard": STRICT,
}


class BudgetHeaderError(ValueError):
    """``X-OmniRoute-Budget`` is present but is not a positive finite number."""


def parse_budget(value: str | None) -> float | None:
    """The cap in USD per request; ``None`` when the header is absent or blank."""
    if value is None:
        return None
    text = value.strip()
    if not text:
        return None
    cap = float(text) if BUDGET_RE.fullmatch(text) else math.nan
    if not (math.isfinite(cap) and cap > 0):
        raise BudgetHeaderError(
            f"Invalid X-OmniRoute-Budget {value!r}: expected a positive number of USD "
            "per request, e.g. 0.01"
        )
    return cap


def parse_fallback(value: str | None) -> str | None:
    """``"cheapest"``, ``"strict"``, or ``None`` for an absent or unknown value."""
    if value is None:
        return None
    return _FALLBACKS.get(value.strip().lower())


def estimate_cost(
    est_in: int, est_out: int, input_cost: float | None, output_cost: float | None
) -> float:
    """``(est_in·p_in + est_out·p_out) / 1e6`` USD; a missing price borrows the
    other one, and with neither both are 1.0 USD per million tokens."""
    if input_cost is None:
        input_cost = UNKNOWN_PRICE_USD_PER_MTOK if output_cost is None else output_cost
    if output_cost is None:
        output_cost = input_cost
    return (est_in * input_cost + est_out * output_cost) / TOKENS_PER_PRICE_UNIT


@dataclass(frozen=True, slots=True, kw_only=True)
class BudgetResult:
    #: the eligible list after F10: rank order, or by estimated cost (``cheapest``)
    eligible: list[Scored]
    outcome: str  # none | within | cheapest | rejected
    message: str | None = None  # the 402 message when rejected
    #: False under the cheapest fallback: the cheapest is the primary, no exploration
    explorable: bool = True


def _cost_key(scored: Scored) -> float:
    cost = scored.est_cost_usd
    return math.inf if math.isnan(cost) else cost  # NaN sorts last


def apply_budget(
    ranked: Sequence[Scored], cap: float | None, fallback: str = CHEAPEST
) -> BudgetResult:
    """Filter F10 over ``ranked`` (rank order).

    With no cap, or an empty list (F8's 503 comes first), nothing changes: outcome
    ``none`` without a cap, ``within`` with one.
    """
    if fallback not in (CHEAPEST, STRICT):
        raise ValueError(f"unknown budget fallback {fallback!r}")
    if cap is None:
        return BudgetResult(eligible=list(ranked), outcome="none")
    within = [scored for scored in ranked if scored.est_cost_usd <= cap]
    if within or not ranked:
        return BudgetResult(eligible=within, outcome="within")
    by_cost = sorted(ranked, key=_cost_key)  # stable: ties keep rank order
    if fallback == STRICT:
        cheapest = by_cost[0]
        return BudgetResult(
            eligible=[],
            outcome="rejected",
            message=(
                f"No candidate fits the budget of ${cap:.6f} per request "
                f"(cheapest: {cheapest.key} at ${cheapest.est_cost_usd:.6f})"
            ),
        )
    return BudgetResult(eligible=by_cost, outcome=CHEAPEST, explorable=False)
