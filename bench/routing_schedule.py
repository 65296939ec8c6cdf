"""The routing-quality benchmark's fleet, fault schedule and oracle (issue #17).

Pure Python, no I/O: ``bench/routing_quality.py`` replays this against a real
gateway.  Four interchangeable ``openai``-kind providers, each one model on its own
mock upstream process, at different prices and base latencies; a schedule of
overlapping faults, one provider each; and the oracle: for a request sent at time
``t``, the cheapest provider with no fault active at ``t``, priced with the request's
own token counts.

The mock upstream scripts behaviours per model (``POST /_mock/behaviours``): a
permanent rule, plus a queue of ``times``-counted rules taken first.  It has no
probability knob, so a partial failure ("30 % of requests fail") is a seeded
Bernoulli sequence of that ratio, run-length encoded into counted rules
(``{status: 500, times: 2}``, ``{latency_ms: 80, times: 5}``, ...) installed when the
fault starts: the n-th request that reaches the provider during the burst gets the
n-th draw, so the ratio holds per request received, whatever share the router sends
there.  The queue is sized for every request of the burst reaching that provider
(``partial_rules``); when the fault ends the provider's mock is reset and its base
rule installed again.
"""

from __future__ import annotations

import bisect
import itertools
import math
import random
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

#: completion tokens of every answer (the mock's ``tokens`` knob)
COMPLETION_TOKENS = 200
#: the mock's prompt estimate: len(json(messages)) // 4 (``CHARS_PER_TOKEN``)
CHARS_PER_TOKEN = 4
#: how fast a refused request (500, 429) comes back
ERROR_LATENCY_MS = 15.0


@dataclass(frozen=True)
class Provider:
    slug: str
    model: str
    input_cost: float  # USD per 1M tokens
    output_cost: float
    latency_ms: float  # the mock's base latency

    @property
    def target(self) -> str:
        return f"{self.slug}/{self.model}"

    def cost(self, prompt_tokens: int, completion_tokens: int) -> float:
        return (
            prompt_tokens * self.input_cost + completion_tokens * self.output_cost
        ) / 1e6


#: in price order; output priced at 4x input; the cheapest is not the fastest
PROVIDERS: tuple[Provider, ...] = (
    Provider("budget", "rq-budget", 0.30, 1.20, 80.0),
    Provider("value", "rq-value", 0.60, 2.40, 120.0),
    Provider("swift", "rq-swift", 2.00, 8.00, 60.0),
    Provider("premium", "rq-premium", 5.00, 20.00, 40.0),
)
BY_SLUG = {p.slug: p for p in PROVIDERS}


@dataclass(frozen=True)
class Fault:
    """One fault on one provider from ``start`` to ``end`` (seconds into the run)."""

    provider: str
    kind: str  # "5xx" (partial), "429", "reset", "slow"
    start: float
    end: float
    #: "5xx": the share of requests that fail; "slow": the added latency in ms
    value: float = 1.0

    def active(self, t: float) -> bool:
        return self.start <= t < self.end

    def describe(self) -> str:
        if self.kind == "5xx":
            what = f"{self.value:.0%} of requests answer 500"
        elif self.kind == "429":
            what = "every request answers 429 (no Retry-After)"
        elif self.kind == "reset":
            what = "every connection is reset before the response headers"
        else:
            what = f"every answer {self.value / 1000:g} s slower"
        return what


#: the full schedule, seconds into the run (the run lasts ``DURATION``)
DURATION = 110.0
SCHEDULE: tuple[Fault, ...] = (
    Fault("budget", "5xx", 10.0, 40.0, 0.30),
    Fault("value", "429", 25.0, 55.0),
    Fault("swift", "reset", 45.0, 70.0),
    Fault("premium", "slow", 60.0, 85.0, 1500.0),
)


def scaled(factor: float) -> tuple[float, tuple[Fault, ...]]:
    """The run length and the schedule with every time multiplied by ``factor``."""
    return DURATION * factor, tuple(
        Fault(f.provider, f.kind, f.start * factor, f.end * factor, f.value)
        for f in SCHEDULE
    )


def check_schedule(schedule: Sequence[Fault]) -> None:
    """One fault at a time per provider: the driver installs one state per mock."""
    for a in schedule:
        if a.provider not in BY_SLUG:
            raise ValueError(f"unknown provider {a.provider!r}")
        for b in schedule:
            same = a is not b and a.provider == b.provider
            if same and a.start < b.end and b.start < a.end:
                raise ValueError(f"overlapping faults on {a.provider}")


def transitions(schedule: Sequence[Fault]) -> list[float]:
    """Every time a fault starts or ends, in order."""
    return sorted({t for f in schedule for t in (f.start, f.end)})


def phases(schedule: Sequence[Fault], duration: float) -> list[tuple[float, float]]:
    """The intervals between transitions: the fault set is constant in each."""
    cuts = [0.0, *(t for t in transitions(schedule) if 0 < t < duration), duration]
    return list(itertools.pairwise(cuts))


def faulted(schedule: Sequence[Fault], t: float) -> set[str]:
    return {f.provider for f in schedule if f.active(t)}


def oracle_provider(
    schedule: Sequence[Fault], t: float, providers: Sequence[Provider] = PROVIDERS
) -> Provider:
    """The cheapest provider with no fault active at ``t`` (all faulted: the
    cheapest of all)."""
    down = faulted(schedule, t)
    healthy = [p for p in providers if p.slug not in down] or list(providers)
    return min(healthy, key=lambda p: p.cost(1_000, 1_000))


class AppliedSchedule:
    """When each fault really started and ended on its mock (monotonic seconds into
    the run), for the oracle: a fault counts from the moment it was installed."""

    def __init__(self) -> None:
        self.events: list[tuple[float, str, bool]] = []  # (t, provider, faulted)

    def record(self, t: float, provider: str, is_faulted: bool) -> None:
        self.events.append((t, provider, is_faulted))

    def faults(self) -> list[Fault]:
        out: list[Fault] = []
        opened: dict[str, float] = {}
        for t, provider, is_faulted in sorted(self.events):
            if is_faulted:
                opened[provider] = t
            elif provider in opened:
                out.append(Fault(provider, "any", opened.pop(provider), t))
        out += [Fault(p, "any", t, math.inf) for p, t in opened.items()]
        return out


# --- mock behaviours ------------------------------------------------------------------


def base_rule(provider: Provider) -> dict[str, Any]:
    return {
        "model": provider.model,
        "latency_ms": provider.latency_ms,
        "tokens": COMPLETION_TOKENS,
    }


def partial_rules(
    provider: Provider, ratio: float, count: int, seed: int
) -> list[dict[str, Any]]:
    """``count`` requests' worth of counted rules: a seeded Bernoulli(``ratio``)
    sequence of 500s among normal answers, run-length encoded."""
    rng = random.Random(seed)
    draws = [rng.random() < ratio for _ in range(count)]
    rules: list[dict[str, Any]] = []
    for fail in draws:
        if rules and rules[-1]["_fail"] == fail:
            rules[-1]["times"] += 1
            continue
        rule = (
            {"model": provider.model, "status": 500, "latency_ms": ERROR_LATENCY_MS}
            if fail
            else base_rule(provider)
        )
        rules.append({**rule, "times": 1, "_fail": fail})
    for rule in rules:
        del rule["_fail"]
    return rules


def fault_rules(
    provider: Provider, fault: Fault | None, expected_requests: int, seed: int
) -> list[dict[str, Any]]:
    """The behaviours to install on ``provider``'s freshly reset mock."""
    base = base_rule(provider)
    if fault is None:
        return [base]
    if fault.kind == "5xx":
        return [base, *partial_rules(provider, fault.value, expected_requests, seed)]
    if fault.kind == "429":
        return [
            {
                "model": provider.model,
                "status": 429,
                "latency_ms": ERROR_LATENCY_MS,
                "error_body": {
                    "error": {
                        "message": "Rate limit reached for requests",
                        "type": "requests",
                        "code": "rate_limit_exceeded",
                    }
                },
            }
        ]
    if fault.kind == "reset":
        return [{"model": provider.model, "reset": "before_headers"}]
    if fault.kind == "slow":
        return [{**base, "latency_ms": provider.latency_ms + fault.value}]
    raise ValueError(f"unknown fault kind {fault.kind!r}")


# --- traffic --------------------------------------------------------------------------


def arrivals(rate: float, duration: float, seed: int, poisson: bool) -> list[float]:
    """Send times (seconds into the run): Poisson arrivals at ``rate`` per second,
    or a fixed rate."""
    if not poisson:
        return [i / rate for i in range(int(duration * rate))]
    rng = random.Random(seed)
    out: list[float] = []
    t = rng.expovariate(rate)
    while t < duration:
        out.append(t)
        t += rng.expovariate(rate)
    return out


def prompt_tokens(messages: Any) -> int:
    """The mock's own estimate (``len(orjson.dumps(messages)) // 4``)."""
    import json

    text = json.dumps(messages, separators=(",", ":"), ensure_ascii=False)
    return len(text.encode()) // CHARS_PER_TOKEN


def phase_of(cuts: Sequence[float], t: float) -> int:
    """The index of the phase holding ``t`` given the phase start times."""
    return max(0, bisect.bisect_right(cuts, t) - 1)


def schedule_table(schedule: Iterable[Fault]) -> list[str]:
    lines = ["| provider | fault | from s | to s |", "|---|---|---:|---:|"]
    for f in schedule:
        lines.append(f"| {f.provider} | {f.describe()} | {f.start:g} | {f.end:g} |")
    return lines
