"""Request effort level and ``X-OmniRoute-Effort: auto`` (spec 04 §5.3).

The level (low / medium / high) is read from the **current turn** only.  Let *b* be
the last ``user`` message, or the last message when there is no user message:

- ``user_chars``: the text length of *b*; 0 when *b* is not a user message;
- ``ctx_tokens``: the sum of ``ceil(text_chars / 4)`` over the messages up to and
  including *b*;
- ``tool_results``: the number of ``tool`` messages before *b*.

First matching rule: ``low`` if user_chars <= 160, ctx_tokens <= 4000 and no tool
results; ``high`` if ctx_tokens >= 60 000, tool_results >= 6 or user_chars >= 4000;
``medium`` otherwise.  Nothing after *b* is read, so every request of one tool loop
gets the same level: it never escalates mid-loop, and the cache prefix stays stable.

``apply_effort`` sets ``reasoning_effort`` to that level only when the header is
``auto``, the body sets none of ``reasoning_effort``/``reasoning``/``thinking``, the
provider speaks the OpenAI dialect (``openai``; ``mock`` counts) and the model's
catalog capabilities include ``reasoning``.  The input body is never mutated.

Where the spec is silent:

- A message's text is its string content, or its ``text``/``input_text`` parts
  joined with ``"\\n"`` (as the classifier reads it).  Everything else is not text:
  ``tool_calls`` arguments, images, audio, a ``name``.
- A body "has" a field when the key is present, even with a null value: an
  explicit client choice is never overwritten.
- A request with no messages has no *b*: every signal is 0, so the level is low.
- The header is compared after trimming and ignoring case.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from gateway.dialects import REGISTRY
from gateway.kernel.text import message_text

__all__ = ["EFFORT_LEVELS", "apply_effort", "complexity_level", "effort_level"]

EFFORT_LEVELS = ("low", "medium", "high")
CHARS_PER_TOKEN = 4  # spec 04 §5.3: ctx_tokens = ceil(text_chars / 4) per message
LOW_MAX_USER_CHARS = 160
LOW_MAX_CTX_TOKENS = 4_000
HIGH_MIN_CTX_TOKENS = 60_000
HIGH_MIN_TOOL_RESULTS = 6
HIGH_MIN_USER_CHARS = 4_000
EFFORT_HEADER_AUTO = "auto"
#: any of these in the body is the client's own choice of reasoning effort
CLIENT_EFFORT_FIELDS = ("reasoning_effort", "reasoning", "thinking")
#: provider kinds whose dialect passes ``reasoning_effort`` through (spec 04 §5.3:
#: the OpenAI dialect, ``mock`` included)
OPENAI_DIALECT_KINDS = frozenset(k for k, d in REGISTRY.items() if d.reasoning_effort)


def _current_turn(messages: object) -> Sequence[Any]:
    """The messages up to and including *b*; empty when there are none."""
    if not isinstance(messages, Sequence) or isinstance(messages, str):
        return ()
    for index in range(len(messages) - 1, -1, -1):
        message = messages[index]
        if isinstance(message, Mapping) and message.get("role") == "user":
            return messages[: index + 1]
    return messages


def _role(message: object) -> object:
    return message.get("role") if isinstance(message, Mapping) else None


def effort_level(messages: object) -> str:
    """The request's level, ``low``, ``medium`` or ``high`` (spec 04 §5.3)."""
    turn = _current_turn(messages)
    if not turn:
        return "low"
    last = turn[-1]
    user_chars = len(message_text(last)) if _role(last) == "user" else 0
    # -(-n // d) is ceil(n / d) in integers
    ctx_tokens = sum(-(-len(message_text(m)) // CHARS_PER_TOKEN) for m in turn)
    tool_results = sum(1 for m in turn[:-1] if _role(m) == "tool")
    if (
        user_chars <= LOW_MAX_USER_CHARS
        and ctx_tokens <= LOW_MAX_CTX_TOKENS
        and tool_results == 0
    ):
        return "low"
    if (
        ctx_tokens >= HIGH_MIN_CTX_TOKENS
        or tool_results >= HIGH_MIN_TOOL_RESULTS
        or user_chars >= HIGH_MIN_USER_CHARS
    ):
        return "high"
    return "medium"


#: the request level of the specificityMatch factor (spec 04 §3.2) is the same one
complexity_level = effort_level


def apply_effort(
    body: dict[str, Any],
    *,
    header: str | None,
    provider_kind: str,
    capabilities: frozenset[str] | None,
) -> dict[str, Any]:
    """The upstream body with ``reasoning_effort`` set when §5.3 allows it.

    Returns ``body`` itself when nothing changes, else a new dict; ``body`` is never
    mutated.
    """
    if (
        header is None
        or header.strip().lower() != EFFORT_HEADER_AUTO
        or any(field in body for field in CLIENT_EFFORT_FIELDS)
        or provider_kind not in OPENAI_DIALECT_KINDS
        or capabilities is None
        or "reasoning" not in capabilities
    ):
        return body
    return {**body, "reasoning_effort": effort_level(body.get("messages"))}
