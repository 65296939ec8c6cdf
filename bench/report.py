"""Render ``bench/results/latest.json`` into the generated part of the benchmark doc."""

from __future__ import annotations

from pathlib import Path
from typing import Any

START = "<!-- bench:start -->"
END = "<!-- bench:end -->"


#: the targets of issue #2, which issue #13 applies to every surface
RATIO_TARGET, ADDED_TARGET, TTFT_TARGET = 0.70, 0.90, 1.0


def _surface(row: dict[str, Any]) -> tuple[str, str]:
    return row.get("surface", "chat"), row.get("flavour", "")


def _get(
    report: dict[str, Any],
    target: str,
    mode: str,
    c: int,
    surface: tuple[str, str] = ("chat", ""),
) -> dict[str, Any]:
    for row in report["results"]:
        if (row["target"], row["mode"], row["concurrency"]) == (target, mode, c) and (
            _surface(row) == surface
        ):
            return row
    return {}


def render(report: dict[str, Any]) -> str:
    head = [
        f"Run {report['when']} on {report['machine']}, {report['seconds']} s per "
        "cell, wrk -t1, servers on CPU 0, upstream and wrk on CPU 1."
    ]
    if "load_average" in report:  # a loaded machine moves every figure: say so
        before, after = report["load_average"]
        head[0] += (
            f" 1-minute load average {before:.2f} before the run, {after:.2f} after "
            "(near the CPU count or above: other work competed with the bench)."
        )
    if not any(_surface(row) == ("chat", "") for row in report["results"]):
        return "\n".join(head + _render_surfaces(report))
    return "\n".join(head + _render_chat(report) + _render_surfaces(report))


def _render_chat(report: dict[str, Any]) -> list[str]:
    """Chat Completions: the rows and targets of issue #2."""
    lines = [
        "",
        "| target | mode | c | req/s | p50 ms | p99 ms | avg ms | non-2xx |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for row in report["results"]:
        if _surface(row) != ("chat", ""):
            continue
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
    return lines


def _mark(ok: bool) -> str:
    return "" if ok else " ✗"


def _ttft(report: dict[str, Any], target: str, surface: tuple[str, str]) -> Any:
    if surface == ("chat", ""):
        return report.get("ttft_median_ms", {}).get(target)
    for row in report.get("surface_ttft_ms", ()):
        if (row["surface"], row["flavour"], row["target"]) == (*surface, target):
            return row["median_ms"]
    return None


def _summary(
    report: dict[str, Any], surface: tuple[str, str], base: tuple[str, str]
) -> str:
    """One line of the targets table: the gateway of ``surface`` against the direct
    and floor rows of ``base``."""
    cells = []
    for mode in ("json", "stream"):
        gw16, gw1 = (_get(report, "gateway", mode, c, surface) for c in (16, 1))
        fl16 = _get(report, "floor", mode, 16, base)
        d1 = _get(report, "direct", mode, 1, base)
        if gw16 and fl16:
            ratio = gw16["rps"] / fl16["rps"]
            cells.append(f"{ratio:.2f}×{_mark(ratio >= RATIO_TARGET)}")
        else:
            cells.append("–")
        if gw1 and d1:
            added = 1000 / gw1["rps"] - 1000 / d1["rps"]
            cells.append(f"{added:.2f}{_mark(added <= ADDED_TARGET)}")
        else:
            cells.append("–")
    gw, direct = _ttft(report, "gateway", surface), _ttft(report, "direct", base)
    if gw is not None and direct is not None:
        over = gw - direct
        cells.append(f"{over:.3f}{_mark(over <= TTFT_TARGET)}")
    else:
        cells.append("–")
    return f"| {surface[0]} | {surface[1] or '–'} | " + " | ".join(cells) + " |"


def _render_surfaces(report: dict[str, Any]) -> list[str]:
    """Messages and Responses (issue #13): their rows, TTFTs and targets."""
    cases: list[tuple[str, str]] = []
    for row in report["results"]:
        if _surface(row) != ("chat", "") and _surface(row) not in cases:
            cases.append(_surface(row))
    skipped = report.get("skipped", [])
    if not cases and not skipped:
        return []
    lines = [
        "",
        "Other client surfaces (issue #13), same run and method, one provider per "
        "flavour: *passthrough* to an upstream speaking the surface (`anthropic` kind "
        "for Messages, `openai` with `wire: responses` for Responses), *translated* "
        "through the canonical chat form to an `openai` chat upstream. `direct` and "
        "`floor` carry the baseline request: the same body to the mock's own path for "
        "a passthrough, the equivalent chat body to `/chat/completions` for a "
        "translation (the floor translates nothing). Messages requests carry "
        "`max_tokens: 64`, `anthropic-version: 2023-06-01` and the key in "
        "`x-api-key`. Responses requests are `{model, input, stream}` with "
        "`store: false`, which keeps the stored-response row (a database write per "
        "request) out of the measurement; `translated, stored` is the same request "
        "with `store` left at its default (true), against the `translated` baseline. "
        "`chat` `translated (gemini)` is Chat Completions to a `gemini` provider "
        "(issue #14): the gateway translates to the mock's Gemini wire, and `direct` "
        "and `floor` send the Gemini body the gateway would to `:generateContent` "
        "and `:streamGenerateContent?alt=sse`.",
        "",
        "| surface | flavour | target | mode | c | req/s | p50 ms | p99 ms | avg ms "
        "| non-2xx |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for row in report["results"]:
        if _surface(row) == ("chat", ""):
            continue
        lines.append(
            f"| {row['surface']} | {row['flavour']} | {row['target']} | "
            f"{row['mode']} | {row['concurrency']} | {row['rps']:.0f} | "
            f"{row['p50_ms']:.2f} | {row['p99_ms']:.2f} | {row['avg_ms']:.2f} | "
            f"{row['errors']} |"
        )
    lines += [
        "",
        "| surface | flavour | target | streaming TTFT median (ms) |",
        "|---|---|---|---|",
    ]
    for row in report.get("surface_ttft_ms", ()):
        lines.append(
            f"| {row['surface']} | {row['flavour']} | {row['target']} | "
            f"{row['median_ms']:.3f} |"
        )
    lines += [
        "",
        f"Against the targets (c16 ≥ {RATIO_TARGET:.2f}× the floor, c1 added "
        f"≤ {ADDED_TARGET:.2f} ms over direct as mean = 1/throughput, streaming TTFT "
        f"overhead ≤ {TTFT_TARGET:.1f} ms over direct; ✗ = missed):",
        "",
        "| surface | flavour | json c16 / floor | json c1 added ms "
        "| stream c16 / floor | stream c1 added ms | TTFT overhead ms |",
        "|---|---|---|---|---|---|---|",
    ]
    if any(_surface(row) == ("chat", "") for row in report["results"]):
        lines.append(_summary(report, ("chat", ""), ("chat", "")))
    shared = {  # a case measured against another flavour's baseline
        (item["surface"], item["flavour"]): (item["surface"], item["baseline"])
        for item in report.get("shared_baselines", ())
    }
    for case in cases:
        lines.append(_summary(report, case, shared.get(case, case)))
    if skipped:
        lines.append("")
    for item in skipped:
        lines.append(
            f"- {item['surface']} {item['flavour']}: not available in this run: "
            f"{item['note']}"
        )
    return lines


def write_docs(report: dict[str, Any], path: Path) -> None:
    text = path.read_text(encoding="utf-8") if path.exists() else f"{START}\n{END}\n"
    if START not in text:
        text += f"\n{START}\n{END}\n"
    head, _, rest = text.partition(START)
    _, _, tail = rest.partition(END)
    path.write_text(f"{head}{START}\n{render(report)}\n{END}{tail}", encoding="utf-8")
