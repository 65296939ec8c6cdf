"""Per-key rate limits and budgets through the real gateway (spec 08 §6, 01 errors).

The session gateway runs without Redis, so these requests go through the in-process
limiter; a refusal is decided before any upstream call and never fails over.
"""

from __future__ import annotations

from decimal import ROUND_HALF_UP, Decimal

import httpx
import pytest

pytestmark = pytest.mark.integration
MESSAGES = [{"role": "user", "content": "hi"}]
KEY_RPM = "sk-or-test-rpm-two-0000000000000000000000000000"
KEY_BUDGET = "sk-or-test-small-budget-00000000000000000000000"
BUDGET_USD = Decimal("0.0001")  # 100 micro-USD
#: C of the budget test on pb/m2 (0.15 in, 0.60 out per Mtok): R_in 9, reserve 20,
#: ⌈9 × 0.15 + 20 × 0.60⌉ = 14 micro-USD
RESERVATION_MICRO = 14


@pytest.fixture(scope="module")
def limited(gateway):
    result = gateway.apply(f"""
api_keys:
  - name: rpm-two
    key: {KEY_RPM}
    rpm: 2
  - name: small-budget
    key: {KEY_BUDGET}
    budget_usd: {BUDGET_USD}
    budget_period: day
""")
    assert result.returncode == 0, result.stderr
    return gateway


def _post(gateway, key: str, **body) -> httpx.Response:
    return httpx.post(
        f"{gateway.url}/v1/chat/completions",
        timeout=30,
        headers={"Authorization": f"Bearer {key}"},
        json={"messages": MESSAGES, **body},
    )


def _rows(gateway, key_name: str) -> list:
    return gateway.requests_log(
        "api_key_id = (select id from combos_apikey where name = ?)", key_name
    )


def _refusals(gateway, code: str) -> float:
    text = httpx.get(f"{gateway.url}/metrics", timeout=5).text
    prefix = f'omniroute_refusals_total{{code="{code}"}} '
    return sum(
        float(line[len(prefix) :])
        for line in text.splitlines()
        if line.startswith(prefix)
    )


def test_the_third_request_within_a_minute_is_429_and_reaches_no_upstream(
    limited, upstream
):
    before = _refusals(limited, "key_rate_limited")
    responses = [_post(limited, KEY_RPM, model="pa/m1") for _ in range(3)]
    assert [r.status_code for r in responses] == [200, 200, 429]
    error = responses[2].json()["error"]
    assert (error["type"], error["code"]) == ("rate_limit_error", "key_rate_limited")
    assert error["message"]
    retry_after = int(responses[2].headers["retry-after"])
    # 2 requests this minute: the third fits when 2 × (60 − s)/60 ≤ 1 in the next one
    assert 31 <= retry_after <= 90
    assert len(upstream.requests()) == 2
    rows = _rows(limited, "rpm-two")
    assert [(r["status"], r["http_status"], r["reason"]) for r in rows][-1] == (
        "refused",
        429,
        "key_rate_limited",
    )
    assert rows[-1]["attempt_count"] == 0
    assert _refusals(limited, "key_rate_limited") == before + 1
    # the fallback chain is not tried either: refusals never fail over
    again = _post(limited, KEY_RPM, model="pa/m1", fallback_models=["pb/m2"])
    assert again.status_code == 429
    assert len(upstream.requests()) == 2


def test_a_budget_key_gets_402_once_its_spend_is_used_up(limited, upstream):
    upstream.add("m2", tokens=30)  # each answer bills about 20 micro-USD
    statuses: list[int] = []
    reply = None
    for _ in range(12):
        reply = _post(limited, KEY_BUDGET, model="pb/m2", max_tokens=20)
        statuses.append(reply.status_code)
        if reply.status_code != 200:
            break
    assert reply is not None
    served = statuses.count(200)
    assert served >= 2
    assert statuses == [200] * served + [402]
    error = reply.json()["error"]
    assert (error["type"], error["code"]) == ("budget_error", "budget_exceeded")
    assert "retry-after" not in reply.headers
    assert len(upstream.requests()) == served
    rows = _rows(limited, "small-budget")
    costs = [_micro(r["cost_usd"]) for r in rows[:-1]]
    assert len(costs) == served
    assert all(cost > 0 for cost in costs)
    budget = _micro(BUDGET_USD)
    # refused because spent + C went over the budget, and only then
    assert sum(costs) + RESERVATION_MICRO > budget
    assert sum(costs[:-1]) + RESERVATION_MICRO <= budget
    assert (rows[-1]["status"], rows[-1]["http_status"], rows[-1]["reason"]) == (
        "refused",
        402,
        "budget_exceeded",
    )
    # nothing was reserved or spent by the refusal: the same request is refused again
    again = _post(limited, KEY_BUDGET, model="pb/m2", max_tokens=20)
    assert again.status_code == 402
    assert len(upstream.requests()) == served


def _micro(usd) -> int:
    """Micro-USD to the nearest unit, as the limiter adds billed costs."""
    exact = Decimal(str(usd)) * 1_000_000
    return int(exact.to_integral_value(rounding=ROUND_HALF_UP))
