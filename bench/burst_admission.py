"""Burst admission across workers (issue #16 point 1): how many of C concurrent
requests a key with ``rpm: 50`` gets through N uvicorn workers sharing Redis.

Starts the mock upstream and one gateway with ``--workers N`` (PostgreSQL scratch
database, Redis database 14, ``WEB_CONCURRENCY=N``), imports a key with ``rpm: 50``,
fires C requests at once over C connections and counts 200s and 429s, then reads
``omniroute_shared_state_fallbacks_total{op="limits_admit"}``.  Run:

    .venv/bin/python bench/burst_admission.py --workers 2 3 --concurrency 200 1000 5000
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import resource
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

import httpx
import psycopg
import redis

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

KEY = "sk-or-bench-burst-0000000000000000000000000000000"
REDIS_URL = "redis://127.0.0.1:6379/14"
PG_ADMIN = "postgres://postgres@127.0.0.1:5432/postgres"


def _config(mock_url: str) -> str:
    return f"""
providers:
  - slug: pb
    kind: openai
    base_url: {mock_url}
    connections: [{{name: main, api_key: sk-upstream-bench-burst-1234567890}}]
    models: [{{id: m1}}]
api_keys:
  - name: burst
    key: {KEY}
    rpm: 50
"""


def _free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _raise_open_files(wanted: int) -> None:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < wanted:
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(wanted, hard), hard))


async def _burst(url: str, concurrency: int) -> tuple[int, int, int]:
    limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=0)
    async with httpx.AsyncClient(base_url=url, limits=limits, timeout=120) as client:
        body = {"model": "pb/m1", "messages": [{"role": "user", "content": "hi"}]}
        headers = {"Authorization": f"Bearer {KEY}"}

        async def one() -> int:
            try:
                response = await client.post(
                    "/v1/chat/completions", json=body, headers=headers
                )
            except httpx.HTTPError:
                return 0
            return response.status_code

        statuses = await asyncio.gather(*(one() for _ in range(concurrency)))
    ok = sum(s == 200 for s in statuses)
    limited = sum(s == 429 for s in statuses)
    return ok, limited, concurrency - ok - limited


def _fallbacks(url: str) -> float:
    text = httpx.get(f"{url}/metrics", timeout=10).text
    found = re.findall(
        r'omniroute_shared_state_fallbacks_total\{op="limits_admit"\} (\S+)', text
    )
    return sum(float(v) for v in found)


def run(workers: int, concurrency: int, mock_url: str) -> dict[str, object]:
    name = f"omr_burst_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(PG_ADMIN, autocommit=True) as admin:
        admin.execute(f"CREATE DATABASE {name}")
    data_dir = Path(tempfile.mkdtemp(prefix="omniroute-burst-"))
    prom = data_dir / "prom"
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "omniroute_site.settings",
        "DATABASE_URL": f"postgres://postgres@127.0.0.1:5432/{name}",
        "REDIS_URL": REDIS_URL,
        "OMNIROUTE_DATA_DIR": str(data_dir),
        "WEB_CONCURRENCY": str(workers),
        "PROMETHEUS_MULTIPROC_DIR": str(prom),
        "DJANGO_SECRET_KEY": uuid.uuid4().hex * 2,
    }
    redis.Redis.from_url(REDIS_URL).flushdb()
    port = _free_port()
    manage = [sys.executable, "manage.py"]
    subprocess.run([*manage, "migrate", "-v0"], cwd=ROOT, env=env, check=True)
    subprocess.run(
        [*manage, "import_config", "-"],
        cwd=ROOT,
        env=env,
        input=_config(mock_url),
        text=True,
        check=True,
        capture_output=True,
    )
    server = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "uvicorn",
            "omniroute_site.asgi:application",
            "--port",
            str(port),
            "--workers",
            str(workers),
            "--lifespan",
            "on",
            "--no-access-log",
            "--loop",
            "uvloop",
            "--http",
            "omniroute_site.server:GuardedHttpToolsProtocol",
            "--limit-concurrency",
            str(concurrency * 2),
            "--backlog",
            str(max(2048, concurrency)),
        ],
        cwd=ROOT,
        env=env,
        stdout=(data_dir / "gateway.log").open("wb"),
        stderr=subprocess.STDOUT,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                if httpx.get(f"{url}/readyz", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            time.sleep(0.3)
        time.sleep(2)  # every worker warmed its Redis pool
        started = time.monotonic()
        ok, limited, other = asyncio.run(_burst(url, concurrency))
        took = time.monotonic() - started
        return {
            "workers": workers,
            "concurrency": concurrency,
            "admitted": ok,
            "refused_429": limited,
            "other": other,
            "fallbacks": _fallbacks(url),
            "seconds": round(took, 1),
            "log": str(data_dir / "gateway.log"),
        }
    finally:
        server.terminate()
        server.wait(timeout=60)
        with psycopg.connect(PG_ADMIN, autocommit=True) as admin:
            admin.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", type=int, nargs="+", default=[2, 3])
    parser.add_argument("--concurrency", type=int, nargs="+", default=[200, 1000, 5000])
    options = parser.parse_args()
    _raise_open_files(max(options.concurrency) * 3 + 1024)
    from providers.mock_upstream import start_in_thread

    rows = []
    with start_in_thread() as mock:
        for workers in options.workers:
            for concurrency in options.concurrency:
                row = run(workers, concurrency, mock.url)
                rows.append(row)
                print(row, flush=True)
    print("\n| workers | concurrent | admitted | 429 | other | fallbacks | seconds |")
    print("|---|---|---|---|---|---|---|")
    for row in rows:
        print(
            f"| {row['workers']} | {row['concurrency']} | {row['admitted']} | "
            f"{row['refused_429']} | {row['other']} | {row['fallbacks']:.0f} | "
            f"{row['seconds']} |"
        )


if __name__ == "__main__":
    main()
