"""Render ``bench/results/routing_quality.json`` into its section of the benchmark doc.

Only the text between the markers below is replaced; the section (heading, an intro
and the markers) is appended to the document the first time.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

START = "<!-- routing-quality:start -->"
END = "<!-- routing-quality:end -->"
HEADING = "## Routing quality under faults (issue #17)"
SUCCESS_TARGET = 0.999
P95_TARGET_MS = 250.0


def _pct(x: float) -> str:
    return f"{x:.2%}"


def _initial(slug: str) -> str:
    return "✗" if slug == "failed" else slug[0].upper()


def render(report: dict[str, Any]) -> str:
    rate = report["rate"]
    arrivals = "Poisson" if report["poisson"] else "fixed-rate"
    results = report["results"]
    send = ", ".join(f"{r['send_rate']:.1f}" for r in results)
    lag = max((r["send_lag_p99_ms"] for r in results), default=0.0)
    before, after = report["load_average_before"], report["load_average_after"]
    lines = [
        f"Run {report['when']} on {report['machine']}: `{report['command'].strip()}`,"
        f" {report['duration_s']:g} s per route (schedule scale {report['scale']:g}),"
        f" {arrivals} arrivals at {rate:g} req/s (seed {report['seed']}), "
        f"{report['wall_minutes']} min in all. Achieved send rate per route: {send} "
        f"req/s; p99 lag behind the arrival times at most {lag:.1f} ms. Load average "
        f"(1/5/15 min) {before[0]}/{before[1]}/{before[2]} before, "
        f"{after[0]}/{after[1]}/{after[2]} after; per route (1 min, before → after): "
        + ", ".join(
            f"{r['route']} {r['load_average'][0]} → {r['load_average'][1]}"
            for r in results
        )
        + ".",
        "",
        "Providers (one model each, `openai` kind, each on its own mock upstream; every "
        f"answer has {report['completion_tokens']} completion tokens):",
        "",
        "| provider | $/Mtok in | $/Mtok out | base latency ms |",
        "|---|---:|---:|---:|",
    ]
    lines += [
        f"| {p['slug']} | {p['input_cost']:g} | {p['output_cost']:g} | "
        f"{p['latency_ms']:g} |"
        for p in report["providers"]
    ]
    lines += ["", "Fault schedule (seconds into each run):", ""]
    lines += ["| provider | fault | from | to |", "|---|---|---:|---:|"]
    for f in report["schedule"]:
        lines.append(
            f"| {f['provider']} | {_describe(f)} | {f['start']:g} | {f['end']:g} |"
        )
    lines += [
        "",
        "| route | requests | success | p50 ms | p95 ms | cost $ | oracle $ "
        "| cost / oracle | target |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---|",
    ]
    for r in results:
        lines.append(
            f"| {r['label']} | {r['requests']} | {_pct(r['success_rate'])} | "
            f"{r['p50_ms']:.0f} | {r['p95_ms']:.0f} | {r['cost_usd']:.4f} | "
            f"{r['oracle_cost_usd']:.4f} | {r['cost_ratio']:.2f} | {_verdict(r)} |"
        )
    lines += [
        "",
        "Share of requests served by each provider (B budget, V value, S swift, "
        "P premium; ✗ failed), in % of the requests sent in each phase; the phase "
        "header names the faulted providers and the oracle's pick:",
        "",
    ]
    phases = results[0]["phases"] if results else []
    head = ["route"] + [
        f"{p['from']:g}–{p['to']:g} s: "
        + ("".join(_initial(s) for s in p["faulted"]) or "–")
        + f" → {_initial(p['oracle'])}"
        for p in phases
    ]
    lines.append("| " + " | ".join(head) + " |")
    lines.append("|---" * len(head) + "|")
    for r in results:
        cells = [r["route"]]
        for p in r["phases"]:
            total = sum(p["served"].values()) or 1
            cells.append(
                " ".join(
                    f"{_initial(s)}{100 * n / total:.0f}"
                    for s, n in sorted(p["served"].items(), key=lambda kv: -kv[1])
                    if 100 * n / total >= 0.5
                )
            )
        lines.append("| " + " | ".join(cells) + " |")
    lines += [
        "",
        "Cost over the oracle's in each phase (the same phases):",
        "",
        "| " + " | ".join(head) + " |",
        "|---" * len(head) + "|",
    ]
    for r in results:
        cells = [r["route"]]
        for p in r["phases"]:
            oracle = p.get("oracle_cost_usd") or 0.0
            cells.append(f"{p.get('cost_usd', 0.0) / oracle:.2f}" if oracle else "–")
        lines.append("| " + " | ".join(cells) + " |")
    lines += [
        "",
        "Health penalties started per route (from `telemetry_attemptlog."
        "cooldown_trigger`: `server_error` = breaker opened, `rate_limit` = cooldown, "
        "seconds into the run), exploration and adaptive first picks by reason "
        "(`omniroute_routing_selections_total`):",
        "",
    ]
    for r in results:
        lines.append(f"- {r['route']}: " + _events(r))
    return "\n".join(lines)


def _events(r: dict[str, Any]) -> str:
    penalties = ", ".join(
        f"{e['provider']} {e['trigger']} @{e['t']:.1f}" for e in r.get("penalties", [])
    )
    parts = [f"penalties {penalties or 'none'}"]
    explored = r.get("explored") or {}
    if explored:
        total = sum(explored.values())
        parts.append(
            f"explored {total} ({total / max(r['requests'], 1):.1%}: "
            + ", ".join(f"{k} {v}" for k, v in sorted(explored.items()))
            + ")"
        )
    if r.get("model", "").startswith("auto"):
        parts.append(f"self-healing probes {r.get('healing_probes', 0)}")
    reasons: dict[str, int] = {}
    for key, n in (r.get("selections") or {}).items():
        reason = key.split(" ", 1)[1]
        reasons[reason] = reasons.get(reason, 0) + n
    if reasons:
        parts.append(
            "first picks " + ", ".join(f"{k} {v}" for k, v in sorted(reasons.items()))
        )
    return "; ".join(parts)


def _describe(f: dict[str, Any]) -> str:
    if f["kind"] == "5xx":
        return f"{f['value']:.0%} of requests answer 500"
    if f["kind"] == "429":
        return "every request answers 429 (no `Retry-After`)"
    if f["kind"] == "reset":
        return "every connection reset before the response headers"
    return f"every answer {f['value'] / 1000:g} s slower"


def _verdict(r: dict[str, Any]) -> str:
    missed = []
    if r["success_rate"] < SUCCESS_TARGET:
        missed.append("success")
    if r["p95_ms"] > P95_TARGET_MS:
        missed.append("p95")
    target = r.get("cost_target")
    if target is not None and (math.isnan(r["cost_ratio"]) or r["cost_ratio"] > target):
        missed.append(f"cost ≤ {target:g}×")
    text = f"≤ {target:g}× " if target is not None else ""
    return text + ("✓" if not missed else "✗ " + ", ".join(missed))


def write_docs(report: dict[str, Any], path: Path) -> None:
    text = path.read_text()
    block = f"{START}\n{render(report)}\n{END}"
    if START in text and END in text:
        head, _, rest = text.partition(START)
        _, _, tail = rest.partition(END)
        text = head + block + tail
    else:
        text = text.rstrip("\n") + f"\n\n{HEADING}\n\n{block}\n"
    path.write_text(text)
