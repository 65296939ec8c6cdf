"""Time one state store operation: in process vs Redis (spec 08 §3.2, 03 §8.8).

``LocalStore`` (the embedded default), ``RedisStore`` (other routing state),
``MirroredStore`` (health keys read from the mirror, written through Redis and
published), the pin stores, and a store whose Redis is down and backed off (the
fail-open path).  The Redis is the one at ``--url`` (loopback in the figures of
``docs/``); keys live under a fresh prefix that is deleted at the end.  Prints a
markdown table (median and p95 in µs).

    .venv/bin/python bench/shared_state.py [--url redis://127.0.0.1:6379/0] [--runs N]
"""

from __future__ import annotations

import argparse
import socket
import statistics
import sys
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from gateway.kernel.breaker import Breaker, HealthConfig  # noqa: E402
from providers.health import HealthBoard  # noqa: E402
from providers.pins import PinStore, RedisPinStore  # noqa: E402
from providers.redis_store import RedisLink, RedisStore  # noqa: E402
from providers.state_mirror import MirroredStore  # noqa: E402
from providers.state_store import LocalStore  # noqa: E402
from providers.target_stats import TargetStats  # noqa: E402
from providers.target_stats_redis import SharedTargetStats  # noqa: E402

CONN = "pa@main"
HEALTH_KEYS = (f"breaker:{CONN}", f"cooldown:{CONN}", f"auth:{CONN}", f"lock:{CONN}:m1")
RECORD = {"next": 3, "sticky": {"key": "pa/m1@main", "count": 2}}
BREAKER = Breaker(consecutive=2, window=((1000.0, 5, 2), (1001.0, 3, 0)))


def _time(fn: Callable[[], Any], runs: int) -> tuple[float, float]:
    for _ in range(min(runs, 200)):
        fn()
    samples = []
    for _ in range(runs):
        started = time.perf_counter_ns()
        fn()
        samples.append((time.perf_counter_ns() - started) / 1000)
    samples.sort()
    return statistics.median(samples), samples[int(len(samples) * 0.95)]


def _store_cases(name: str, store: Any) -> list[tuple[str, Callable[[], Any]]]:
    store.set("state:rr:1", RECORD, 600)
    store.set(HEALTH_KEYS[0], BREAKER, None)
    counter = iter(range(10**9))
    return [
        (f"{name}: get", lambda: store.get("state:rr:1")),
        (f"{name}: get_many (4 health keys)", lambda: store.get_many(HEALTH_KEYS)),
        (f"{name}: set", lambda: store.set("state:rr:1", RECORD, 600)),
        (f"{name}: incr", lambda: store.incr("state:n", 1, 600)),
        (
            f"{name}: update (changes)",
            lambda: store.update("state:u", lambda _: next(counter), 600),
        ),
        (
            f"{name}: update health key (changes)",
            lambda: store.update(f"lock:{CONN}:bench", lambda _: next(counter), None),
        ),
        (
            f"{name}: update health key (unchanged)",
            lambda: store.update(HEALTH_KEYS[0], lambda s: s, None),
        ),
    ]


def _board_cases(name: str, store: Any) -> list[tuple[str, Callable[[], Any]]]:
    board = HealthBoard(store)
    now = time.time()
    config = HealthConfig()
    return [
        (f"{name}: board.skip_reason", lambda: board.skip_reason(CONN, "m1", 0, now)),
        (
            f"{name}: board.record (a success)",
            lambda: board.record(CONN, "m1", None, None, now=now, config=config),
        ),
    ]


def _pin_cases(name: str, pins: PinStore) -> list[tuple[str, Callable[[], Any]]]:
    pins.set("S", "combo:1", {"target": "pa/m1@main"}, 3600)
    tier = {"tier": "hard", "score": 7, "updated_at": 1.0}
    return [
        (f"{name}: pin get", lambda: pins.get("S", "combo:1")),
        (
            f"{name}: pin set",
            lambda: pins.set("S", "combo:1", {"target": "pa/m1@main"}, 3600),
        ),
        (f"{name}: tier pin set", lambda: pins.set("S", "tier:smart", tier, 1800)),
    ]


def _plan_cases(
    name: str, store: Any, target_stats: Any, pin_store: PinStore
) -> list[tuple[str, Callable[[], Any]]]:
    """A whole combo plan per request: every read batched (spec 08 §3.2)."""
    import dataclasses
    from types import MappingProxyType

    from gateway.planning import affinity as combo_session
    from gateway.planning import combo as combo_plan
    from gateway.planning import reads as combo_reads
    from providers import health
    from tests.engine.conftest import build_table

    table = build_table(
        {"pa": ["m1"], "pb": ["m2"], "pc": ["m3"]},
        combos={
            "rr": {"targets": ["pa/m1", "pb/m2", "pc/m3"], "strategy": "round-robin"},
            "least": {"targets": ["pa/m1", "pb/m2"], "strategy": "least-used"},
            "outer": {"targets": ["combo:least", "pc/m3@main"]},
        },
    )
    combos = {
        key: dataclasses.replace(combo, config={"stickyRoundRobinLimit": 1})
        for key, combo in table.combos.items()
    }
    table = dataclasses.replace(table, combos=MappingProxyType(combos))
    plain = combo_plan.RequestFacts(r_in=10, max_out=None)
    session = combo_plan.RequestFacts(r_in=10, max_out=None, session_key="S" * 32)

    def plan(combo: str, facts: Any) -> Callable[[], Any]:
        def run() -> Any:
            health.board.store = store
            combo_reads.stats = target_stats
            combo_reads.pins = combo_session.pins = pin_store
            return combo_plan.plan_combo(table, table.combos[combo], facts)

        return run

    return [
        (
            f"{name}: plan round-robin (record read + compare-and-set)",
            plan("rr", plain),
        ),
        (f"{name}: plan round-robin with a session (+ pins)", plan("rr", session)),
        (f"{name}: plan priority > least-used (records + stats)", plan("outer", plain)),
    ]


def _dead_url() -> str:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return f"redis://127.0.0.1:{sock.getsockname()[1]}/0"


def main() -> int:
    import os

    import django

    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "omniroute_site.settings")
    django.setup()
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", default="redis://127.0.0.1:6379/0")
    parser.add_argument("--runs", type=int, default=5000)
    args = parser.parse_args()
    namespace = f"omniroute-bench-{uuid.uuid4().hex[:8]}:"
    link = RedisLink(args.url, timeout_s=0.05, namespace=namespace)
    down = RedisLink(_dead_url(), timeout_s=0.05, namespace=namespace)
    mirrored = MirroredStore(link)
    raw = link.client
    raw.set(f"{namespace}raw", b"x")
    cases = [
        ("redis-py alone: GET (the floor)", lambda: raw.get(f"{namespace}raw")),
        *_store_cases("local", LocalStore()),
        *_store_cases("redis", RedisStore(link)),
        *_store_cases("mirrored", mirrored),
        *_store_cases("redis down (backed off)", RedisStore(down)),
        *_board_cases("local", LocalStore()),
        *_board_cases("mirrored", MirroredStore(link)),
        *_pin_cases("local", PinStore()),
        *_pin_cases("redis", RedisPinStore(link)),
        *_plan_cases("local", LocalStore(), TargetStats(), PinStore()),
        *_plan_cases(
            "redis",
            MirroredStore(link),
            SharedTargetStats(link),
            RedisPinStore(link),
        ),
    ]
    print("| operation | median µs | p95 µs |\n|---|---:|---:|")
    try:
        for label, fn in cases:
            median, p95 = _time(fn, args.runs)
            print(f"| {label} | {median:.1f} | {p95:.1f} |")
    finally:
        for key in link.client.scan_iter(match=f"{namespace}*"):
            link.client.delete(key)
        link.close()
        down.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
