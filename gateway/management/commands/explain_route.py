"""``manage.py explain_route MODEL [--key NAME] [--body FILE] [--json]``.

Prints how the gateway would route a sample request (``gateway.ops.explain``): the
resolved route, the ordered targets and why, the skipped ones and the state that
decided it.  A dry run: nothing is written and no upstream is called.  Health and
strategy state live per process, so this command sees only what this process holds.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
from django.core.management.base import BaseCommand, CommandError, CommandParser

from gateway.config.snapshot import build_table
from gateway.ops.explain import UnknownKey, explain


def _json(value: Any) -> str:
    return orjson.dumps(value).decode()


def _slot_lines(slot: dict[str, Any]) -> list[str]:
    allow = slot["allow_list"]
    lines = [
        f"slot {slot['slot']}: {slot['model']} ({slot['param']}, {slot['source']})",
        f"  route: {slot['route']} -> {slot['resolved']}"
        + (f"  strategy: {slot['strategy']}" if slot["strategy"] else ""),
        f"  allow-list: {allow['verdict']} ({allow['why']})",
    ]
    for key, record in slot["state"].items():
        change = (
            f"a real request would write {_json(record['would_write'])}"
            if record["written"]
            else "nothing written before dispatch"
        )
        lines.append(f"  state {key}: read {_json(record['read'])}; {change}")
    auto = slot.get("auto")
    if auto:
        lines.append(
            f"  auto: task {auto['task_type']}, weights {auto['weights_source']},"
            f" decided by {auto['strategy']}, explored {auto['explored']},"
            f" incident mode {auto['incident_mode']},"
            f" filters fell open {auto['filter_fell_open'] or 'none'},"
            f" {auto['candidates_considered']} candidates scored"
        )
    refusal = slot.get("refusal")
    if refusal:
        lines.append(
            f"  refused: {refusal['status']} {refusal['code']}: {refusal['message']}"
        )
    lines.append("  targets:" if slot["targets"] else "  targets: none")
    lines.extend(
        f"    {t['position']}. {t['target']}  {t['why']}" for t in slot["targets"]
    )
    for skip in slot["skipped"]:
        wait = skip["retry_after_s"]
        usable = "" if wait is None else f", usable in {wait} s"
        detail = f" ({skip['detail']})" if skip["detail"] else ""
        lines.append(
            f"    skipped {skip['target']}  {skip['reason']}{detail}"
            f" [{skip['stage']}{usable}]"
        )
    return lines


def format_text(report: dict[str, Any]) -> str:
    """The report as readable lines (``manage.py explain_route`` default)."""
    request = report["request"]
    lines = [
        f"Explain route for {request['model']!r}"
        f" (key: {request['key'] or 'none'}, config version {report['table_version']})",
        f"Note: {report['note']}",
    ]
    chain = request.get("chain")
    if chain:
        lines.append("chain: " + " -> ".join(e["model"] for e in chain))
    smart = report.get("smart")
    if smart:
        signals = ", ".join(smart["signals"]) or "none"
        lines.append(
            f"smart alias {smart['alias']}: {smart['tier']} ({smart['source']},"
            f" score {smart['score']}, signals {signals}) -> {smart['target']}"
            f"  mode: {smart['mode']}; no pin is read or written here"
        )
    error = report["error"]
    if error is not None:
        param = f" (param: {error['param']})" if error["param"] else ""
        lines.append(
            f"error: {error['status']} {error['code']}{param}: {error['message']}"
        )
        return "\n".join(lines) + "\n"
    for slot in report["slots"]:
        lines.extend(_slot_lines(slot))
    lines.extend(f"shadowing: {n}" for n in report.get("shadowing", []))
    lines.extend(f"warning: {w}" for w in report["warnings"])
    return "\n".join(lines) + "\n"


class Command(BaseCommand):
    help = "Explain how the gateway would route a sample chat request (dry run)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("model", help="the model string a client would send")
        parser.add_argument(
            "--key", help="API key name: applies its allow-list and failover_defaults"
        )
        parser.add_argument(
            "--body",
            type=Path,
            help="a full chat request body (JSON); MODEL replaces its 'model'",
        )
        parser.add_argument(
            "--json", action="store_true", help="print the report as JSON"
        )

    def handle(self, *args: Any, **options: Any) -> None:
        body = None
        if options["body"] is not None:
            try:
                body = options["body"].read_bytes()
            except OSError as exc:
                raise CommandError(f"cannot read --body: {exc}") from exc
        try:
            report = explain(
                build_table(), options["model"], key_name=options["key"], body=body
            )
        except UnknownKey as exc:
            raise CommandError(str(exc)) from exc
        if options["json"]:
            self.stdout.write(orjson.dumps(report, option=orjson.OPT_INDENT_2).decode())
        else:
            self.stdout.write(format_text(report), ending="")
