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
from pathlib import Path

KEY = "sk-or-bench-000000000000000000000000000000000000"
CONFIG = """
providers:
  - slug: up
    kind: openai
    base_url: {url}
    connections: [{{name: main, api_key: sk-bench-upstream}}]
    models: [{{id: mock-small, input_cost: 0.05, output_cost: 0.4}}]
api_keys:
  - name: bench
    key: {key}
"""


def _drive(root: Path, stream: bool, count: int) -> None:
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

    mock = start_in_thread()
    py = sys.executable
    subprocess.run([py, "manage.py", "migrate", "-v0"], check=True)
    config = CONFIG.format(url=mock.url, key=KEY)
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
    mock.stop()


def _instructions(root: Path, stream: bool, count: int) -> int:
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
        _drive(Path(args[1]), args[2] == "stream", int(args[3]))
        return 0
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--root", action="append", type=Path, required=True)
    parser.add_argument("--warm", type=int, default=20)
    parser.add_argument("--requests", type=int, default=100)
    options = parser.parse_args(args)
    for root in (r.resolve() for r in options.root):
        for stream in (False, True):
            base = _instructions(root, stream, options.warm)
            more = _instructions(root, stream, options.warm + options.requests)
            per = (more - base) / options.requests
            mode = "stream" if stream else "json"
            print(f"{root.name:14} {mode:6} {per:12,.0f} instructions per request")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
