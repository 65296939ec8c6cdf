"""What adaptive selection costs on a healthy fleet, engine only (issue #17 analysis).

Drives the real ``gateway.kernel.adaptive`` (``LatencyEstimator``, ``observe``,
``choose``) with seeded Poisson arrivals over the routing-quality fleet
(``bench/routing_schedule.PROVIDERS``: fixed latencies ±10 %, nothing faulted), and
prints each provider's share and the cost as a multiple of the cheapest provider's
price, per objective and rate.  Two ablations isolate the rules that move traffic to
dearer targets: the in-flight term of the comparison's load (``n`` read as 0) and the
trickle (``trickle_fraction`` 0).  No gateway, no I/O.

    .venv/bin/python bench/adaptive_shares.py [--rates 1,5,20,40,80] [--picks N]
"""

from __future__ import annotations

import argparse
import heapq
import random
import sys
from dataclasses import replace
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench.routing_schedule import PROVIDERS  # noqa: E402
from gateway.kernel import adaptive  # noqa: E402

MIN_WEIGHT_FRACTION = 0.05  # settings.adaptive defaults
TRICKLE_FRACTION = adaptive.DEFAULT_TRICKLE_FRACTION


def simulate(
    rate: float,
    objective: str,
    *,
    trickle: float,
    in_flight: bool,
    picks: int,
    seed: int,
) -> tuple[dict[str, float], float]:
    """(share of first picks per provider, cost / cheapest price)."""
    rng = random.Random(seed)
    world = random.Random(seed + 1)
    estimator = adaptive.LatencyEstimator()
    prices = {p.slug: p.input_cost + p.output_cost for p in PROVIDERS}
    cands = [
        adaptive.AdaptiveCandidate(key=p.slug, index=i, price=prices[p.slug])
        for i, p in enumerate(PROVIDERS)
    ]
    latency = {p.slug: p.latency_ms for p in PROVIDERS}
    running: list[tuple[float, str, float]] = []  # (finish, key, sample ms)
    counts = dict.fromkeys(prices, 0)
    now = 0.0
    for _ in range(picks):
        now += world.expovariate(rate)
        while running and running[0][0] <= now:
            done, key, sample = heapq.heappop(running)
            estimator.finished(key, done - sample / 1000)
            estimator.sample(key, sample, done)
        observed = adaptive.observe(cands, estimator, now)
        if not in_flight:
            observed = [replace(c, in_flight=0) for c in observed]
        chosen, _ = adaptive.choose(
            observed,
            objective=objective,
            min_weight_fraction=MIN_WEIGHT_FRACTION,
            warm_key=None,
            warm_weight=8.0,
            rng=rng,
            trickle_fraction=trickle,
        )
        counts[chosen.key] += 1
        estimator.started(chosen.key, now)
        sample = latency[chosen.key] * (0.9 + 0.2 * world.random())
        heapq.heappush(running, (now + sample / 1000, chosen.key, sample))
    cheapest = min(prices.values())
    cost = sum(counts[k] * prices[k] for k in counts) / picks / cheapest
    return {k: n / picks for k, n in counts.items()}, cost


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rates", default="1,5,20,40,80")
    parser.add_argument("--picks", type=int, default=20_000)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args(argv)
    rates = [float(r) for r in args.rates.split(",")]
    variants = (
        ("as built", TRICKLE_FRACTION, True),
        ("in-flight ignored", TRICKLE_FRACTION, False),
        ("in-flight ignored, trickle 0", 0.0, False),
    )
    print("| objective | req/s | variant | shares % | cost / cheapest |")
    print("|---|---:|---|---|---:|")
    for objective in ("balanced", "cost"):
        for rate in rates:
            for label, trickle, in_flight in variants:
                shares, cost = simulate(
                    rate,
                    objective,
                    trickle=trickle,
                    in_flight=in_flight,
                    picks=args.picks,
                    seed=args.seed,
                )
                text = " ".join(
                    f"{k[0].upper()}{100 * v:.1f}" for k, v in shares.items()
                )
                print(f"| {objective} | {rate:g} | {label} | {text} | {cost:.2f}× |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
