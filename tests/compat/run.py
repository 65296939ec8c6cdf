"""``make compat``: the real CLI clients against a real gateway on the mock upstream.

    .venv/bin/python -m tests.compat.run [--no-install] [--only ROW ...]

Installs ``@openai/codex``, ``@anthropic-ai/claude-code`` and ``opencode-ai`` (their
current releases) from the npm registry into ``.compat/``, starts the mock upstream
and a gateway process on loopback (``tests/compat/stack.py``), runs every row of
``clients.ROWS`` twice (a plain answer, a shell-tool round trip), prints the table,
writes ``.compat/results.md`` and ``.compat/results.json``, and exits 1 when any row
failed.  Each run's client output, the upstream requests and the gateway's log rows
are kept under ``.compat/runs/<row>/<case>/``.  Not part of ``make test``.
"""

from __future__ import annotations

import argparse
import contextlib
import ipaddress
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.compat import script
from tests.compat.clients import CLIENTS, ROWS, Client, OpenCode, Row
from tests.compat.stack import MAIN, Stack, start

ROOT = Path(__file__).resolve().parents[2]
COMPAT = ROOT / ".compat"
PACKAGES = ("@openai/codex", "@anthropic-ai/claude-code", "opencode-ai")
CASES = ("plain", "tool")
TIMEOUT_SECONDS = 180.0
#: run each client under strace to list where it tried to connect (when found)
TRACE = shutil.which("strace") is not None
HEADERS = (
    "client",
    "version",
    "upstream kind",
    "plain answer",
    "tool round trip",
    "notes",
)


def out(text: str = "") -> None:
    sys.stdout.write(text + "\n")
    sys.stdout.flush()


def install_command() -> list[str]:
    return [
        "npm",
        "install",
        "--prefix",
        str(COMPAT),
        "--no-fund",
        "--no-audit",
        "--save-exact",
        *[f"{name}@latest" for name in PACKAGES],
    ]


def install() -> None:
    """The clients' current releases; then the package opencode would fetch from
    npm on its first start (``OpenCode.deps``), at the same version as opencode."""
    COMPAT.mkdir(exist_ok=True)
    command = install_command()
    out("$ " + " ".join(command))
    subprocess.run(command, check=True, cwd=ROOT)
    opencode = OpenCode(COMPAT)
    command = [
        "npm",
        "install",
        "--prefix",
        str(opencode.plugin_deps),
        "--no-fund",
        "--no-audit",
        "--save-exact",
        f"@opencode-ai/plugin@{opencode.version()}",
    ]
    out("$ " + " ".join(command))
    subprocess.run(command, check=True, cwd=ROOT)


# ------------------------------------------------------------------ one client run


@dataclass
class CaseResult:
    case: str
    problems: list[str]
    seconds: float = 0.0
    notes: list[str] = field(default_factory=list)
    tools: dict[str, Any] = field(default_factory=dict)

    @property
    def passed(self) -> bool:
        return not self.problems


@dataclass
class Finished:
    exit_code: int | None  # None: timed out
    stdout: str
    stderr: str
    seconds: float


def _strace_works() -> bool:
    """strace needs ptrace, which some containers forbid."""
    probe = ["strace", "-f", "-qq", "-e", "trace=connect", "-o", os.devnull, "true"]
    works = subprocess.run(probe, capture_output=True, check=False).returncode == 0
    if not works:
        out("strace cannot trace here: the clients' connections are not listed")
    return works


def _run_process(
    argv: list[str], env: dict[str, str], cwd: Path, trace: Path | None
) -> Finished:
    """Run one client in its own process group; on timeout end that group.

    With ``trace``, under ``strace -f -e trace=connect`` writing there."""
    if trace is not None:
        argv = ["strace", "-f", "-qq", "-e", "trace=connect", "-o", str(trace), *argv]
    started = time.monotonic()
    process = subprocess.Popen(
        argv,
        env=env,
        cwd=cwd,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )
    try:
        stdout, stderr = process.communicate(timeout=TIMEOUT_SECONDS)
        code: int | None = process.returncode
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        stdout, stderr = process.communicate()
        code = None
    return Finished(
        code,
        stdout.decode(errors="replace"),
        stderr.decode(errors="replace"),
        time.monotonic() - started,
    )


def _gateway_rows(stack: Stack, after: int) -> list[dict[str, Any]]:
    """The gateway's request-log rows (with their attempts) written after ``after``."""
    with stack.gateway.db() as conn:
        rows = conn.execute(
            "select rowid, * from telemetry_requestlog where rowid > ? order by rowid",
            (after,),
        ).fetchall()
        found = []
        for row in rows:
            item = {k: row[k] for k in row.keys() if k != "rowid"}  # noqa: SIM118
            attempts = conn.execute(
                "select * from telemetry_attemptlog where request_id = ? "
                "order by attempt_no",
                (row["id"],),
            ).fetchall()
            item["attempts"] = [dict(a) for a in attempts]
            found.append(item)
    return found


def _last_rowid(stack: Stack) -> int:
    with stack.gateway.db() as conn:
        row = conn.execute("select max(rowid) from telemetry_requestlog").fetchone()
    return int(row[0] or 0)


def _gateway_notes(rows: list[dict[str, Any]]) -> list[str]:
    """What the gateway's log says about the main model's requests."""
    notes: list[str] = []
    main = [r for r in rows if str(r.get("requested_model", "")).endswith(f"/{MAIN}")]
    for row in main:
        if row.get("status") != "success":
            message = " ".join(str(row.get("error_message") or "").split())[:300]
            notes.append(
                f"gateway {row.get('endpoint')} -> {row.get('http_status')} "
                f"{row.get('reason') or row.get('status')}: {message}"
            )
    attempts = [a for r in main for a in r["attempts"]]
    if attempts:
        passthrough = {bool(a.get("passthrough")) for a in attempts}
        notes.append(
            "passthrough"
            if passthrough == {True}
            else "translated"
            if passthrough == {False}
            else "passthrough and translated"
        )
    dropped: list[str] = []
    for attempt in attempts:
        with contextlib.suppress(TypeError, ValueError):
            dropped += json.loads(attempt.get("dropped") or "[]")
    if dropped:
        notes.append("dropped " + ",".join(dict.fromkeys(dropped)))
    return notes


def _new_tracebacks(log: Path, offset: int) -> list[str]:
    try:
        with log.open("rb") as handle:
            handle.seek(offset)
            text = handle.read().decode(errors="replace")
    except OSError:
        return []
    if "Traceback" not in text:
        return []
    last = [line for line in text.splitlines() if line and not line.startswith(" ")]
    return [f"gateway raised: {last[-1][:300]}"] if last else []


_INET = re.compile(
    r"sin6?_port=htons\((\d+)\).*?"
    r'(?:inet_addr\("([^"]+)"\)|inet_pton\(AF_INET6, "([^"]+)")'
)


def _network_notes(trace: Path | None) -> list[str]:
    """Where the client (and its children) tried to connect, loopback aside."""
    if trace is None or not trace.exists():
        return []
    outside: set[str] = set()
    for line in trace.read_text(errors="replace").splitlines():
        match = _INET.search(line)
        if match is None:
            continue
        port, address = match.group(1), match.group(2) or match.group(3)
        host = ipaddress.ip_address(address)
        mapped = getattr(host, "ipv4_mapped", None)
        if not (host.is_loopback or (mapped is not None and mapped.is_loopback)):
            outside.add(f"{address}:{port}" + (" (DNS)" if port == "53" else ""))
    if not outside:
        return ["network: loopback only"]
    return ["network: tried " + ", ".join(sorted(outside))]


def _client_error(finished: Finished) -> list[str]:
    """The client's last error line, when it failed."""
    lines = [
        line.strip()
        for line in (finished.stderr + "\n" + finished.stdout).splitlines()
        if "error" in line.lower() and "level=INFO" not in line
    ]
    return [f"client: {lines[-1][:300]}"] if lines else []


def run_case(
    stack: Stack, client: Client, row: Row, case: str, tools: Any
) -> CaseResult:
    stack.reset()
    call = script.shell_call(tools, client.default_tool) if case == "tool" else None
    script.script(stack.mock, case, call)
    run_dir = COMPAT / "runs" / row.id / case
    shutil.rmtree(run_dir, ignore_errors=True)
    cwd = run_dir / "work"
    cwd.mkdir(parents=True)
    if shutil.which("git"):  # its own repository: the clients never see this one
        subprocess.run(["git", "init", "-q", str(cwd)], check=False)
    (client.home() / "tmp").mkdir(parents=True, exist_ok=True)
    prepared = client.prepare(row, stack.url, cwd)
    prompt = script.TOOL_PROMPT if case == "tool" else script.PLAIN_PROMPT
    before = _last_rowid(stack)
    log_offset = stack.gateway.log.stat().st_size
    trace = run_dir / "connect.strace" if TRACE else None
    finished = _run_process(prepared.command(prompt), prepared.env, cwd, trace)
    time.sleep(0.5)  # the gateway's log rows are flushed every 100 ms
    records = stack.mock.requests()
    rows = _gateway_rows(stack, before)
    (run_dir / "command.json").write_text(
        json.dumps({"argv": prepared.command(prompt), "env": prepared.env}, indent=2)
    )
    (run_dir / "stdout.txt").write_text(finished.stdout)
    (run_dir / "stderr.txt").write_text(finished.stderr)
    (run_dir / "upstream-requests.json").write_text(
        json.dumps(records, indent=1, default=str)
    )
    (run_dir / "gateway-log.json").write_text(json.dumps(rows, indent=1, default=str))
    answer = client.answer(prepared, finished.stdout)
    problems = script.judge(
        case,
        exit_code=finished.exit_code,
        answer=answer,
        records=records,
        expected_path=row.expected_path,
    )
    notes = _gateway_notes(rows) + script.upstream_notes(records)
    notes += _new_tracebacks(stack.gateway.log, log_offset)
    notes += _network_notes(trace)
    if problems:
        notes += _client_error(finished)
    if case == "tool" and call is not None:
        notes.append(f"tool {call['name']}")
    seen = script.main_requests(records)
    return CaseResult(
        case,
        problems,
        finished.seconds,
        notes,
        script.tools_of(seen[0].get("body")) if seen else {},
    )


# ---------------------------------------------------------------------- one row


@dataclass
class RowResult:
    row: Row
    version: str
    cases: dict[str, CaseResult]
    notes: list[str] = field(default_factory=list)

    @property
    def passed(self) -> bool:
        return all(c.passed for c in self.cases.values())

    def cell(self, case: str) -> str:
        result = self.cases[case]
        return "PASS" if result.passed else "FAIL"

    def client_label(self) -> str:
        command = {
            "codex": "codex exec",
            "claude": "claude -p",
            "opencode": "opencode run",
        }
        label = command[self.row.client]
        if self.row.sdk:
            label += f", {self.row.sdk}"
        return f"{label} ({self.row.surface})"

    def note_text(self) -> str:
        """Each case's problems, then the notes of both cases, once each."""
        parts = list(self.notes)
        problems = {
            c: "; ".join(dict.fromkeys(r.problems)) for c, r in self.cases.items()
        }
        if len(set(problems.values())) == 1:
            parts += [p for p in problems.values() if p][:1]
        else:
            parts += [f"{c}: {p}" for c, p in problems.items() if p]
        notes = [n for result in self.cases.values() for n in result.notes]
        return "; ".join(dict.fromkeys(parts + notes))


def run_row(stack: Stack, row: Row) -> RowResult:
    client = CLIENTS[row.client](COMPAT)
    version = client.version()
    problem = stack.problems.get(row.provider)
    if problem is not None:
        cases = {case: CaseResult(case, [problem]) for case in CASES}
        return RowResult(row, version, cases)
    cases: dict[str, CaseResult] = {}
    tools: Any = {}
    for case in CASES:
        cases[case] = run_case(stack, client, row, case, tools)
        tools = cases[case].tools or tools
    result = RowResult(row, version, cases)
    if isinstance(client, OpenCode):
        installed = client.runtime_packages()
        if installed:
            result.notes.append(
                "opencode installed at run time: " + ", ".join(installed)
            )
    return result


# ---------------------------------------------------------------------- the table


def table_rows(results: list[RowResult]) -> list[tuple[str, ...]]:
    return [
        (
            r.client_label(),
            r.version,
            r.row.upstream,
            r.cell("plain"),
            r.cell("tool"),
            r.note_text(),
        )
        for r in results
    ]


def text_table(results: list[RowResult]) -> str:
    rows = [HEADERS, *table_rows(results)]
    widths = [max(len(r[i]) for r in rows) for i in range(len(HEADERS) - 1)]
    lines = []
    for index, row in enumerate(rows):
        cells = [row[i].ljust(widths[i]) for i in range(len(widths))]
        lines.append("  ".join([*cells, row[-1]]))
        if index == 0:
            lines.append("  ".join("-" * w for w in [*widths, len(HEADERS[-1])]))
    return "\n".join(lines)


def markdown_table(results: list[RowResult]) -> str:
    def line(cells: tuple[str, ...]) -> str:
        return "| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |"

    lines = [line(HEADERS), "|" + "---|" * len(HEADERS)]
    lines += [line(cells) for cells in table_rows(results)]
    return "\n".join(lines)


def versions() -> dict[str, str]:
    return {name: CLIENTS[name](COMPAT).version() for name in CLIENTS}


def write_results(results: list[RowResult]) -> None:
    found = versions()
    (COMPAT / "versions.json").write_text(json.dumps(found, indent=2) + "\n")
    (COMPAT / "results.md").write_text(
        markdown_table(results)
        + "\n\n"
        + ", ".join(f"{CLIENTS[n].package} {v}" for n, v in found.items())
        + "\n"
    )
    payload = [
        {
            "row": r.row.id,
            "client": r.client_label(),
            "version": r.version,
            "upstream": r.row.upstream,
            "passed": r.passed,
            "notes": r.notes,
            "cases": {
                c: {
                    "passed": v.passed,
                    "problems": v.problems,
                    "notes": v.notes,
                    "seconds": round(v.seconds, 1),
                }
                for c, v in r.cases.items()
            },
        }
        for r in results
    ]
    (COMPAT / "results.json").write_text(json.dumps(payload, indent=2) + "\n")


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m tests.compat.run")
    parser.add_argument(
        "--no-install", action="store_true", help="use the clients already in .compat"
    )
    parser.add_argument(
        "--dir",
        type=Path,
        default=COMPAT,
        help=f"where the clients, their homes and the results go (default {COMPAT})",
    )
    parser.add_argument(
        "--no-trace",
        action="store_true",
        help="do not run the clients under strace (which lists their connections)",
    )
    parser.add_argument(
        "--only",
        action="append",
        default=[],
        metavar="ROW",
        help="run only rows whose id starts with ROW (repeatable): "
        + ", ".join(r.id for r in ROWS),
    )
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    global COMPAT, TRACE
    args = parse_args(argv)
    COMPAT = args.dir.resolve()
    TRACE = TRACE and not args.no_trace and _strace_works()
    if not args.no_install:
        if shutil.which("npm") is None:
            out("make compat needs node and npm on PATH")
            return 2
        install()
    missing = [name for name, v in versions().items() if v == "not installed"]
    if missing:
        names = ", ".join(missing)
        out(f"not installed in {COMPAT}: {names} (run without --no-install)")
        return 2
    for name in CLIENTS:
        shutil.rmtree(CLIENTS[name](COMPAT).home(), ignore_errors=True)
    rows = [r for r in ROWS if not args.only or r.id.startswith(tuple(args.only))]
    stack = start(COMPAT / "gateway")
    out(f"gateway {stack.url}, mock upstream {stack.mock.url}")
    for text in stack.warnings:
        out(f"import_config said: {text}")
    for slug, text in stack.problems.items():
        out(f"provider {slug} not configured: {text}")
    results: list[RowResult] = []
    try:
        for row in rows:
            out(f"... {row.id}")
            results.append(run_row(stack, row))
            out(f"    {'PASS' if results[-1].passed else 'FAIL'}")
    finally:
        stack.stop()
    write_results(results)
    out()
    out(text_table(results))
    out()
    out(
        "versions: "
        + ", ".join(f"{CLIENTS[n].package} {v}" for n, v in versions().items())
    )
    out(f"details: {COMPAT / 'runs'}; table: {COMPAT / 'results.md'}")
    return 0 if results and all(r.passed for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
