"""CPU time per request: what each server under test spends, whatever the host does.

On a shared VM the wall-clock figures of ``bench/run.py`` move by a factor of two from
one run to the next (steal time: the host hands the CPU to someone else).  The CPU
time a process is charged does not include steal time, so the user + system seconds
the gateway spends for N requests, divided by N, compares two versions of the code
run minutes apart.  This script starts the same stack as ``bench/run.py`` (the mock
upstream, the bare forwarder, one gateway worker) from the checkout ``--root`` names,
drives each target with wrk as ``make bench`` does, and reports CPU µs per request of
the process under test, the floor's beside it.

    .venv/bin/python bench/cpu_cost.py --root . --rounds 3
    .venv/bin/python bench/cpu_cost.py --root ../baseline --root . --rounds 3

With two roots the runs alternate (A B A B ...), so drift hits both alike.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import statistics
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

#: the processes of ``bench.run.Stack`` in start order
PROCESS_OF = {"direct": 0, "floor": 1, "gateway": 2}


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds charged to ``pid`` so far (``/proc/<pid>/stat``)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    ticks = int(fields[11]) + int(fields[12])  # utime, stime (fields 14 and 15)
    return ticks / os.sysconf("SC_CLK_TCK")


def _bench_module(root: Path) -> ModuleType:
    """``bench.run`` of the checkout at ``root`` (its ``Stack`` starts that code)."""
    for name in [m for m in sys.modules if m == "bench" or m.startswith("bench.")]:
        del sys.modules[name]
    sys.path.insert(0, str(root))
    try:
        return importlib.import_module("bench.run")
    finally:
        sys.path.remove(str(root))


def measure(root: Path, seconds: int) -> dict[str, float]:
    """One run: CPU µs per request of each target, mode and concurrency."""
    run = _bench_module(root)
    os.environ["PYTHONPATH"] = str(root)  # the stack's processes import this code
    stack = run.Stack(False, 1)
    lua = stack.data / "post.lua"
    lua.write_text(run.LUA)
    found: dict[str, float] = {}
    try:
        stack.start()
        for name, url, model in run.targets(stack):
            if name not in PROCESS_OF:
                continue
            pid = stack.processes[PROCESS_OF[name]].pid
            for stream in (False, True):
                body = {"model": model, "messages": run.MESSAGES, "stream": stream}
                run.run_wrk(url, body, 16, 3, lua)  # warm-up
                for concurrency in (1, 16):
                    before = cpu_seconds(pid)
                    data = run.run_wrk(url, body, concurrency, seconds, lua)
                    spent = cpu_seconds(pid) - before
                    requests = data["rps"] * seconds
                    key = f"{name} {'stream' if stream else 'json'} c{concurrency}"
                    found[key] = spent / requests * 1e6 if requests else 0.0
                    print(f"{root.name:12} {key:22} {found[key]:8.0f} µs", flush=True)
    finally:
        stack.stop()
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--root", action="append", type=Path, required=True)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seconds", type=int, default=8)
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args(argv)
    roots = [r.resolve() for r in args.root]
    runs: dict[str, list[dict[str, float]]] = {str(r): [] for r in roots}
    for _ in range(args.rounds):
        for root in roots:
            runs[str(root)].append(measure(root, args.seconds))
    summary: dict[str, Any] = {}
    for root, results in runs.items():
        keys = results[0].keys()
        summary[root] = {k: statistics.median(r[k] for r in results) for k in keys}
    print("\nmedian CPU µs per request over", args.rounds, "rounds")
    keys = next(iter(summary.values())).keys()
    print(f"{'':24}" + "".join(f"{Path(r).name:>14}" for r in summary))
    for key in keys:
        print(f"{key:24}" + "".join(f"{summary[r][key]:14.0f}" for r in summary))
    if args.out is not None:
        args.out.write_text(json.dumps({"runs": runs, "median": summary}, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
