"""What the mock upstream answers in each case, and how a case is judged.

Two cases per row:

* ``plain``: the upstream answers ``PLAIN``; the client must exit 0 and print it.
* ``tool``: the upstream's first answer to the main model is a call of the client's
  own shell tool running ``COMMAND``; the client must run it and send its output
  (``OUTPUT``, which the command's text does not contain) back in the next request;
  the upstream then answers ``FINAL``, which the client must print.

The mock is scripted by upstream model id (``MAIN``); side requests of a client go to
``AUX`` and get a fixed text, so they never consume the scripted tool call.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from tests.compat.stack import AUX, MAIN

PLAIN = "COMPAT-PLAIN-OK"
FINAL = "COMPAT-TOOL-DONE"
COMMAND = "printf 'compat-%s\\n' tool-output"
OUTPUT = "compat-tool-output"
AUX_TEXT = "Compat side answer"

PLAIN_PROMPT = "Reply with one short line."
TOOL_PROMPT = f"Run this shell command with your shell tool: {COMMAND}"

#: shell tool names, most specific first
SHELL_TOOLS = ("exec_command", "shell_command", "shell", "Bash", "bash", "local_shell")


def tools_of(body: Any) -> dict[str, dict[str, Any]]:
    """Tool name -> JSON schema, from a Chat, Messages or Responses request body."""
    found: dict[str, dict[str, Any]] = {}
    if not isinstance(body, Mapping):
        return found
    for tool in body.get("tools") or []:
        if not isinstance(tool, Mapping):
            continue
        spec = (
            tool.get("function") if isinstance(tool.get("function"), Mapping) else tool
        )
        name = spec.get("name")
        schema = spec.get("parameters") or spec.get("input_schema") or {}
        if isinstance(name, str):
            found[name] = schema if isinstance(schema, dict) else {}
    return found


def shell_call(tools: Mapping[str, Mapping[str, Any]], default: str) -> dict[str, Any]:
    """The tool call running COMMAND, shaped to the client's own shell tool."""
    name = next((n for n in SHELL_TOOLS if n in tools), default)
    schema = tools.get(name) or {}
    props = schema.get("properties") or {}
    arguments: dict[str, Any] = {}
    if "cmd" in props:
        arguments["cmd"] = COMMAND
    elif (props.get("command") or {}).get("type") == "array":
        arguments["command"] = ["bash", "-lc", COMMAND]
    else:
        arguments["command"] = COMMAND
    if "description" in props or name in ("Bash", "bash"):
        arguments["description"] = "Prints the compat marker"
    return {"name": name, "arguments": json.dumps(arguments)}


def script(mock: Any, case: str, call: Mapping[str, Any] | None = None) -> None:
    """Script the mock for one case (after a reset)."""
    mock.add(AUX, content=AUX_TEXT)
    if case == "tool":
        mock.add(MAIN, times=1, tool_calls=[dict(call or {})])
        mock.add(MAIN, content=FINAL)
    else:
        mock.add(MAIN, content=PLAIN)


def main_requests(records: Iterable[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    return [r for r in records if r.get("model") == MAIN]


def judge(
    case: str,
    *,
    exit_code: int | None,
    answer: str,
    records: Sequence[Mapping[str, Any]],
    expected_path: str,
) -> list[str]:
    """Why the case failed (empty: it passed)."""
    problems: list[str] = []
    if exit_code is None:
        problems.append("timed out")
    elif exit_code != 0:
        problems.append(f"exit code {exit_code}")
    main = main_requests(records)
    if not main:
        problems.append("the upstream received no request for the main model")
    paths = sorted({str(r.get("path", "")).partition("?")[0] for r in main})
    wrong = [p for p in paths if not p.endswith(expected_path)]
    if wrong:
        problems.append(f"upstream called on {', '.join(wrong)}, not {expected_path}")
    if case == "plain":
        if PLAIN not in answer:
            problems.append(f"answer lacks {PLAIN!r}")
        return problems
    if len(main) < 2:
        problems.append("no request after the tool call (the tool result never came)")
    elif not any(OUTPUT in json.dumps(r.get("body")) for r in main[1:]):
        problems.append(f"the tool result sent upstream lacks the output {OUTPUT!r}")
    if FINAL not in answer:
        problems.append(f"answer lacks {FINAL!r}")
    return problems


def upstream_notes(records: Sequence[Mapping[str, Any]]) -> list[str]:
    """What the upstream saw of the main model's requests: streamed or not, and on
    the Messages wire whether the client's beta header and thinking survived."""
    main = main_requests(records)
    if not main:
        return []
    notes = ["streamed" if all(r.get("stream") for r in main) else "not streamed"]
    if all(str(r.get("path", "")).endswith("/messages") for r in main):
        if any("anthropic-beta" in (r.get("headers") or {}) for r in main):
            notes.append("anthropic-beta forwarded")
        if any(
            isinstance(r.get("body"), Mapping) and "thinking" in r["body"] for r in main
        ):
            notes.append("thinking kept")
    return notes
