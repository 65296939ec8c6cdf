"""``make bench-routing``: routing quality under a scripted fault schedule (issue #17).

For each route (an ``adaptive`` combo with objective ``latency``, ``balanced`` and
``cost``; ``auto``; ``auto/cheap`` with a 10 s and with the default 300 s first
self-healing exclusion; a ``priority`` combo in price order) this starts a fresh
gateway (one uvicorn worker, a new data dir: no health, estimator or self-healing
state carries over), configured with ``manage.py import_config``, in front of four
mock upstreams (``python -m providers.mock_upstream``, one process per provider), and
replays the same run:

- open-loop traffic: seeded Poisson arrivals at ``--rate`` per second, each sent at
  its time whatever the earlier ones are doing (asyncio + httpx, no concurrency cap);
  the achieved send rate and the lag behind the arrival times are reported;
- the fault schedule of ``bench/routing_schedule.py``: a scheduler task resets a
  provider's mock and installs its fault behaviours when a fault starts, and its
  base behaviour when it ends.

Per route: success rate, client-observed p50/p95 latency, the cost billed (the
request log's ``cost_usd``, checked against served provider x tokens from the
responses) and that cost over the oracle's, the cheapest provider not faulted at each
request's send time, priced with the same tokens.  The share each provider served in
each phase of the schedule and the attempts per provider and result, from the
gateway's ``telemetry_requestlog``/``telemetry_attemptlog``, are in the JSON.

    .venv/bin/python bench/routing_quality.py            # the full run, ~14 min
    .venv/bin/python bench/routing_quality.py --quick    # the schedule at 0.4x time
    .venv/bin/python bench/routing_quality.py --routes adaptive-cost,auto-cheap-10

Results: ``bench/results/routing_quality.json`` and, unless ``--no-docs``, the
generated section of ``docs/benchmarks.md``.  Servers under test run on CPU 0, the
mocks and the load generator on CPU 1 (when ``taskset`` exists).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import shutil
import socket
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter, defaultdict
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench.routing_schedule import (  # noqa: E402
    BY_SLUG,
    COMPLETION_TOKENS,
    PROVIDERS,
    AppliedSchedule,
    Fault,
    Provider,
    arrivals,
    check_schedule,
    fault_rules,
    oracle_provider,
    phase_of,
    phases,
    prompt_tokens,
    scaled,
)

KEY = "sk-or-rq-bench-0000000000000000000000000000000000"
CLIENT_TIMEOUT_S = 30.0


@dataclass(frozen=True)
class Route:
    name: str
    label: str
    model: str  # what the client sends
    settings: dict[str, Any] = field(default_factory=dict)
    #: the issue's cost target (cost / oracle at most this), if any
    cost_target: float | None = None


ROUTES: tuple[Route, ...] = (
    Route("adaptive-latency", "`adaptive`, objective `latency`", "rq-latency"),
    Route(
        "adaptive-balanced",
        "`adaptive`, objective `balanced`",
        "rq-balanced",
        cost_target=1.2,
    ),
    Route("adaptive-cost", "`adaptive`, objective `cost`", "rq-cost", cost_target=1.0),
    Route("auto", "`auto`", "auto"),
    Route(
        "auto-cheap-10",
        "`auto/cheap`, first exclusion 10 s",
        "auto/cheap",
        {"self_healing": {"exclusion_seconds": 10}},
        cost_target=1.1,
    ),
    Route(
        "auto-cheap-300",
        "`auto/cheap`, first exclusion 300 s (default)",
        "auto/cheap",
    ),
    Route("priority", "`priority`, in price order", "rq-priority"),
)
BY_NAME = {r.name: r for r in ROUTES}


def config_yaml(mock_ports: dict[str, int], route: Route) -> str:
    """The gateway's configuration: four providers, the combos, the key."""
    lines = ["providers:"]
    for p in PROVIDERS:
        lines += [
            f"  - slug: {p.slug}",
            "    kind: openai",
            f"    base_url: http://127.0.0.1:{mock_ports[p.slug]}/v1",
            "    connections: [{name: main, api_key: sk-rq-upstream}]",
            "    models:",
            f"      - id: {p.model}",
            f"        input_cost: {p.input_cost}",
            f"        output_cost: {p.output_cost}",
            "        context_window: 128000",
            "        max_output_tokens: 16384",
            "        capabilities: [tools, json]",
        ]
    targets = "\n".join(f"      - model: {p.target}" for p in PROVIDERS)
    lines.append("combos:")
    for objective in ("latency", "balanced", "cost"):
        lines += [
            f"  - name: rq-{objective}",
            "    strategy: adaptive",
            f"    config: {{objective: {objective}}}",
            "    targets:",
            targets,
        ]
    lines += [
        "  - name: rq-priority",
        "    strategy: priority",
        "    targets:",
        targets,
    ]
    lines += [
        "api_keys:",
        "  - name: rq-bench",
        f"    key: {KEY}",
        '    allowed_models: ["*"]',
    ]
    if route.settings:
        lines.append("settings: " + json.dumps(route.settings))
    return "\n".join(lines) + "\n"


# --- processes ------------------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def pinned(cpu: str, argv: list[str]) -> list[str]:
    return ["taskset", "-c", cpu, *argv] if shutil.which("taskset") else argv


def wait_http(url: str, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            httpx.get(url, timeout=1)
        except httpx.HTTPError:
            time.sleep(0.1)
        else:
            return
    raise RuntimeError(f"{url} did not come up")


def clean_env(data: Path) -> dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("DATABASE_URL", "REDIS_URL", "OMNIROUTE_"))
    }
    env.update(
        {
            "OMNIROUTE_DATA_DIR": str(data),
            "OMNIROUTE_SCHEDULER": "off",
            "DJANGO_SETTINGS_MODULE": "omniroute_site.settings",
            "OMNIROUTE_LOG_LEVEL": "WARNING",
        }
    )
    return env


class Mocks:
    """One mock upstream process per provider, on CPU 1."""

    def __init__(self, logs: Path) -> None:
        self.ports = {p.slug: free_port() for p in PROVIDERS}
        self.processes: list[subprocess.Popen[bytes]] = []
        self.logs = logs

    def start(self) -> None:
        for slug, port in self.ports.items():
            log = (self.logs / f"mock-{slug}.log").open("wb")
            self.processes.append(
                subprocess.Popen(
                    pinned(
                        "1",
                        [
                            sys.executable,
                            "-m",
                            "providers.mock_upstream",
                            "--port",
                            str(port),
                            "--models",
                            BY_SLUG[slug].model,
                        ],
                    ),
                    cwd=ROOT,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                )
            )
        for port in self.ports.values():
            wait_http(f"http://127.0.0.1:{port}/v1/models")

    def stop(self) -> None:
        for process in self.processes:
            process.terminate()
        for process in self.processes:
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                process.kill()


class Gateway:
    """A fresh gateway for one route: its own data dir, migrated once (a template
    copied per route), ``import_config``, one uvicorn worker on CPU 0."""

    def __init__(self, template: Path, route: Route, mock_ports: dict[str, int]):
        self.data = Path(tempfile.mkdtemp(prefix=f"omniroute-rq-{route.name}-"))
        shutil.copy(template / "omniroute.sqlite3", self.data / "omniroute.sqlite3")
        self.env = clean_env(self.data)
        self.port = free_port()
        self.route = route
        self.mock_ports = mock_ports
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def db(self) -> Path:
        return self.data / "omniroute.sqlite3"

    def start(self) -> None:
        subprocess.run(
            [sys.executable, "manage.py", "import_config", "-"],
            cwd=ROOT,
            env=self.env,
            input=config_yaml(self.mock_ports, self.route).encode(),
            check=True,
            capture_output=True,
        )
        log = (self.data / "gateway.log").open("wb")
        self.process = subprocess.Popen(
            pinned(
                "0",
                [
                    sys.executable,
                    "-m",
                    "uvicorn",
                    "omniroute_site.asgi:application",
                    "--port",
                    str(self.port),
                    "--lifespan",
                    "on",
                    "--no-access-log",
                    "--log-level",
                    "warning",
                    "--loop",
                    "uvloop",
                    "--http",
                    "httptools",
                ],
            ),
            cwd=ROOT,
            env=self.env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        wait_http(f"http://127.0.0.1:{self.port}/healthz")

    def stop(self) -> None:
        """SIGTERM: the lifespan shutdown flushes the request log."""
        if self.process is None:
            return
        self.process.terminate()
        try:
            self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.process.kill()


def migrated_template() -> Path:
    data = Path(tempfile.mkdtemp(prefix="omniroute-rq-template-"))
    subprocess.run(
        [sys.executable, "manage.py", "migrate", "-v0"],
        cwd=ROOT,
        env=clean_env(data),
        check=True,
    )
    return data


# --- the run --------------------------------------------------------------------------


@dataclass
class Sample:
    index: int
    scheduled: float  # seconds into the run
    sent: float
    latency_ms: float
    status: int  # 0: no HTTP response
    provider: str | None
    prompt_tokens: int
    completion_tokens: int
    attempts: int
    error: str | None = None


class FaultDriver:
    """Installs the schedule on the mocks at its times (a task beside the load)."""

    def __init__(
        self,
        client: httpx.AsyncClient,
        mock_ports: dict[str, int],
        schedule: tuple[Fault, ...],
        rate: float,
        seed: int,
    ) -> None:
        self.client = client
        self.ports = mock_ports
        self.schedule = schedule
        self.rate = rate
        self.seed = seed
        self.applied = AppliedSchedule()

    async def install(self, provider: Provider, fault: Fault | None) -> None:
        base = f"http://127.0.0.1:{self.ports[provider.slug]}/_mock"
        expected = 0
        if fault is not None:  # every request of the burst, with a margin
            expected = int(self.rate * (fault.end - fault.start) * 1.5) + 200
        rules = fault_rules(provider, fault, expected, self.seed)
        (await self.client.post(f"{base}/reset")).raise_for_status()
        (await self.client.post(f"{base}/behaviours", json=rules)).raise_for_status()

    async def run(self, t0: float) -> None:
        events = sorted(
            [(f.start, 1, f) for f in self.schedule]
            + [(f.end, 0, f) for f in self.schedule],
            key=lambda e: (e[0], e[1]),
        )
        loop = asyncio.get_running_loop()
        for at, starting, fault in events:
            delay = t0 + at - loop.time()
            if delay > 0:
                await asyncio.sleep(delay)
            provider = BY_SLUG[fault.provider]
            await self.install(provider, fault if starting else None)
            self.applied.record(loop.time() - t0, provider.slug, bool(starting))


async def one_request(
    client: httpx.AsyncClient,
    url: str,
    route: Route,
    index: int,
    scheduled: float,
    t0: float,
) -> Sample:
    loop = asyncio.get_running_loop()
    messages = [
        {
            "role": "user",
            "content": f"Request {index}: summarise the routing benchmark in a line.",
        }
    ]
    body = {"model": route.model, "messages": messages, "max_tokens": 256}
    sent = loop.time()
    status, provider, error = 0, None, None
    usage: dict[str, Any] = {}
    attempts = 0
    try:
        response = await client.post(url, json=body)
        status = response.status_code
        attempts = int(response.headers.get("x-omniroute-attempts") or 0)
        if response.is_success:
            data = response.json()
            provider = (data.get("omniroute") or {}).get("provider")
            usage = data.get("usage") or {}
        else:
            error = response.text[:200]
    except httpx.HTTPError as exc:
        error = repr(exc)[:200]
    latency = (loop.time() - sent) * 1000
    return Sample(
        index=index,
        scheduled=scheduled,
        sent=sent - t0,
        latency_ms=latency,
        status=status,
        provider=provider,
        prompt_tokens=int(usage.get("prompt_tokens") or prompt_tokens(messages)),
        completion_tokens=int(usage.get("completion_tokens") or COMPLETION_TOKENS),
        attempts=attempts,
        error=error,
    )


async def drive(
    gateway_port: int,
    mock_ports: dict[str, int],
    route: Route,
    schedule: tuple[Fault, ...],
    duration: float,
    rate: float,
    seed: int,
    poisson: bool,
) -> tuple[list[Sample], AppliedSchedule, float]:
    """The open-loop run: (samples, when faults were applied, run start wall time)."""
    url = f"http://127.0.0.1:{gateway_port}/v1/chat/completions"
    limits = httpx.Limits(max_connections=None, max_keepalive_connections=512)
    headers = {"Authorization": f"Bearer {KEY}"}
    times = arrivals(rate, duration, seed, poisson)
    async with (
        httpx.AsyncClient(
            limits=limits, timeout=CLIENT_TIMEOUT_S, headers=headers
        ) as client,
        httpx.AsyncClient(timeout=10) as control,
    ):
        driver = FaultDriver(control, mock_ports, schedule, rate, seed)
        loop = asyncio.get_running_loop()
        for provider in PROVIDERS:  # base behaviours before the first request
            await driver.install(provider, None)
        t0 = loop.time() + 0.2
        wall0 = time.time() + 0.2
        scheduler = asyncio.create_task(driver.run(t0))
        tasks: list[asyncio.Task[Sample]] = []
        for index, at in enumerate(times):
            delay = t0 + at - loop.time()
            if delay > 0:
                await asyncio.sleep(delay)
            tasks.append(
                asyncio.create_task(one_request(client, url, route, index, at, t0))
            )
        samples = list(await asyncio.gather(*tasks))
        await scheduler
    return samples, driver.applied, wall0


# --- results --------------------------------------------------------------------------


def percentile(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    k = max(0, min(len(ordered) - 1, round(q * (len(ordered) - 1))))
    return ordered[k]


def read_log(db: Path, wall0: float, route: Route) -> dict[str, Any]:
    """Cost and per-provider figures from the gateway's request and attempt logs."""

    def rel(stamp: str) -> float:
        when = datetime.fromisoformat(stamp)
        if when.tzinfo is None:
            when = when.replace(tzinfo=UTC)
        return when.timestamp() - wall0

    with sqlite3.connect(db) as conn:
        requests = conn.execute(
            "SELECT id, created_at, provider, status, cost_usd, attempt_count "
            "FROM telemetry_requestlog WHERE requested_model = ?",
            (route.model,),
        ).fetchall()
        attempts = conn.execute(
            "SELECT a.started_at, a.provider, a.result, a.http_status, a.reason "
            "FROM telemetry_attemptlog a JOIN telemetry_requestlog r "
            "ON a.request_id = r.id WHERE r.requested_model = ?",
            (route.model,),
        ).fetchall()
        penalties = conn.execute(
            "SELECT a.started_at, a.provider, a.cooldown_trigger "
            "FROM telemetry_attemptlog a JOIN telemetry_requestlog r "
            "ON a.request_id = r.id WHERE r.requested_model = ? "
            "AND a.cooldown_trigger IS NOT NULL ORDER BY a.started_at",
            (route.model,),
        ).fetchall()
        explored = conn.execute(
            "SELECT provider, COUNT(*) FROM telemetry_requestlog "
            "WHERE requested_model = ? "
            "AND json_extract(auto_decision, '$.explored') = 1 GROUP BY provider",
            (route.model,),
        ).fetchall()
        probes = conn.execute(
            "SELECT COUNT(*) FROM telemetry_requestlog WHERE requested_model = ? "
            "AND json_extract(auto_decision, '$.probe') IS NOT NULL",
            (route.model,),
        ).fetchone()[0]
    cost = sum(float(row[4] or 0) for row in requests)
    return {
        "requests_logged": len(requests),
        "cost_usd": cost,
        "served": Counter(row[2] for row in requests if row[2]),
        "attempt_rows": [
            (rel(started), provider, result, http_status, reason)
            for started, provider, result, http_status, reason in attempts
        ],
        "request_rows": [(rel(row[1]), row[2], row[3]) for row in requests],
        #: health penalties an attempt started (breaker opened, cooldown, ...)
        "penalties": [
            {"t": round(rel(started), 2), "provider": provider, "trigger": trigger}
            for started, provider, trigger in penalties
        ],
        #: auto routes: requests that explored (spec 04 §7), by served provider
        "explored": {provider or "failed": n for provider, n in explored},
        "healing_probes": probes,
    }


def summarise(
    route: Route,
    samples: list[Sample],
    schedule: tuple[Fault, ...],
    applied: AppliedSchedule,
    duration: float,
    log: dict[str, Any],
    load: tuple[float, float],
) -> dict[str, Any]:
    ok = [s for s in samples if 200 <= s.status < 300 and s.provider]
    latencies = [s.latency_ms for s in samples]
    ok_latencies = [s.latency_ms for s in ok]
    real_faults = applied.faults()
    client_cost = sum(
        BY_SLUG[s.provider].cost(s.prompt_tokens, s.completion_tokens)
        for s in ok
        if s.provider in BY_SLUG
    )
    oracle_cost = sum(
        oracle_provider(real_faults, s.sent).cost(s.prompt_tokens, s.completion_tokens)
        for s in samples
    )
    sent = [s.sent for s in samples]
    lags = [(s.sent - s.scheduled) * 1000 for s in samples]
    span = (max(sent) - min(sent)) if len(sent) > 1 else 0.0
    cuts = phases(schedule, duration)
    starts = [a for a, _ in cuts]
    share: list[dict[str, Any]] = []
    by_phase: dict[int, Counter[str]] = defaultdict(Counter)
    phase_cost: dict[int, float] = defaultdict(float)
    phase_oracle: dict[int, float] = defaultdict(float)
    for s in samples:
        index = phase_of(starts, s.sent)
        by_phase[index][s.provider or "failed"] += 1
        if s.provider in BY_SLUG and 200 <= s.status < 300:
            phase_cost[index] += BY_SLUG[s.provider].cost(
                s.prompt_tokens, s.completion_tokens
            )
        phase_oracle[index] += oracle_provider(real_faults, s.sent).cost(
            s.prompt_tokens, s.completion_tokens
        )
    attempt_phase: dict[int, Counter[str]] = defaultdict(Counter)
    for t, provider, result, _status, _reason in log["attempt_rows"]:
        attempt_phase[phase_of(starts, t)][f"{provider}:{result}"] += 1
    for index, (a, b) in enumerate(cuts):
        down = sorted({f.provider for f in schedule if f.start < b and a < f.end})
        oracle = oracle_provider(schedule, (a + b) / 2).slug
        share.append(
            {
                "from": a,
                "to": b,
                "faulted": down,
                "oracle": oracle,
                "served": dict(by_phase[index]),
                "attempts": dict(attempt_phase[index]),
                "cost_usd": phase_cost[index],
                "oracle_cost_usd": phase_oracle[index],
            }
        )
    attempts_by = Counter(
        f"{provider}:{result}" for _t, provider, result, _s, _r in log["attempt_rows"]
    )
    errors = Counter(
        f"{s.status} {(s.error or '')[:80]}" for s in samples if s not in ok
    )
    return {
        "route": route.name,
        "label": route.label,
        "model": route.model,
        "settings": route.settings,
        "cost_target": route.cost_target,
        "requests": len(samples),
        "succeeded": len(ok),
        "success_rate": len(ok) / len(samples) if samples else 0.0,
        "p50_ms": percentile(latencies, 0.50),
        "p95_ms": percentile(latencies, 0.95),
        "p99_ms": percentile(latencies, 0.99),
        "p95_ok_ms": percentile(ok_latencies, 0.95),
        "cost_usd": log["cost_usd"],
        "client_cost_usd": client_cost,
        "oracle_cost_usd": oracle_cost,
        "cost_ratio": log["cost_usd"] / oracle_cost if oracle_cost else float("nan"),
        "requests_logged": log["requests_logged"],
        "send_rate": (len(samples) - 1) / span if span else 0.0,
        "send_lag_p99_ms": percentile(lags, 0.99),
        "send_lag_max_ms": max(lags) if lags else 0.0,
        "mean_attempts": statistics.fmean(s.attempts for s in ok) if ok else 0.0,
        "served": dict(Counter(s.provider for s in ok)),
        "attempts": dict(attempts_by),
        "phases": share,
        "applied": [asdict(f) for f in real_faults],
        "errors": dict(errors.most_common(5)),
        "penalties": log["penalties"],
        "explored": log["explored"],
        "healing_probes": log["healing_probes"],
        "load_average": [round(load[0], 2), round(load[1], 2)],
    }


def scrape_selections(port: int, combo: str) -> dict[str, int]:
    """``omniroute_routing_selections_total`` of ``combo`` as ``target reason`` ->
    count (adaptive combos: how many first picks were p2c, trickle, ...)."""
    text = httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=10).text
    out: dict[str, int] = {}
    for line in text.splitlines():
        if not line.startswith("omniroute_routing_selections_total{"):
            continue
        labels, _, value = line.rpartition(" ")
        pairs = dict(
            part.split("=", 1) for part in labels[labels.index("{") + 1 : -1].split(",")
        )
        if pairs.get("combo", "").strip('"') != combo:
            continue
        target = pairs.get("target", "").strip('"').split("/")[0]
        key = f"{target} {pairs.get('reason', '').strip(chr(34))}"
        out[key] = out.get(key, 0) + int(float(value))
    return out


def git_state() -> dict[str, Any]:
    """The commit measured, and whether the engine's files differ from it."""

    def git(*argv: str) -> str:
        done = subprocess.run(
            ["git", *argv], cwd=ROOT, capture_output=True, text=True, check=False
        )
        return done.stdout.strip()

    dirty = git("status", "--porcelain", "--", "gateway", "providers", "combos")
    return {"commit": git("rev-parse", "--short", "HEAD"), "engine_dirty": dirty}


def run_route(
    route: Route,
    template: Path,
    mocks: Mocks,
    schedule: tuple[Fault, ...],
    duration: float,
    args: argparse.Namespace,
) -> dict[str, Any]:
    gateway = Gateway(template, route, mocks.ports)
    load_before = os.getloadavg()[0]
    try:
        gateway.start()
        with httpx.Client(
            timeout=10, headers={"Authorization": f"Bearer {KEY}"}
        ) as http:
            for p in PROVIDERS:  # each provider answers through the gateway
                response = http.post(
                    f"http://127.0.0.1:{gateway.port}/v1/chat/completions",
                    json={
                        "model": p.target,
                        "messages": [{"role": "user", "content": "ping"}],
                    },
                )
                response.raise_for_status()
        samples, applied, wall0 = asyncio.run(
            drive(
                gateway.port,
                mocks.ports,
                route,
                schedule,
                duration,
                args.rate,
                args.seed,
                not args.fixed_rate,
            )
        )
        selections = scrape_selections(gateway.port, route.model)
    finally:
        gateway.stop()
    log = read_log(gateway.db, wall0, route)
    result = summarise(
        route,
        samples,
        schedule,
        applied,
        duration,
        log,
        (load_before, os.getloadavg()[0]),
    )
    result["selections"] = selections
    result["data_dir"] = str(gateway.data)
    if args.clean:
        shutil.rmtree(gateway.data, ignore_errors=True)
        result["data_dir"] = None
    return result


def print_row(r: dict[str, Any]) -> None:
    print(
        f"{r['route']:18} success {r['success_rate']:8.4%}  p50 {r['p50_ms']:6.0f} ms"
        f"  p95 {r['p95_ms']:6.0f} ms  cost ${r['cost_usd']:.5f}"
        f" / oracle ${r['oracle_cost_usd']:.5f} = {r['cost_ratio']:.2f}x"
        f"  sent {r['send_rate']:.1f}/s (lag p99 {r['send_lag_p99_ms']:.1f} ms)"
        f"  served {r['served']}",
        flush=True,
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rate", type=float, default=40.0, help="requests/s")
    parser.add_argument("--seed", type=int, default=17)
    parser.add_argument(
        "--scale", type=float, default=1.0, help="multiply the schedule's times"
    )
    parser.add_argument("--quick", action="store_true", help="--scale 0.4")
    parser.add_argument("--fixed-rate", action="store_true", help="not Poisson")
    parser.add_argument(
        "--routes", default=",".join(r.name for r in ROUTES), help="comma-separated"
    )
    parser.add_argument("--no-docs", action="store_true")
    parser.add_argument(
        "--clean", action="store_true", help="delete the gateways' data dirs"
    )
    parser.add_argument(
        "--out", default=str(ROOT / "bench" / "results" / "routing_quality.json")
    )
    args = parser.parse_args(argv)
    scale = 0.4 if args.quick else args.scale
    duration, schedule = scaled(scale)
    check_schedule(schedule)
    names = [n.strip() for n in args.routes.split(",") if n.strip()]
    unknown = [n for n in names if n not in BY_NAME]
    if unknown:
        parser.error(f"unknown routes {unknown}; known: {sorted(BY_NAME)}")
    started = time.time()
    load_before = os.getloadavg()
    logs = Path(tempfile.mkdtemp(prefix="omniroute-rq-mocks-"))
    template = migrated_template()
    mocks = Mocks(logs)
    results = []
    try:
        mocks.start()
        for name in names:
            print(f"--- {name}: {duration:.0f} s at {args.rate:g} req/s", flush=True)
            result = run_route(BY_NAME[name], template, mocks, schedule, duration, args)
            print_row(result)
            results.append(result)
    finally:
        mocks.stop()
        shutil.rmtree(template, ignore_errors=True)
    report = {
        "when": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(started)),
        "machine": f"{platform.machine()}, {os.cpu_count()} CPUs, Python "
        f"{platform.python_version()}",
        **git_state(),
        "command": "python bench/routing_quality.py "
        + " ".join(argv if argv is not None else sys.argv[1:]),
        "rate": args.rate,
        "poisson": not args.fixed_rate,
        "seed": args.seed,
        "scale": scale,
        "duration_s": duration,
        "wall_minutes": round((time.time() - started) / 60, 1),
        "load_average_before": [round(x, 2) for x in load_before],
        "load_average_after": [round(x, 2) for x in os.getloadavg()],
        "providers": [asdict(p) for p in PROVIDERS],
        "completion_tokens": COMPLETION_TOKENS,
        "schedule": [asdict(f) for f in schedule],
        "results": results,
    }
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=2, default=str))
    print(f"wrote {out}")
    if not args.no_docs:
        from bench.routing_report import write_docs

        write_docs(report, ROOT / "docs" / "benchmarks.md")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
