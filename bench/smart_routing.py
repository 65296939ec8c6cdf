"""Time smart tier classification and adaptive selection per request (spec 05 §2, §3).

(a) ``gateway.kernel.smart.classify`` on four typical bodies: a short chat turn, a
2 400-character code request, a 32 000-character request (prose, the worst case for
the phrase scan) and an agent turn carrying a 30 000-character tool output and six
tools.  (b) ``gateway.kernel.adaptive.plan_order``, the whole attempt order the
gateway draws at plan time, and the first pick alone (``observe`` + ``choose``),
for pools of 2, 5 and 20 candidates read from a filled ``LatencyEstimator`` (fresh
and stale estimates, in-flight counts, priced and unpriced, standby weights).
Seeded data, ``time.perf_counter``, pure Python: no Django, no I/O.  Prints a
markdown table (median and p95 in µs).

    .venv/bin/python bench/smart_routing.py [--runs N] [--seed S]

The target is the spec's: a 32 000-character request classifies in under 1 ms; the
script exits non-zero when the median misses it.
"""

from __future__ import annotations

import argparse
import json
import platform
import random
import statistics
import sys
import time
from collections.abc import Callable, Mapping
from functools import partial
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from gateway.kernel import adaptive, smart  # noqa: E402

THRESHOLD = 4  # the SmartRoute default
TARGET_US_AT_32K = 1000.0  # spec 05 §2.2
POOL_SIZES = (2, 5, 20)
NOW = 1_750_000_000.0
PROSE = (
    "the service returns a response after the request reaches its upstream while "
    "each worker keeps a pool of connections and the operator reads the metrics "
    "page every morning to compare latency cost and error rates across providers "
    "so that a new model can be introduced without surprises for the customers"
)
WORDS = tuple(PROSE.split())


def _prose(rng: random.Random, chars: int) -> str:
    words: list[str] = []
    size = 0
    while size < chars:
        sentence = " ".join(rng.choice(WORDS) for _ in range(rng.randint(8, 20)))
        words.append(sentence.capitalize() + ".")
        size += len(words[-1]) + 1
    return " ".join(words)[:chars]


def _code(rng: random.Random, chars: int) -> str:
    lines = []
    size = 0
    while size < chars:
        n = rng.randint(1, 99)
        line = f"    total += compute_item(items[{n}], factor={n / 7:.3f})  # step {n}"
        lines.append(line)
        size += len(line) + 1
    return "\n".join(lines)[:chars]


def _tool(name: str) -> dict[str, Any]:
    return {
        "type": "function",
        "function": {
            "name": name,
            "description": f"{name.replace('_', ' ')} in the workspace",
            "parameters": {
                "type": "object",
                "properties": {
                    "path": {"type": "string"},
                    "limit": {"type": "integer"},
                },
                "required": ["path"],
            },
        },
    }


def _tool_output(rng: random.Random, chars: int) -> str:
    lines = []
    size = 0
    while size < chars - 400:
        n = rng.randint(1, 400)
        line = f"tests/test_module_{n % 40}.py::test_case_{n} PASSED [{n % 100:3d}%]"
        lines.append(line)
        size += len(line) + 1
    tail = (
        "\nTraceback (most recent call last):\n"
        '  File "app/jobs.py", line 88, in run\n'
        "    result = handler(payload)\n"
        "KeyError: 'tenant'\n"
    )
    return ("\n".join(lines) + tail)[:chars]


def build_bodies(rng: random.Random) -> dict[str, dict[str, Any]]:
    code_intro = "Why does this sometimes return the wrong total?\n\n```python\n"
    code_size = 2400 - len(code_intro) - len("\n```")
    ask = "\n\nSummarise the report above in three bullet points."
    tools = [
        _tool(n)
        for n in (
            "read_file",
            "write_file",
            "list_dir",
            "run_tests",
            "search_code",
            "apply_patch",
        )
    ]
    return {
        "short chat turn": {
            "messages": [
                {"role": "system", "content": "You are a helpful assistant."},
                {"role": "user", "content": "What is a good name for a grey cat?"},
            ]
        },
        "code request": {
            "messages": [
                {
                    "role": "user",
                    "content": code_intro + _code(rng, code_size) + "\n```",
                }
            ]
        },
        "long prose request": {
            "messages": [
                {
                    "role": "user",
                    "content": _prose(rng, 32_000 - len(ask)) + ask,
                }
            ]
        },
        "agent turn: 30 000-char tool output, 6 tools": {
            "tools": tools,
            "messages": [
                {"role": "system", "content": _prose(rng, 600)},
                {"role": "user", "content": "Run the test suite and fix what fails."},
                {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [
                        {
                            "id": "call_1",
                            "type": "function",
                            "function": {
                                "name": "run_tests",
                                "arguments": json.dumps({"path": "tests/"}),
                            },
                        }
                    ],
                },
                {
                    "role": "tool",
                    "tool_call_id": "call_1",
                    "content": _tool_output(rng, 30_000),
                },
            ],
        },
    }


def _chars(body: Mapping[str, Any]) -> int:
    return sum(len(smart.message_text(m)) for m in body["messages"])


def build_pool(
    size: int, rng: random.Random
) -> tuple[list[adaptive.AdaptiveCandidate], adaptive.LatencyEstimator]:
    estimator = adaptive.LatencyEstimator()
    cands = []
    for i in range(size):
        key = f"prov{i}/model-{i % 3}@main"
        cands.append(
            adaptive.AdaptiveCandidate(
                key=key,
                index=i,
                base_weight=rng.choice((None, 1.0, 2.0, 0.5, 0.0 if i else 1.0)),
                price=rng.choice((None, rng.uniform(0.1, 30.0))),
            )
        )
        stale = size > 2 and i == size - 1  # no sample for > 30 s: the pool default
        last = NOW - (45.0 if stale else rng.uniform(0.0, 20.0))
        for step in range(5):
            estimator.sample(key, rng.uniform(150.0, 3000.0), last - 4.0 + step)
        for _ in range(rng.randint(0, 4)):
            estimator.started(key, NOW - 60.0)  # all of them overdue
    return cands, estimator


def _plan(
    cands: list[adaptive.AdaptiveCandidate],
    estimator: adaptive.LatencyEstimator,
    rng: random.Random,
) -> object:
    return adaptive.plan_order(
        cands,
        estimator=estimator,
        now=NOW,
        objective="balanced",
        min_weight_fraction=0.05,
        warm_key=None,
        warm_weight=8.0,
        rng=rng,
    )


def _first_pick(
    cands: list[adaptive.AdaptiveCandidate],
    estimator: adaptive.LatencyEstimator,
    rng: random.Random,
) -> object:
    return adaptive.choose(
        adaptive.observe(cands, estimator, NOW),
        objective="balanced",
        min_weight_fraction=0.05,
        warm_key=None,
        warm_weight=8.0,
        rng=rng,
    )


def _time_us(fn: Callable[[], object], runs: int) -> list[float]:
    for _ in range(max(3, runs // 20)):  # warm up
        fn()
    samples = []
    for _ in range(runs):
        start = time.perf_counter()
        fn()
        samples.append((time.perf_counter() - start) * 1_000_000)
    return samples


def _p95(samples: list[float]) -> float:
    return statistics.quantiles(samples, n=20, method="inclusive")[-1]


def _row(step: str, case: str, result: str, samples: list[float]) -> str:
    return (
        f"| {step} | {case} | {result} | {statistics.median(samples):.1f} | "
        f"{_p95(samples):.1f} |"
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=2000, help="timed calls per row")
    parser.add_argument("--seed", type=int, default=20240)
    args = parser.parse_args()
    rng = random.Random(args.seed)

    print(
        f"Python {platform.python_version()} on {platform.machine()}, "
        f"seed {args.seed}, {args.runs} calls per row; times in µs\n"
    )
    print("| step | input | result | median µs | p95 µs |")
    print("|---|---|---|---:|---:|")
    at_32k = 0.0
    for name, body in build_bodies(rng).items():
        verdict = smart.classify(body, THRESHOLD)
        samples = _time_us(partial(smart.classify, body, THRESHOLD), args.runs)
        if name.startswith("long prose"):
            at_32k = statistics.median(samples)
        signals = ", ".join(smart.signal_name(s) for s in verdict.signals) or "none"
        result = f"{verdict.tier}, score {verdict.score} ({signals})"
        chars = f"{_chars(body):,}".replace(",", " ")
        print(_row("classify", f"{name} ({chars} chars)", result, samples))
    for size in POOL_SIZES:
        cands, estimator = build_pool(size, random.Random(args.seed + size))
        draw = random.Random(args.seed)
        plan = _time_us(partial(_plan, cands, estimator, draw), args.runs)
        first = _time_us(partial(_first_pick, cands, estimator, draw), args.runs)
        print(_row("plan_order", f"{size} candidates", "whole order", plan))
        print(_row("observe + choose", f"{size} candidates", "first pick", first))
    verdict_text = "within" if at_32k < TARGET_US_AT_32K else "OVER"
    print(
        f"\nclassify at 32 000 chars: median {at_32k:.1f} µs, {verdict_text} the "
        f"{TARGET_US_AT_32K:.0f} µs target."
    )
    return 0 if at_32k < TARGET_US_AT_32K else 1


if __name__ == "__main__":
    sys.exit(main())
