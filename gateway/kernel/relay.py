"""context-relay handoff (spec 03 §5.17): when to hand over, to whom, what to ask
for and how the summary reaches the next model.  Pure; the glue is
``gateway.pipeline.handoff``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from gateway.kernel.text import text_of

DEFAULT_THRESHOLD = 0.85
DEFAULT_MAX_MESSAGES = 30
SUMMARY_MAX_TOKENS = 1024
SUMMARY_TTL_SECONDS = 5 * 3600
HANDOFF_PREFIX = "Context handed over from an earlier model: "
SUMMARY_INSTRUCTIONS = (
    "You are handing this conversation over to another assistant. Summarise the "
    "conversation so far for it, under four headings: goals, decisions, facts, open "
    "tasks. Keep names, numbers and commitments exact; leave out pleasantries. Reply "
    "with the summary only."
)


def relay_settings(config: Mapping[str, Any]) -> tuple[float, int]:
    """``(handoffThreshold, maxMessagesForSummary)`` with the spec's defaults."""
    threshold = config.get("handoffThreshold", DEFAULT_THRESHOLD)
    count = config.get("maxMessagesForSummary", DEFAULT_MAX_MESSAGES)
    if isinstance(threshold, bool) or not isinstance(threshold, int | float):
        threshold = DEFAULT_THRESHOLD
    if isinstance(count, bool) or not isinstance(count, int):
        count = DEFAULT_MAX_MESSAGES
    return float(threshold), count


def handoff_due(remaining: float | None, threshold: float) -> bool:
    """The served connection's remaining quota is at or below ``1 - threshold``."""
    return remaining is not None and remaining <= 1 - threshold + 1e-12


def next_holder(declared: Sequence[str], served: str) -> str | None:
    """The target after ``served`` in declared order (wrapping); None if alone."""
    if served not in declared:
        return declared[0] if declared else None
    if len(declared) < 2:  # noqa: PLR2004
        return None
    index = declared.index(served)
    return declared[(index + 1) % len(declared)]


def summary_body(messages: Any, max_messages: int) -> dict[str, Any]:
    """A non-streaming request asking for the summary of the last messages."""
    recent = list(messages)[-max_messages:] if isinstance(messages, list) else []
    transcript = "\n\n".join(
        f"[{m.get('role', 'user')}] {text_of(m.get('content'))}"
        for m in recent
        if isinstance(m, dict)
    )
    return {
        "messages": [
            {"role": "system", "content": SUMMARY_INSTRUCTIONS},
            {"role": "user", "content": transcript or "(no messages)"},
        ],
        "max_tokens": SUMMARY_MAX_TOKENS,
        "stream": False,
    }


def summary_ttl(now: float, resets_at: float | None) -> float:
    """5 h, or until the writer's quota resets when that is sooner."""
    if resets_at is not None and now < resets_at < now + SUMMARY_TTL_SECONDS:
        return resets_at - now
    return float(SUMMARY_TTL_SECONDS)


def with_handoff(body: Mapping[str, Any], summary: str) -> dict[str, Any]:
    """``body`` with the handoff system message after its leading system messages."""
    messages = body.get("messages")
    if not isinstance(messages, list):
        return dict(body)
    lead = 0
    while (
        lead < len(messages)
        and isinstance(messages[lead], dict)
        and messages[lead].get("role") in ("system", "developer")
    ):
        lead += 1
    note = {"role": "system", "content": HANDOFF_PREFIX + summary}
    return {**body, "messages": [*messages[:lead], note, *messages[lead:]]}
