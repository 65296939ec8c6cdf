"""Render ``bench/results/latest.json`` into the generated part of the benchmark doc."""

from __future__ import annotations

from pathlib import Path
from typing import Any

START = "<!-- bench:start -->"
END = "<!-- bench:end -->"


def _get(report: dict[str, Any], target: str, mode: str, c: int) -> dict[str, Any]:
    for row in report["results"]:
        if (row["target"], row["mode"], row["concurrency"]) == (target, mode, c):
            return row
    return {}


def render(report: dict[str, Any]) -> str:
    lines = [
        f"Run {report['when']} on {report['machine']}, {report['seconds']} s per "
        "cell, wrk -t1, servers on CPU 0, upstream and wrk on CPU 1.",
        "",
        "| target | mode | c | req/s | p50 ms | p99 ms | avg ms | non-2xx |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for row in report["results"]:
        lines.append(
            f"| {row['target']} | {row['mode']} | {row['concurrency']} | "
            f"{row['rps']:.0f} | {row['p50_ms']:.2f} | {row['p99_ms']:.2f} | "
            f"{row['avg_ms']:.2f} | {row['errors']} |"
        )
    lines += ["", "| target | streaming TTFT median (ms) |", "|---|---|"]
    for name, value in report["ttft_median_ms"].items():
        lines.append(f"| {name} | {value:.3f} |")
    lines += ["", "Against the targets of issue #2 (one gateway worker):", ""]
    for mode in ("json", "stream"):
        gw16, fl16 = _get(report, "gateway", mode, 16), _get(report, "floor", mode, 16)
        gw1, d1 = _get(report, "gateway", mode, 1), _get(report, "direct", mode, 1)
        if gw16 and fl16 and gw1 and d1:
            ratio = gw16["rps"] / fl16["rps"]
            # closed loop at c1: mean latency = 1 / throughput (wrk's own "avg"
            # is distorted by its latency sampling under stalls)
            added = 1000 / gw1["rps"] - 1000 / d1["rps"]
            lines.append(
                f"- {mode}: c16 throughput {ratio:.2f}× the floor (target "
                f"≥ 0.70); c1 added latency {added:.2f} ms over direct "
                "(target ≤ 0.90; mean = 1/throughput at c1), p50 "
                f"+{gw1['p50_ms'] - d1['p50_ms']:.2f} ms"
            )
    ttft = report["ttft_median_ms"]
    if "gateway" in ttft and "direct" in ttft:
        lines.append(
            f"- streaming TTFT overhead {ttft['gateway'] - ttft['direct']:.3f} "
            "ms over direct (target ≤ 1.0)"
        )
    multi = sorted({r["target"] for r in report["results"]} - {"gateway"})
    for name in (n for n in multi if n.startswith("gateway-") and n.endswith("w")):
        for mode in ("json", "stream"):
            one, many = _get(report, "gateway", mode, 16), _get(report, name, mode, 16)
            if one and many:
                lines.append(
                    f"- {mode}: c16 with {name[len('gateway-') : -1]} uvicorn workers "
                    f"{many['rps']:.0f} req/s = {many['rps'] / one['rps']:.2f}× one "
                    "worker (all CPUs, shared with the mock and wrk on this box)"
                )
    return "\n".join(lines)


def write_docs(report: dict[str, Any], path: Path) -> None:
    text = path.read_text(encoding="utf-8") if path.exists() else f"{START}\n{END}\n"
    if START not in text:
        text += f"\n{START}\n{END}\n"
    head, _, rest = text.partition(START)
    _, _, tail = rest.partition(END)
    path.write_text(f"{head}{START}\n{render(report)}\n{END}{tail}", encoding="utf-8")
