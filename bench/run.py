"""``make bench``: direct-to-upstream baseline, the floor and the gateway, one run.

Starts the project's mock upstream, the bare ASGI+httpx forwarder (``bench/floor.py``)
and the gateway (one uvicorn worker; optionally also under daphne), then drives each
with wrk at concurrency 1 and 16, non-streaming and streaming, and measures streaming
time to first token with a sequential client.  Processes are pinned: servers under
test on CPU 0, the upstream and the load generator on CPU 1, so every target gets the
same machine.  Results go to ``bench/results/latest.json`` and ``docs/benchmarks.md``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[1]
KEY = "sk-or-bench-000000000000000000000000000000000000"
MESSAGES = [{"role": "user", "content": "Say hello in five words."}]
LUA = f"""
wrk.method = "POST"
wrk.body = os.getenv("BENCH_BODY")
wrk.headers["Content-Type"] = "application/json"
wrk.headers["Authorization"] = "Bearer {KEY}"
"""


@dataclass
class Result:
    target: str
    mode: str
    concurrency: int
    rps: float
    p50_ms: float
    p99_ms: float
    avg_ms: float
    errors: int


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def pinned(cpu: str, argv: list[str]) -> list[str]:
    return ["taskset", "-c", cpu, *argv] if shutil.which("taskset") else argv


def wait_http(url: str, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            httpx.get(url, timeout=1)
        except httpx.HTTPError:
            time.sleep(0.1)
        else:
            return
    raise RuntimeError(f"{url} did not come up")


def _ms(text: str) -> float:
    match = re.match(r"([\d.]+)(us|ms|s|m)$", text)
    if match is None:
        raise ValueError(f"unexpected wrk latency {text!r}")
    value, unit = match.groups()
    return float(value) * {"us": 0.001, "ms": 1.0, "s": 1000.0, "m": 60_000.0}[unit]


def run_wrk(url: str, body: dict, concurrency: int, seconds: int, lua: Path) -> dict:
    env = {**os.environ, "BENCH_BODY": json.dumps(body)}
    argv = pinned(
        "1",
        [
            "wrk",
            "-t1",
            f"-c{concurrency}",
            f"-d{seconds}s",
            "--latency",
            "-s",
            str(lua),
            url,
        ],
    )
    out = subprocess.run(
        argv, env=env, capture_output=True, text=True, check=True
    ).stdout
    if "Latency Distribution" not in out:
        raise RuntimeError(f"wrk output without latencies:\n{out}")
    try:
        return _parse_wrk(out)
    except (AttributeError, ValueError) as exc:
        raise RuntimeError(f"cannot parse wrk output:\n{out}") from exc


def _parse_wrk(out: str) -> dict:
    rps = float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1))  # type: ignore[union-attr]
    avg = _ms(re.search(r"^ +Latency +(\S+)", out, re.M).group(1))  # type: ignore[union-attr]
    p50 = _ms(re.search(r"^ +50% +(\S+)", out, re.M).group(1))  # type: ignore[union-attr]
    p99 = _ms(re.search(r"^ +99% +(\S+)", out, re.M).group(1))  # type: ignore[union-attr]
    errors = re.search(r"Non-2xx or 3xx responses: (\d+)", out)
    socket_errors = re.search(r"Socket errors: .*", out)
    return {
        "rps": rps,
        "avg_ms": avg,
        "p50_ms": p50,
        "p99_ms": p99,
        "errors": int(errors.group(1)) if errors else 0,
        "socket_errors": socket_errors.group(0) if socket_errors else "",
    }


def measure_ttft(url: str, model: str, count: int) -> float:
    """Median ms from sending to the first content token, sequential requests."""
    body = {"model": model, "stream": True, "messages": MESSAGES}
    samples: list[float] = []
    with httpx.Client(timeout=30, headers={"Authorization": f"Bearer {KEY}"}) as http:
        for index in range(count + 20):
            started = time.perf_counter()
            with http.stream("POST", url, json=body) as response:
                lines = response.iter_lines()
                for line in lines:
                    if '"content":"' in line.replace(
                        " ", ""
                    ) and '"content":""' not in (line.replace(" ", "")):
                        break
                elapsed = (time.perf_counter() - started) * 1000
                for _ in lines:
                    pass
            if index >= 20:  # warm-up excluded
                samples.append(elapsed)
    return statistics.median(samples)


class Stack:
    def __init__(self, with_daphne: bool, workers: int = 1) -> None:
        self.processes: list[subprocess.Popen[bytes]] = []
        self.data = Path(tempfile.mkdtemp(prefix="omniroute-bench-"))
        self.mock_port, self.floor_port, self.gw_port = (
            free_port(),
            free_port(),
            free_port(),
        )
        self.daphne_port = free_port() if with_daphne else None
        #: a second gateway with N uvicorn workers on every CPU (scaling, spec 08)
        self.workers = workers
        self.multi_port = free_port() if workers > 1 else None
        self.env = {
            k: v
            for k, v in os.environ.items()
            if not k.startswith(("DATABASE_URL", "REDIS_URL", "OMNIROUTE_"))
        }
        self.env.update(
            {
                "OMNIROUTE_DATA_DIR": str(self.data),
                "DJANGO_SETTINGS_MODULE": "omniroute_site.settings",
                "OMNIROUTE_LOG_LEVEL": "WARNING",
            }
        )

    def spawn(self, argv: list[str], env: dict[str, str] | None = None) -> None:
        log = (self.data / f"proc{len(self.processes)}.log").open("wb")
        self.processes.append(
            subprocess.Popen(
                argv,
                cwd=ROOT,
                env=env or self.env,
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        )

    def start(self) -> None:
        py = sys.executable
        self.spawn(
            pinned(
                "1",
                [py, "-m", "providers.mock_upstream", "--port", str(self.mock_port)],
            )
        )
        mock_url = f"http://127.0.0.1:{self.mock_port}/v1"
        self.spawn(
            pinned(
                "0",
                [
                    py,
                    "-m",
                    "uvicorn",
                    "bench.floor:app",
                    "--port",
                    str(self.floor_port),
                    "--no-access-log",
                    "--log-level",
                    "warning",
                    "--loop",
                    "uvloop",
                    "--http",
                    "httptools",
                ],
            ),
            env={**self.env, "FLOOR_UPSTREAM": mock_url},
        )
        subprocess.run(
            [py, "manage.py", "migrate", "-v0"], cwd=ROOT, env=self.env, check=True
        )
        config = f"""
providers:
  - slug: up
    kind: openai
    base_url: {mock_url}
    connections: [{{name: main, api_key: sk-bench-upstream}}]
    models: [{{id: mock-small, input_cost: 0.05, output_cost: 0.4}}]
api_keys:
  - name: bench
    key: {KEY}
"""
        subprocess.run(
            [py, "manage.py", "import_config", "-"],
            cwd=ROOT,
            env=self.env,
            input=config.encode(),
            check=True,
            capture_output=True,
        )
        self.spawn(
            pinned(
                "0",
                [
                    py,
                    "-m",
                    "uvicorn",
                    "omniroute_site.asgi:application",
                    "--port",
                    str(self.gw_port),
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
            )
        )
        if self.daphne_port:
            self.spawn(
                pinned(
                    "0",
                    [
                        str(Path(py).parent / "daphne"),
                        "-p",
                        str(self.daphne_port),
                        "-v",
                        "0",
                        "omniroute_site.asgi:application",
                    ],
                )
            )
        if self.multi_port:
            self.spawn(
                pinned(
                    ",".join(str(i) for i in range(os.cpu_count() or 1)),
                    [
                        py,
                        "-m",
                        "uvicorn",
                        "omniroute_site.asgi:application",
                        "--port",
                        str(self.multi_port),
                        "--workers",
                        str(self.workers),
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
                )
            )
        ports = (
            self.mock_port,
            self.floor_port,
            self.gw_port,
            self.daphne_port,
            self.multi_port,
        )
        for port in ports:
            if port:
                wait_http(f"http://127.0.0.1:{port}/healthz")

    def stop(self) -> None:
        for process in self.processes:
            process.terminate()
        for process in self.processes:
            try:
                process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                process.kill()


def targets(stack: Stack) -> list[tuple[str, str, str]]:
    """(name, URL, model) of every system measured."""
    items = [
        (
            "direct",
            f"http://127.0.0.1:{stack.mock_port}/v1/chat/completions",
            "mock-small",
        ),
        (
            "floor",
            f"http://127.0.0.1:{stack.floor_port}/v1/chat/completions",
            "mock-small",
        ),
        (
            "gateway",
            f"http://127.0.0.1:{stack.gw_port}/v1/chat/completions",
            "up/mock-small",
        ),
    ]
    if stack.multi_port:
        items.append(
            (
                f"gateway-{stack.workers}w",
                f"http://127.0.0.1:{stack.multi_port}/v1/chat/completions",
                "up/mock-small",
            )
        )
    if stack.daphne_port:
        items.append(
            (
                "gateway-daphne",
                f"http://127.0.0.1:{stack.daphne_port}/v1/chat/completions",
                "up/mock-small",
            )
        )
    return items


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--seconds", type=int, default=10)
    parser.add_argument("--ttft-samples", type=int, default=300)
    parser.add_argument("--daphne", action="store_true", help="also measure daphne")
    parser.add_argument("--no-docs", action="store_true")
    parser.add_argument(
        "--workers",
        type=int,
        default=2,
        help="also measure a gateway with N uvicorn workers (1 = skip)",
    )
    args = parser.parse_args(argv)
    if not shutil.which("wrk"):
        print("wrk is required (Debian: apt-get install wrk)", file=sys.stderr)
        return 2
    stack = Stack(args.daphne, args.workers)
    lua = stack.data / "post.lua"
    lua.write_text(LUA)
    results: list[Result] = []
    ttft: dict[str, float] = {}
    try:
        stack.start()
        for name, url, model in targets(stack):
            for stream in (False, True):
                body = {"model": model, "messages": MESSAGES, "stream": stream}
                run_wrk(url, body, 16, 3, lua)  # warm-up
                for concurrency in (1, 16):
                    data = run_wrk(url, body, concurrency, args.seconds, lua)
                    results.append(
                        Result(
                            name,
                            "stream" if stream else "json",
                            concurrency,
                            data["rps"],
                            data["p50_ms"],
                            data["p99_ms"],
                            data["avg_ms"],
                            data["errors"],
                        )
                    )
                    print(
                        f"{name:15} {'stream' if stream else 'json':6} c{concurrency:<3}"
                        f" {data['rps']:8.0f} rps  p50 {data['p50_ms']:6.2f} ms  "
                        f"p99 {data['p99_ms']:6.2f} ms  errors {data['errors']}"
                        f" {data['socket_errors']}",
                        flush=True,
                    )
            ttft[name] = measure_ttft(url, model, args.ttft_samples)
            print(f"{name:15} TTFT median {ttft[name]:.3f} ms", flush=True)
    finally:
        stack.stop()
    report = {
        "when": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "machine": f"{platform.machine()}, {os.cpu_count()} CPUs, Python "
        f"{platform.python_version()}",
        "seconds": args.seconds,
        "results": [asdict(r) for r in results],
        "ttft_median_ms": ttft,
    }
    out = ROOT / "bench" / "results"
    out.mkdir(exist_ok=True)
    (out / "latest.json").write_text(json.dumps(report, indent=2))
    if not args.no_docs:
        from bench.report import write_docs

        write_docs(report, ROOT / "docs" / "benchmarks.md")
    return 0


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    raise SystemExit(main())
