"""Agentic pipeline orchestration: the pure parts (spec 03 §7, "Agentic orchestration").

Target 1 plans, target 2 executes, targets 3.. are executor backups.  ``plan_step``
decides what the planner is asked, from the conversation alone:

* no ``tools`` in the request → the planner answers the original body;
* ``rounds ≥ maxToolRounds`` (rounds = assistant messages with ``tool_calls`` after the
  last ``user`` message) → the planner answers with ``tool_choice: "none"`` and an
  appended system message saying the tool budget is spent;
* otherwise an internal, non-streaming *decision call*: the conversation without tools,
  tool calls rendered ``[tool call] <name>(<arguments>)`` and tool results
  ``[tool result <name>] <content>``, plus a system message asking for exactly one JSON
  object ``{"action": "final"}`` or ``{"action": "tools", "instructions": "…"}``.

``parse_decision`` reads the first JSON object of the planner's reply; anything
unparseable means ``final``.  Every added system message goes after the last message.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from gateway.kernel.text import text_of

MAX_TOOL_ROUNDS_DEFAULT = 8
BUDGET_SPENT = (
    "The tool budget for this turn is spent. Do not call any tool; give the best "
    "final answer you can now."
)
DECISION_PROMPT = (
    "Decide the next step of this conversation. Reply with exactly one JSON object "
    'and nothing else: {"action": "final"} when the user can be answered now, or '
    '{"action": "tools", "instructions": "<the next step for the tool-using '
    'assistant>"} when tools must be used first.'
)
EXECUTOR_PREFIX = "Next step, from the planner: "
_DROPPED = ("tools", "tool_choice", "parallel_tool_calls", "stream_options")


def settings_of(config: Mapping[str, Any]) -> tuple[bool, int]:
    """(enabled, maxToolRounds) from ``config.agenticOrchestration``."""
    agentic = config.get("agenticOrchestration")
    if not isinstance(agentic, Mapping):
        return False, MAX_TOOL_ROUNDS_DEFAULT
    rounds = agentic.get("maxToolRounds", MAX_TOOL_ROUNDS_DEFAULT)
    if isinstance(rounds, bool) or not isinstance(rounds, int):
        rounds = MAX_TOOL_ROUNDS_DEFAULT
    return bool(agentic.get("enabled")), rounds


def tool_rounds(messages: Any) -> int:
    """Assistant messages with ``tool_calls`` after the last ``user`` message."""
    if not isinstance(messages, list):
        return 0
    last_user = max(
        (
            i
            for i, m in enumerate(messages)
            if isinstance(m, dict) and m.get("role") == "user"
        ),
        default=-1,
    )
    return sum(
        1
        for m in messages[last_user + 1 :]
        if isinstance(m, dict) and m.get("role") == "assistant" and m.get("tool_calls")
    )


def with_system(body: Mapping[str, Any], text: str, **changes: Any) -> dict[str, Any]:
    messages = list(body.get("messages") or [])
    messages.append({"role": "system", "content": text})
    return {**body, **changes, "messages": messages}


def final_body(body: Mapping[str, Any]) -> dict[str, Any]:
    return {**body, "tool_choice": "none"}


def budget_body(body: Mapping[str, Any]) -> dict[str, Any]:
    return with_system(body, BUDGET_SPENT, tool_choice="none")


def executor_body(body: Mapping[str, Any], instructions: str) -> dict[str, Any]:
    return with_system(body, EXECUTOR_PREFIX + instructions)


def _render(message: dict[str, Any], names: dict[str, str]) -> dict[str, Any]:
    role = message.get("role")
    if role == "assistant" and message.get("tool_calls"):
        lines = [text_of(message.get("content"))] if message.get("content") else []
        for call in message["tool_calls"]:
            function = call.get("function") if isinstance(call, dict) else None
            if isinstance(function, dict):
                lines.append(
                    f"[tool call] {function.get('name')}"
                    f"({function.get('arguments', '')})"
                )
        return {"role": "assistant", "content": "\n".join(lines)}
    if role == "tool":
        name = names.get(str(message.get("tool_call_id")), "tool")
        return {
            "role": "user",
            "content": f"[tool result {name}] {text_of(message.get('content'))}",
        }
    return message


def decision_body(body: Mapping[str, Any]) -> dict[str, Any]:
    """The internal decision call: no tools, tool traffic rendered as text."""
    names: dict[str, str] = {}
    for message in body.get("messages") or []:
        if isinstance(message, dict):
            for call in message.get("tool_calls") or []:
                function = call.get("function") if isinstance(call, dict) else None
                if isinstance(call, dict) and isinstance(function, dict):
                    names[str(call.get("id"))] = str(function.get("name"))
    rendered = [
        _render(m, names) for m in body.get("messages") or [] if isinstance(m, dict)
    ]
    clean = {k: v for k, v in body.items() if k not in _DROPPED}
    clean["stream"] = False
    clean["messages"] = [*rendered, {"role": "system", "content": DECISION_PROMPT}]
    return clean


def parse_decision(text: str | None) -> tuple[str, str | None]:
    """("tools", instructions) or ("final", None); the first JSON object counts."""
    if not text:
        return "final", None
    decoder = json.JSONDecoder()
    index = text.find("{")
    while index != -1:
        try:
            value, _ = decoder.raw_decode(text, index)
        except json.JSONDecodeError:
            index = text.find("{", index + 1)
            continue
        if isinstance(value, dict):
            if value.get("action") == "tools" and isinstance(
                value.get("instructions"), str
            ):
                return "tools", value["instructions"]
            return "final", None
        index = text.find("{", index + 1)
    return "final", None
