"""Instructions per request: a figure that does not move with the host.

Wall-clock and even CPU-time figures of a shared VM move by tens of per cent between
two runs of the same code; the number of instructions a request executes does not.
This script runs the gateway's ASGI app in process under ``valgrind --tool=callgrind``
(the mock upstream on loopback, one provider, SQLite), once with ``--warm`` requests
and once with ``--warm`` + ``--requests``, and reports the difference divided by
``--requests``: the instructions of one request, start-up excluded.  Each ``--root`` is
a checkout whose code is measured (its ``manage.py``, its packages):

    .venv/bin/python bench/instructions.py --root . --requests 100
    .venv/bin/python bench/instructions.py --root ../before --root . --requests 100

A run of 120 requests takes about two minutes (valgrind is ~50x slower than Python).
``--kind gemini`` sends the same chat request to a ``kind: gemini`` provider on the
mock's Gemini wire instead (the translated dialect of issue #14), so a relayed and a
translated request can be compared:

    .venv/bin/python bench/instructions.py --root . --kind openai --kind gemini \
        --mock-process

``--mock-process`` serves the mock from a process of its own, outside valgrind, so
the figures are the gateway's alone (by default the mock runs in a thread of the
measured process, as the figures of docs/benchmarks.md were taken).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

KEY = "sk-or-bench-000000000000000000000000000000000000"
CONFIG = """
providers:
  - slug: up
    kind: {kind}
    base_url: {url}
    connections: [{{name: main, api_key: sk-bench-upstream}}]
    models: [{{id: mock-small, input_cost: 0.05, output_cost: 0.4}}]
api_keys:
  - name: bench
    key: {key}
"""


def _mock_process() -> tuple[subprocess.Popen[bytes], str]:
    """The mock upstream in a process of its own (not measured)."""
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    process = subprocess.Popen(
        [sys.executable, "-m", "providers.mock_upstream", "--port", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    for _ in range(200):
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            break
        except OSError:
            time.sleep(0.05)
    return process, f"http://127.0.0.1:{port}/v1"


def _drive(
    root: Path, stream: bool, count: int, kind: str = "openai", where: str = "thread"
) -> None:
    """In the measured process: set the gateway up, then serve ``count`` requests."""
    data = tempfile.mkdtemp(prefix="omniroute-instr-")
    os.environ.update(
        OMNIROUTE_DATA_DIR=data,
        DJANGO_SETTINGS_MODULE="omniroute_site.settings",
        OMNIROUTE_LOG_LEVEL="WARNING",
    )
    for name in ("DATABASE_URL", "REDIS_URL"):
        os.environ.pop(name, None)
    sys.path.insert(0, str(root))
    os.chdir(root)
    from providers.mock_upstream import start_in_thread

    if where == "process":
        process, mock_url = _mock_process()
        stop = process.terminate
    else:
        mock = start_in_thread()
        mock_url, stop = mock.url, mock.stop
    py = sys.executable
    subprocess.run([py, "manage.py", "migrate", "-v0"], check=True)
    # the Gemini wire sits at the mock's root (``/v1beta/models/...``)
    url = mock_url.rsplit("/v1", 1)[0] if kind == "gemini" else mock_url
    config = CONFIG.format(url=url, key=KEY, kind=kind)
    subprocess.run(
        [py, "manage.py", "import_config", "-"],
        input=config.encode(),
        check=True,
        capture_output=True,
    )
    import django

    django.setup()
    from omniroute_site.asgi import application

    body = json.dumps(
        {
            "model": "up/mock-small",
            "messages": [{"role": "user", "content": "Say hello in five words."}],
            "stream": stream,
        }
    ).encode()
    headers = [
        (b"authorization", f"Bearer {KEY}".encode()),
        (b"content-type", b"application/json"),
        (b"content-length", str(len(body)).encode()),
    ]

    async def one() -> None:
        done = asyncio.Event()
        received = [False]
        statuses: list[int] = []

        async def receive() -> dict[str, object]:
            if not received[0]:
                received[0] = True
                return {"type": "http.request", "body": body, "more_body": False}
            await done.wait()
            return {"type": "http.disconnect"}

        async def send(message: dict[str, object]) -> None:
            if message["type"] == "http.response.start":
                statuses.append(int(message["status"]))  # type: ignore[call-overload]
            elif not message.get("more_body"):
                done.set()

        scope = {
            "type": "http",
            "method": "POST",
            "path": "/v1/chat/completions",
            "headers": headers,
            "query_string": b"",
            "http_version": "1.1",
            "scheme": "http",
            "server": ("127.0.0.1", 8000),
            "client": ("127.0.0.1", 5000),
            "root_path": "",
        }
        await application(scope, receive, send)
        done.set()
        if statuses != [200]:
            raise RuntimeError(f"the gateway answered {statuses}")

    async def main() -> None:
        for _ in range(count):
            await one()

    asyncio.run(main())
    stop()


def _instructions(root: Path, stream: bool, count: int, kind: str, where: str) -> int:
    with tempfile.TemporaryDirectory() as out:
        done = subprocess.run(
            [
                "valgrind",
                "--tool=callgrind",
                f"--callgrind-out-file={out}/callgrind.out",
                sys.executable,
                __file__,
                "--drive",
                str(root),
                "stream" if stream else "json",
                str(count),
                kind,
                where,
            ],
            env={**os.environ, "PYTHONHASHSEED": "0", "PYTHONPATH": str(root)},
            capture_output=True,
            text=True,
            check=True,
        )
    found = re.search(r"Collected : (\d+)", done.stderr)
    if found is None:
        raise RuntimeError(f"no instruction count from valgrind:\n{done.stderr}")
    return int(found.group(1))


def main(argv: list[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if args and args[0] == "--drive":
        _drive(Path(args[1]), args[2] == "stream", int(args[3]), args[4], args[5])
        return 0
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--root", action="append", type=Path, required=True)
    parser.add_argument("--warm", type=int, default=20)
    parser.add_argument("--requests", type=int, default=100)
    parser.add_argument(
        "--kind",
        action="append",
        choices=("openai", "gemini"),
        help="the provider's kind (repeatable; default openai)",
    )
    parser.add_argument(
        "--mock-process",
        action="store_true",
        help="serve the mock from its own process, outside the measurement",
    )
    options = parser.parse_args(args)
    where = "process" if options.mock_process else "thread"
    for root in (r.resolve() for r in options.root):
        for kind in options.kind or ["openai"]:
            for stream in (False, True):
                base = _instructions(root, stream, options.warm, kind, where)
                total = options.warm + options.requests
                more = _instructions(root, stream, total, kind, where)
                per = (more - base) / options.requests
                mode = "stream" if stream else "json"
                print(
                    f"{root.name:14} {kind:7} {mode:6} {per:12,.0f} "
                    "instructions per request",
                    flush=True,
                )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
