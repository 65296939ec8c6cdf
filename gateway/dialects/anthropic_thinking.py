"""Extended thinking on Anthropic's wire (Anthropic and Vertex's Claude): when the
gateway may send ``thinking``, with what budget, and how signed thinking blocks
travel through a canonical chat conversation.  Pure: plain data in and out.

* **Budget.** ``reasoning_effort`` picks a budget by level (``THINKING_BUDGETS``).
  ``max_tokens`` counts thinking and answer together, so the answer keeps room: at
  least ``MIN_ANSWER_TOKENS`` or a quarter of ``max_tokens``, whichever is more.
  When the client set no ``max_tokens``, it is the budget plus the usual default
  (``DEFAULT_MAX_TOKENS``), at most ``MAX_DEFAULT_TOTAL``.  A budget under
  Anthropic's minimum of 1024 sends no thinking.
* **Tool turns.** With thinking on, Anthropic refuses a request that continues an
  assistant turn (the conversation ends with tool results) whose first assistant
  message does not start with a signed ``thinking`` or a ``redacted_thinking``
  block.  Such a turn is sent without ``thinking`` instead: a turn another model
  served, or one whose signature the client did not keep.
* **Signatures.** A reply's signed blocks reach a Chat Completions client as the
  message's ``thinking_blocks`` (beside ``reasoning_content``), the name other
  gateways use, so a client that sends the message back keeps them; a canonical
  assistant message's ``thinking_blocks`` go first in its Anthropic content.

When the gateway leaves thinking out for a ``reasoning_effort`` that asked for it,
``unsent`` names ``reasoning_effort`` (``X-OmniRoute-Dropped``, spec 09 §2.6).
"""

from __future__ import annotations

import base64
import json
from typing import Any

JSON = dict[str, Any]

#: reasoning_effort -> thinking budget_tokens (Anthropic's minimum budget is 1024)
THINKING_BUDGETS = {
    "minimal": 1024,
    "low": 2048,
    "medium": 8192,
    "high": 16384,
    "xhigh": 32768,
    "max": 32768,  # as xhigh: within the gateway's own max_tokens cap it is the same
}
MIN_THINKING_BUDGET = 1024
#: Anthropic requires max_tokens; OpenAI clients may omit it
DEFAULT_MAX_TOKENS = 4096
#: the answer keeps at least this many tokens of max_tokens (or a quarter of it)
MIN_ANSWER_TOKENS = 1024
#: max_tokens the gateway sets on its own with thinking on: within every current
#: Claude model's output limit (Opus 4 takes 32 000)
MAX_DEFAULT_TOTAL = 32000
_THOUGHT = ("thinking", "redacted_thinking")
#: thinking allows top_p only from this value up (and temperature only at 1)
MIN_THINKING_TOP_P = 0.95


def client_max_tokens(body: JSON) -> int | None:
    """The client's ``max_completion_tokens`` or ``max_tokens``, if it set one."""
    for key in ("max_completion_tokens", "max_tokens"):
        value = body.get(key)
        if isinstance(value, int) and not isinstance(value, bool):
            return value
    return None


def signed_blocks(value: Any) -> list[JSON]:
    """The well-formed blocks of a message's ``thinking_blocks``: signed
    ``thinking`` and ``redacted_thinking`` blocks, in order (others are left out,
    since Anthropic refuses them)."""
    blocks: list[JSON] = []
    for block in value if isinstance(value, list) else ():
        if not isinstance(block, dict):
            continue
        kind = block.get("type")
        if kind == "thinking":
            text, signature = block.get("thinking"), block.get("signature")
            if isinstance(text, str) and isinstance(signature, str) and signature:
                blocks.append(
                    {"type": "thinking", "thinking": text, "signature": signature}
                )
        elif kind == "redacted_thinking":
            data = block.get("data")
            if isinstance(data, str) and data:
                blocks.append({"type": "redacted_thinking", "data": data})
    return blocks


def _unthought_tool_turn(messages: Any) -> bool:
    """A canonical conversation continues an assistant turn (it ends with tool
    results) whose first assistant message carries no signed thinking block."""
    if not isinstance(messages, list) or not messages:
        return False
    last = messages[-1]
    if not isinstance(last, dict) or last.get("role") != "tool":
        return False
    start = 0
    for index in range(len(messages) - 1, -1, -1):
        message = messages[index]
        if isinstance(message, dict) and message.get("role") == "user":
            start = index + 1
            break
    for message in messages[start:]:
        if isinstance(message, dict) and message.get("role") == "assistant":
            return not signed_blocks(message.get("thinking_blocks"))
    return True


def thinking_fit(body: JSON) -> tuple[int, int] | None:
    """``(budget_tokens, max_tokens)`` for a canonical body's ``reasoning_effort``;
    None when no thinking is sent (``none`` or an unknown level, no room for the
    minimum budget, a tool turn without its signed thinking)."""
    effort = body.get("reasoning_effort")
    budget = THINKING_BUDGETS.get(effort) if isinstance(effort, str) else None
    if budget is None:
        return None
    limit = client_max_tokens(body)
    if limit is None:
        total = min(budget + DEFAULT_MAX_TOKENS, MAX_DEFAULT_TOTAL)
        budget = min(budget, total - DEFAULT_MAX_TOKENS)
    else:
        total = limit
        budget = min(budget, limit - max(MIN_ANSWER_TOKENS, limit // 4))
    if budget < MIN_THINKING_BUDGET or _unthought_tool_turn(body.get("messages")):
        return None
    return budget, total


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def unsent(body: JSON) -> tuple[str, ...]:
    """``("reasoning_effort",)`` when it asks for a level of thinking the attempt
    cannot send (``thinking_fit``); with thinking sent, the sampling fields it
    refuses and the attempt leaves out: ``temperature`` other than 1, ``top_k``,
    ``top_p`` under 0.95."""
    if body.get("reasoning_effort") not in THINKING_BUDGETS:
        return ()
    if thinking_fit(body) is None:
        return ("reasoning_effort",)
    left: tuple[str, ...] = ()
    temperature = body.get("temperature")
    if _number(temperature) and temperature != 1:
        left += ("temperature",)
    if body.get("top_k") is not None:
        left += ("top_k",)
    top_p = body.get("top_p")
    if (
        isinstance(top_p, int | float)
        and not isinstance(top_p, bool)
        and (top_p < MIN_THINKING_TOP_P)
    ):
        left += ("top_p",)
    return left


def _starts_unthought(messages: list[Any]) -> bool:
    """An Anthropic ``messages`` list continues an assistant turn (it ends with a
    user message of tool results) whose first assistant message does not start
    with a thinking block."""
    last = messages[-1] if messages else None
    if not isinstance(last, dict) or last.get("role") != "user":
        return False
    if not _has_tool_result(last.get("content")):
        return False
    start = 0
    for index in range(len(messages) - 2, -1, -1):
        message = messages[index]
        if (
            isinstance(message, dict)
            and message.get("role") == "user"
            and not _has_tool_result(message.get("content"))
        ):
            start = index + 1
            break
    for message in messages[start:]:
        if isinstance(message, dict) and message.get("role") == "assistant":
            content = message.get("content")
            first = content[0] if isinstance(content, list) and content else None
            return not (isinstance(first, dict) and first.get("type") in _THOUGHT)
    return False


def _has_tool_result(content: Any) -> bool:
    return isinstance(content, list) and any(
        isinstance(block, dict) and block.get("type") == "tool_result"
        for block in content
    )


def thinking_on(body: JSON) -> bool:
    """A Messages body asks for thinking (``enabled`` or ``adaptive``)."""
    thinking = body.get("thinking")
    return isinstance(thinking, dict) and thinking.get("type") not in (None, "disabled")


def drop_unthought_thinking(body: JSON) -> bool:
    """Leave ``thinking`` out of a Messages body (the attempt's own copy) that
    continues a tool turn without its thinking block (module doc); True when it
    was left out."""
    messages = body.get("messages")
    if thinking_on(body) and isinstance(messages, list) and _starts_unthought(messages):
        del body["thinking"]
        return True
    return False


#: a Responses reasoning item's ``encrypted_content`` made of signed blocks
ENCRYPTED_PREFIX = "omniroute.thinking.v1:"


def encode_blocks(blocks: list[JSON]) -> str:
    """Signed blocks as a Responses reasoning item's ``encrypted_content``: a client
    that sends the item back (Codex with ``store: false``, or a stored response)
    gives a tool turn its thinking again.  Not secret: the thinking is the item's
    summary already, and the signature only proves it to Anthropic."""
    raw = json.dumps(blocks, separators=(",", ":")).encode()
    return ENCRYPTED_PREFIX + base64.urlsafe_b64encode(raw).decode()


def decode_blocks(value: Any) -> list[JSON]:
    """The signed blocks of an ``encrypted_content`` ``encode_blocks`` made; none for
    anything else (another upstream's own encrypted reasoning)."""
    if not isinstance(value, str) or not value.startswith(ENCRYPTED_PREFIX):
        return []
    try:
        raw = base64.urlsafe_b64decode(value[len(ENCRYPTED_PREFIX) :])
        return signed_blocks(json.loads(raw))
    except ValueError:  # also bad base64 or UTF-8
        return []


def without_blocks(messages: Any) -> Any:
    """``messages`` without ``thinking_blocks``, for an upstream other than
    Anthropic's (it is no OpenAI field, and the signature is Anthropic's): the same
    list when no message has any (one scan), else a new list of copies."""
    if not isinstance(messages, list) or not any(
        isinstance(m, dict) and "thinking_blocks" in m for m in messages
    ):
        return messages
    return [
        {k: v for k, v in m.items() if k != "thinking_blocks"}
        if isinstance(m, dict) and "thinking_blocks" in m
        else m
        for m in messages
    ]


def _own_reasoning(item: Any) -> bool:
    return (
        isinstance(item, dict)
        and item.get("type") == "reasoning"
        and isinstance(item.get("encrypted_content"), str)
        and item["encrypted_content"].startswith(ENCRYPTED_PREFIX)
    )


def without_own_reasoning(items: Any) -> Any:
    """A Responses ``input`` without the reasoning items whose ``encrypted_content``
    the gateway made (``encode_blocks``): an OpenAI upstream cannot decrypt them and
    refuses the request.  They hold no user content (spec 09 §2.6: left out
    silently).  The same list when there are none."""
    if not isinstance(items, list) or not any(_own_reasoning(i) for i in items):
        return items
    return [item for item in items if not _own_reasoning(item)]
