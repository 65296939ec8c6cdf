"""The text of message content: one definition for every reader.

Content is a string, or a list of parts.  A part's text is its string ``text`` field,
whatever its ``type``: ``text`` (Chat Completions), ``input_text`` and ``output_text``
(the Responses shapes a chat body may carry), and the untyped or odd-typed parts some
OpenAI-compatible servers answer with.  ``text_of`` is the string as is, or the texts
of the parts joined by ``sep``; a part without a string ``text`` (an image, a
refusal, a tool call) has none.  The fingerprint ``F`` (spec 03 §3), the
classifier (04 §3, 05 §2), context-relay summaries (03 §5.17), agentic planning (03
§7), the effort estimate (04 §5.3) and the dialects all read text through it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def text_of(content: Any, sep: str = "\n") -> str:
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        return ""
    return sep.join(
        part["text"]
        for part in content
        if isinstance(part, Mapping) and isinstance(part.get("text"), str)
    )


def message_text(message: Any) -> str:
    """The text of one chat message's ``content``."""
    return text_of(message.get("content")) if isinstance(message, Mapping) else ""
