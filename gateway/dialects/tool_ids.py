"""Tool-call ids an upstream accepts (spec 10 §1; #14).

A conversation may carry tool-call ids another upstream made: Gemini's carry the
call's thought signature (``call_<tag>_<n>_ts_<base64url>``, or ``_tu_``; often 800+
characters),
other OpenAI-compatible hosts use ``.`` or ``:`` in theirs.  After a failover those
ids go to an upstream with rules of its own: OpenAI refuses an id longer than 40
characters, Bedrock's ``toolUseId`` is 1-64 of ``[a-zA-Z0-9_-]``, Anthropic's
``tool_use`` ids are of ``[a-zA-Z0-9_-]``.

``fit_messages(messages, rule)`` gives such a dialect the canonical messages with
every id that breaks its ``rule`` replaced by ``call_`` and 32 hex digits of the id's
SHA-256: deterministic, so an assistant's ``tool_calls[].id`` and the ``tool``
message's ``tool_call_id`` that answers it map to the same value in one request
(and in every later request of the conversation), and short and plain enough for
every rule here.  An id that fits is sent as it is; the client's canonical ids are
never changed, so Gemini still reads its signature from them.  Pure: no state.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from typing import Any

#: the form an id that breaks a rule is sent in: ``call_`` + 32 hex digits (37)
_PREFIX = "call_"
_DIGEST_CHARS = 32


@dataclass(frozen=True, slots=True)
class IdRule:
    """What an upstream accepts as a tool-call id."""

    max_chars: int
    #: the characters allowed (None: any)
    pattern: re.Pattern[str] | None = None

    def fits(self, value: str) -> bool:
        if len(value) > self.max_chars:
            return False
        return self.pattern is None or self.pattern.fullmatch(value) is not None


_PLAIN = re.compile(r"[a-zA-Z0-9_-]+")
#: OpenAI (and Azure, and the hosts that copy its limits): at most 40 characters
OPENAI_IDS = IdRule(max_chars=40)
#: Bedrock's ``toolUseId``: 1-64 of ``[a-zA-Z0-9_-]``
BEDROCK_IDS = IdRule(max_chars=64, pattern=_PLAIN)
#: Anthropic's ``tool_use.id``: ``[a-zA-Z0-9_-]`` (no documented length; 64 here)
ANTHROPIC_IDS = IdRule(max_chars=64, pattern=_PLAIN)


def fit_id(value: str, rule: IdRule) -> str:
    """``value`` when it fits ``rule``, else its short deterministic form."""
    if not value or rule.fits(value):
        return value
    digest = hashlib.sha256(value.encode("utf-8")).hexdigest()[:_DIGEST_CHARS]
    return f"{_PREFIX}{digest}"


def _needs_fitting(message: dict[str, Any], rule: IdRule) -> bool:
    ident = message.get("tool_call_id")
    if isinstance(ident, str) and ident and not rule.fits(ident):
        return True
    calls = message.get("tool_calls")
    for call in calls if isinstance(calls, list) else ():
        ident = call.get("id") if isinstance(call, dict) else None
        if isinstance(ident, str) and ident and not rule.fits(ident):
            return True
    return False


def _fitted(message: dict[str, Any], rule: IdRule) -> dict[str, Any]:
    out = dict(message)
    ident = out.get("tool_call_id")
    if isinstance(ident, str):
        out["tool_call_id"] = fit_id(ident, rule)
    calls = out.get("tool_calls")
    if isinstance(calls, list):
        out["tool_calls"] = [
            {**call, "id": fit_id(call["id"], rule)}
            if isinstance(call, dict) and isinstance(call.get("id"), str)
            else call
            for call in calls
        ]
    return out


def fit_messages(messages: Any, rule: IdRule) -> Any:
    """``messages`` with every tool-call id fitted to ``rule``: the same list when
    every id fits (the usual case costs one scan), else a new list whose changed
    messages are copies (the canonical body is never mutated)."""
    if not isinstance(messages, list):
        return messages
    if not any(isinstance(m, dict) and _needs_fitting(m, rule) for m in messages):
        return messages
    return [
        _fitted(m, rule) if isinstance(m, dict) and _needs_fitting(m, rule) else m
        for m in messages
    ]


def fit_body(body: dict[str, Any], rule: IdRule) -> dict[str, Any]:
    """``body`` with its ``messages`` fitted (the same dict when nothing changes)."""
    messages = body.get("messages")
    fitted = fit_messages(messages, rule)
    return body if fitted is messages else {**body, "messages": fitted}
