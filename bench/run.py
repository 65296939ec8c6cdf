"""``make bench``: direct-to-upstream baseline, the floor and the gateway, one run.

Starts the project's mock upstream, the bare ASGI+httpx forwarder (``bench/floor.py``)
and the gateway (one uvicorn worker; optionally also under daphne), then drives each
with wrk at concurrency 1 and 16, non-streaming and streaming, and measures streaming
time to first token with a sequential client.  Processes are pinned: servers under
test on CPU 0, the upstream and the load generator on CPU 1, so every target gets the
same machine.  Results go to ``bench/results/latest.json`` and ``docs/benchmarks.md``.

Besides Chat Completions, the other client surfaces (spec 09) are measured the same
way, each as a *passthrough* (the upstream speaks the surface) and a *translated*
(through the canonical chat form to a chat upstream) case: see ``CASES``.  A case the
gateway or the mock cannot serve yet is skipped with a note, not a crash.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import shutil
import socket
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parents[1]
KEY = "sk-or-bench-000000000000000000000000000000000000"
PROMPT = "Say hello in five words."
MESSAGES = [{"role": "user", "content": PROMPT}]
MAX_TOKENS = 64
LUA = f"""
wrk.method = "POST"
wrk.body = os.getenv("BENCH_BODY")
wrk.headers["Content-Type"] = "application/json"
wrk.headers["Authorization"] = "Bearer {KEY}"
"""
#: the Messages surface: the key where the anthropic SDK and Claude Code put it
MESSAGES_HEADERS = {"x-api-key": KEY, "anthropic-version": "2023-06-01"}


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
    surface: str = "chat"
    flavour: str = ""


Body = Callable[[str, bool], dict[str, Any]]


def chat_body(model: str, stream: bool) -> dict[str, Any]:
    return {"model": model, "messages": MESSAGES, "stream": stream}


def chat_body_max_tokens(model: str, stream: bool) -> dict[str, Any]:
    """What the Messages body below says, as a chat body."""
    return {**chat_body(model, stream), "max_tokens": MAX_TOKENS}


def messages_body(model: str, stream: bool) -> dict[str, Any]:
    return {
        "model": model,
        "max_tokens": MAX_TOKENS,
        "messages": MESSAGES,
        "stream": stream,
    }


def responses_body(store: bool | None) -> Body:
    def body(model: str, stream: bool) -> dict[str, Any]:
        out: dict[str, Any] = {"model": model, "input": PROMPT, "stream": stream}
        if store is not None:
            out["store"] = store
        return out

    return body


def _chat_token(line: str) -> bool:
    line = line.replace(" ", "")
    return '"content":"' in line and '"content":""' not in line


def _messages_token(line: str) -> bool:
    return line.startswith("data:") and '"text_delta"' in line


def _responses_token(line: str) -> bool:
    return line.startswith("data:") and '"response.output_text.delta"' in line


#: a stream line carrying the first content token, by the request's path
FIRST_TOKEN: dict[str, Callable[[str], bool]] = {
    "/v1/chat/completions": _chat_token,
    "/v1/messages": _messages_token,
    "/v1/responses": _responses_token,
}


@dataclass(frozen=True)
class Case:
    """One surface in one flavour: the gateway request and its direct baseline.

    ``direct`` and ``floor`` carry the baseline request (the floor cannot translate);
    ``baseline`` names another flavour of the same surface whose direct and floor
    rows this case shares instead of measuring its own.
    """

    surface: str
    flavour: str
    path: str
    model: str
    body: Body
    headers: dict[str, str]
    direct_path: str
    direct_body: Body
    direct_headers: dict[str, str]
    baseline: str | None = None
    #: a provider the runner imports on its own, whose refusal skips the case
    needs: str | None = None


CASES = (
    Case(
        "messages",
        "passthrough",
        path="/v1/messages",
        model="ant/mock-small",
        body=messages_body,
        headers=MESSAGES_HEADERS,
        direct_path="/v1/messages",
        direct_body=messages_body,
        direct_headers=MESSAGES_HEADERS,
    ),
    Case(
        "messages",
        "translated",
        path="/v1/messages",
        model="up/mock-small",
        body=messages_body,
        headers=MESSAGES_HEADERS,
        direct_path="/v1/chat/completions",
        direct_body=chat_body_max_tokens,
        direct_headers={},
    ),
    Case(
        "responses",
        "passthrough",
        path="/v1/responses",
        model="upr/mock-small",
        body=responses_body(store=False),
        headers={},
        direct_path="/v1/responses",
        direct_body=responses_body(store=False),
        direct_headers={},
        needs="upr",
    ),
    Case(
        "responses",
        "translated",
        path="/v1/responses",
        model="up/mock-small",
        body=responses_body(store=False),
        headers={},
        direct_path="/v1/chat/completions",
        direct_body=chat_body,
        direct_headers={},
    ),
    Case(  # the stored-response write included, against the row above's baseline
        "responses",
        "translated, stored",
        path="/v1/responses",
        model="up/mock-small",
        body=responses_body(store=None),
        headers={},
        direct_path="/v1/chat/completions",
        direct_body=chat_body,
        direct_headers={},
        baseline="translated",
    ),
)


def lua_script(headers: dict[str, str]) -> str:
    """The wrk script: the chat one, or the same with the surface's headers."""
    if not headers:
        return LUA
    lines = [
        'wrk.method = "POST"',
        'wrk.body = os.getenv("BENCH_BODY")',
        'wrk.headers["Content-Type"] = "application/json"',
    ]
    lines += [f'wrk.headers["{name}"] = "{value}"' for name, value in headers.items()]
    return "\n" + "\n".join(lines) + "\n"


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


def measure_ttft(
    url: str,
    model: str,
    count: int,
    body: dict[str, Any] | None = None,
    headers: dict[str, str] | None = None,
    first_token: Callable[[str], bool] = _chat_token,
) -> float:
    """Median ms from sending to the first content token, sequential requests."""
    if body is None:
        body = {"model": model, "stream": True, "messages": MESSAGES}
    with httpx.Client(
        timeout=30, headers=headers or {"Authorization": f"Bearer {KEY}"}
    ) as http:
        samples: list[float] = []
        for index in range(count + 20):
            started = time.perf_counter()
            with http.stream("POST", url, json=body) as response:
                lines = response.iter_lines()
                for line in lines:
                    if first_token(line):
                        break
                else:
                    raise RuntimeError(f"{url}: a stream without a content token")
                elapsed = (time.perf_counter() - started) * 1000
                for _ in lines:
                    pass
            if index >= 20:  # warm-up excluded
                samples.append(elapsed)
    return statistics.median(samples)


def probe(url: str, body: dict[str, Any], headers: dict[str, str]) -> str | None:
    """None when one request answers 2xx with a body, else the request and the
    response, for the report."""
    try:
        with httpx.Client(
            timeout=30, headers=headers or {"Authorization": f"Bearer {KEY}"}
        ) as http:
            response = http.post(url, json=body)
    except httpx.HTTPError as exc:
        return f"POST {url} {json.dumps(body)}: {exc!r}"
    if response.is_success and response.content:
        return None
    return (
        f"POST {url} {json.dumps(body)} -> {response.status_code} {response.text[:300]}"
    )


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
        #: provider slug -> why the gateway has no such provider
        self.refused: dict[str, str] = {}
        self.env = {
            k: v
            for k, v in os.environ.items()
            if not k.startswith(("DATABASE_URL", "REDIS_URL", "OMNIROUTE_"))
        }
        self.env.update(
            {
                "OMNIROUTE_DATA_DIR": str(self.data),
                "OMNIROUTE_SCHEDULER": "off",
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
  - slug: ant
    kind: anthropic
    base_url: {mock_url}
    connections: [{{name: main, api_key: sk-ant-bench-upstream}}]
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
        # The Responses wire to the upstream (spec 10 §5 ``wire: responses``) is
        # imported on its own: a gateway without the key refuses this file only.
        optional = f"""
providers:
  - slug: upr
    kind: openai
    wire: responses
    base_url: {mock_url}
    connections: [{{name: main, api_key: sk-bench-upstream}}]
    models: [{{id: mock-small, input_cost: 0.05, output_cost: 0.4}}]
"""
        done = subprocess.run(
            [py, "manage.py", "import_config", "-"],
            cwd=ROOT,
            env=self.env,
            input=optional.encode(),
            capture_output=True,
        )
        if done.returncode:
            errors = done.stderr.decode(errors="replace").strip().splitlines()
            self.refused["upr"] = "import_config refused `wire: responses`: " + (
                " ".join(line for line in errors if line.startswith("error:"))
                or (errors[-1] if errors else f"exit {done.returncode}")
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


def _print_row(label: str, mode: str, concurrency: int, data: dict) -> None:
    print(
        f"{label:15} {mode:6} c{concurrency:<3}"
        f" {data['rps']:8.0f} rps  p50 {data['p50_ms']:6.2f} ms  "
        f"p99 {data['p99_ms']:6.2f} ms  errors {data['errors']}"
        f" {data['socket_errors']}",
        flush=True,
    )


def run_cells(
    url: str, body: Body, model: str, seconds: int, lua: Path, label: str
) -> list[tuple[str, int, dict]]:
    """(mode, concurrency, wrk figures): a warm-up at c16, then c1 and c16, for the
    non-streaming and the streaming request."""
    cells = []
    for stream in (False, True):
        mode = "stream" if stream else "json"
        run_wrk(url, body(model, stream), 16, 3, lua)  # warm-up
        for concurrency in (1, 16):
            data = run_wrk(url, body(model, stream), concurrency, seconds, lua)
            _print_row(label, mode, concurrency, data)
            cells.append((mode, concurrency, data))
    return cells


def case_targets(stack: Stack, case: Case) -> list[tuple[str, str, str, Body, dict]]:
    """(name, URL, model, body, headers) of the systems measured for one case."""
    items = []
    if case.baseline is None:
        for name, port in (("direct", stack.mock_port), ("floor", stack.floor_port)):
            items.append(
                (
                    name,
                    f"http://127.0.0.1:{port}{case.direct_path}",
                    "mock-small",
                    case.direct_body,
                    case.direct_headers,
                )
            )
    items.append(
        (
            "gateway",
            f"http://127.0.0.1:{stack.gw_port}{case.path}",
            case.model,
            case.body,
            case.headers,
        )
    )
    return items


def run_case(
    stack: Stack, case: Case, args: argparse.Namespace
) -> tuple[list[Result], dict[str, float], str | None]:
    """The rows and TTFTs of one case, or the note saying why it was skipped."""
    if case.needs in stack.refused:
        return [], {}, stack.refused[case.needs]
    items = case_targets(stack, case)
    for _name, url, model, body, headers in items:
        for stream in (False, True):
            problem = probe(url, body(model, stream), headers)
            if problem:
                return [], {}, problem
    results: list[Result] = []
    ttft: dict[str, float] = {}
    short = case.flavour.replace("passthrough", "pt").replace("translated", "tr")
    label = f"{case.surface[:4]}/{short.replace(', stored', '+store')}"
    try:
        for name, url, model, body, headers in items:
            lua = stack.data / f"post-{case.surface}-{name}.lua"
            lua.write_text(lua_script(headers))
            for mode, concurrency, data in run_cells(
                url, body, model, args.seconds, lua, f"{label} {name}"
            ):
                results.append(
                    Result(
                        name,
                        mode,
                        concurrency,
                        data["rps"],
                        data["p50_ms"],
                        data["p99_ms"],
                        data["avg_ms"],
                        data["errors"],
                        case.surface,
                        case.flavour,
                    )
                )
            path = case.path if name == "gateway" else case.direct_path
            ttft[name] = measure_ttft(
                url,
                model,
                args.ttft_samples,
                body(model, True),
                headers,
                FIRST_TOKEN[path],
            )
            print(f"{label} {name:7} TTFT median {ttft[name]:.3f} ms", flush=True)
    except (RuntimeError, subprocess.CalledProcessError, httpx.HTTPError) as exc:
        return results, ttft, f"failed while measuring: {exc}"
    return results, ttft, None


def attempt_summary(data: Path) -> list[dict[str, Any]]:
    """What the gateway logged: attempts by surface, provider, passthrough and status
    (a check that each case ran as it says)."""
    path = data / "omniroute.sqlite3"
    if not path.exists():
        return []
    try:
        with sqlite3.connect(path) as db:
            rows = db.execute(
                "SELECT r.endpoint, a.provider, a.passthrough, a.result, COUNT(*) "
                "FROM telemetry_attemptlog a "
                "JOIN telemetry_requestlog r ON a.request_id = r.id "
                "GROUP BY 1, 2, 3, 4 ORDER BY 1, 2, 3, 4"
            ).fetchall()
    except sqlite3.Error as exc:
        print(f"request log not read: {exc}", file=sys.stderr)
        return []
    keys = ("endpoint", "provider", "passthrough", "result", "attempts")
    return [dict(zip(keys, row, strict=True)) for row in rows]


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
    parser.add_argument(
        "--surfaces",
        default="chat,messages,responses",
        help="comma-separated surfaces to measure (chat, messages, responses)",
    )
    args = parser.parse_args(argv)
    surfaces = {s.strip() for s in args.surfaces.split(",") if s.strip()}
    if not shutil.which("wrk"):
        print("wrk is required (Debian: apt-get install wrk)", file=sys.stderr)
        return 2
    stack = Stack(args.daphne, args.workers)
    lua = stack.data / "post.lua"
    lua.write_text(LUA)
    results: list[Result] = []
    ttft: dict[str, float] = {}
    surface_ttft: list[dict[str, Any]] = []
    skipped: list[dict[str, str]] = []
    load_before = os.getloadavg()[0]
    try:
        stack.start()
        for name, url, model in targets(stack) if "chat" in surfaces else ():
            for mode, concurrency, data in run_cells(
                url, chat_body, model, args.seconds, lua, name
            ):
                results.append(
                    Result(
                        name,
                        mode,
                        concurrency,
                        data["rps"],
                        data["p50_ms"],
                        data["p99_ms"],
                        data["avg_ms"],
                        data["errors"],
                    )
                )
            ttft[name] = measure_ttft(url, model, args.ttft_samples)
            print(f"{name:15} TTFT median {ttft[name]:.3f} ms", flush=True)
        for case in CASES:
            if case.surface not in surfaces:
                continue
            rows, times, note = run_case(stack, case, args)
            results += rows
            surface_ttft += [
                {
                    "surface": case.surface,
                    "flavour": case.flavour,
                    "target": target,
                    "median_ms": value,
                }
                for target, value in times.items()
            ]
            if note:
                print(f"{case.surface} {case.flavour}: not available: {note}")
                skipped.append(
                    {"surface": case.surface, "flavour": case.flavour, "note": note}
                )
    finally:
        stack.stop()
    report = {
        "when": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "machine": f"{platform.machine()}, {os.cpu_count()} CPUs, Python "
        f"{platform.python_version()}",
        "seconds": args.seconds,
        #: 1-minute load average before and after: other work on the machine
        "load_average": [round(load_before, 2), round(os.getloadavg()[0], 2)],
        "results": [asdict(r) for r in results],
        "ttft_median_ms": ttft,
        "surface_ttft_ms": surface_ttft,
        "skipped": skipped,
        "shared_baselines": [
            {"surface": c.surface, "flavour": c.flavour, "baseline": c.baseline}
            for c in CASES
            if c.baseline and c.surface in surfaces
        ],
        "attempts": attempt_summary(stack.data),
    }
    for row in report["attempts"]:
        print(
            f"logged: {row['endpoint']:10} {row['provider']:4} passthrough "
            f"{row['passthrough']} {row['result']:8} {row['attempts']}"
        )
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
