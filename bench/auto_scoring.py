"""Time the auto engine's scoring and ranking (spec 04 §3) on synthetic pools.

Builds pools of 10, 100 and 1 000 candidates with varied, seeded data (prices known
and unknown, latency rows and gaps, every circuit and tier, quota snapshots) and
times ``score_pool`` and ``rank`` with ``time.perf_counter``, for a plain request
and for one that switches on every optional factor (cache key, tier hint,
complexity awareness).  Pure Python, no Django, no I/O.  Prints a markdown table.

    .venv/bin/python bench/auto_scoring.py [--runs N] [--seed S]

The target is < 5 ms to score 1 000 candidates on the 2-core bench machine.
"""

from __future__ import annotations

import argparse
import platform
import random
import statistics
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from functools import partial
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from gateway.auto.engine.scoring import rank, score_pool  # noqa: E402
from gateway.auto.engine.types import CandidateInput, RequestFeatures  # noqa: E402
from gateway.auto.engine.weights import DEFAULT_WEIGHTS, MODE_PACKS  # noqa: E402

SIZES = (10, 100, 1000)
TARGET_MS_AT_1000 = 5.0
NOW = 1_750_000_000.0


def _maybe(rng: random.Random, share_known: float, value: float) -> float | None:
    return value if rng.random() < share_known else None


def build_pool(size: int, rng: random.Random) -> list[CandidateInput]:
    providers = max(2, size // 8)
    pool = []
    for i in range(size):
        provider = f"prov{i % providers}"
        model = f"model-{i // providers}"
        connection = ("main", "backup", "free")[i % 3]
        p95 = _maybe(rng, 0.8, rng.uniform(150, 9000))
        pool.append(
            CandidateInput(
                key=f"{provider}/{model}@{connection}",
                provider=provider,
                model=model,
                connection=connection,
                order=i,
                input_cost=_maybe(rng, 0.9, rng.choice((0.0, rng.uniform(0.02, 15)))),
                output_cost=_maybe(rng, 0.85, rng.uniform(0.0, 75)),
                p95_ms=p95,
                std_ms=None if p95 is None else rng.uniform(10, p95 / 2),
                failure_rate=_maybe(rng, 0.7, rng.uniform(0, 0.3)),
                good_rate=_maybe(rng, 0.6, rng.uniform(0.7, 1)),
                circuit=rng.choices(("closed", "half_open", "open"), (8, 1, 1))[0],
                quota_pct=_maybe(rng, 0.5, rng.uniform(0, 100)),
                resets_at=_maybe(rng, 0.4, NOW + rng.uniform(-600, 20_000)),
                window_s=_maybe(rng, 0.3, rng.choice((3600.0, 18_000.0, 86_400.0))),
                account_tier=rng.choice(("ultra", "pro", "standard", "free")),
                context_window=rng.choice((None, 32_768, 128_000, 200_000, 1_000_000)),
                capabilities=frozenset(rng.sample(("tools", "json", "vision"), 2)),
                n_conn=3 if connection != "free" else 1,
                in_flight=rng.randint(0, 6),
                max_concurrency=rng.choice((0, 0, 4, 16)),
                fitness=_maybe(rng, 0.9, rng.uniform(0.4, 0.98)),
            )
        )
    return pool


REQUESTS = {
    "plain": RequestFeatures(
        task_type="coding", need_tokens=6000, est_in=5000, now=NOW
    ),
    "all factors": RequestFeatures(
        task_type="coding",
        need_tokens=6000,
        est_in=5000,
        cache_key="session-42",
        tier_hint="cheap",
        complexity_aware=True,
        complexity="high",
        now=NOW,
    ),
}
WEIGHTS = {"default": DEFAULT_WEIGHTS, "cost-saver": MODE_PACKS["cost-saver"]}


def _time_ms(fn: Callable[[], object], runs: int) -> list[float]:
    for _ in range(max(3, runs // 20)):  # warm up
        fn()
    samples = []
    for _ in range(runs):
        start = time.perf_counter()
        fn()
        samples.append((time.perf_counter() - start) * 1000)
    return samples


def _score_and_rank(
    pool: Sequence[CandidateInput], weights: Mapping[str, float], req: RequestFeatures
) -> object:
    return rank(score_pool(pool, weights, req))


def _p95(samples: list[float]) -> float:
    return statistics.quantiles(samples, n=20, method="inclusive")[-1]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=300, help="runs at 1 000")
    parser.add_argument("--seed", type=int, default=20240)
    args = parser.parse_args()

    print(
        f"Python {platform.python_version()} on {platform.machine()}, "
        f"seed {args.seed}; times in ms (median / p95)\n"
    )
    print("| pool | request | weights | score_pool | rank | score + rank |")
    print("|---:|---|---|---:|---:|---:|")
    worst_at_1000 = 0.0
    for size in SIZES:
        pool = build_pool(size, random.Random(args.seed + size))
        runs = args.runs * max(1, 1000 // (size * 4))
        for req_name, req in REQUESTS.items():
            for weights_name, weights in WEIGHTS.items():
                scored = score_pool(pool, weights, req)
                scoring = _time_ms(partial(score_pool, pool, weights, req), runs)
                ranking = _time_ms(partial(rank, scored), runs)
                both = _time_ms(partial(_score_and_rank, pool, weights, req), runs)
                if size == max(SIZES):
                    worst_at_1000 = max(worst_at_1000, statistics.median(scoring))
                print(
                    f"| {size} | {req_name} | {weights_name} | "
                    f"{statistics.median(scoring):.3f} / {_p95(scoring):.3f} | "
                    f"{statistics.median(ranking):.3f} / {_p95(ranking):.3f} | "
                    f"{statistics.median(both):.3f} / {_p95(both):.3f} |"
                )
    verdict = "within" if worst_at_1000 < TARGET_MS_AT_1000 else "OVER"
    print(
        f"\nscore_pool at {max(SIZES)}: worst median {worst_at_1000:.3f} ms, "
        f"{verdict} the {TARGET_MS_AT_1000:.0f} ms target."
    )
    return 0 if worst_at_1000 < TARGET_MS_AT_1000 else 1


if __name__ == "__main__":
    sys.exit(main())
