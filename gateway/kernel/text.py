"""The text of message content: one definition for every reader.

Content is a string, or a list of parts; the text parts are ``text`` (Chat
Completions), ``input_text`` and ``output_text`` (the Responses shapes a chat body
may carry).  ``text_of`` is the string as is, or the texts of the text parts joined by
``sep``; anything else has no text.  The fingerprint ``F`` (spec 03 §3), the
classifier (04 §3, 05 §2), context-relay summaries (03 §5.17), agentic planning (03
§7), the effort estimate (04 §5.3) and the dialects all read text through it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

TEXT_PARTS = frozenset({"text", "input_text", "output_text"})


def text_of(content: Any, sep: str = "\n") -> str:
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        return ""
    return sep.join(
        part["text"]
        for part in content
        if isinstance(part, Mapping)
        and part.get("type") in TEXT_PARTS
        and isinstance(part.get("text"), str)
    )


def message_text(message: Any) -> str:
    """The text of one chat message's ``content``."""
    return text_of(message.get("content")) if isinstance(message, Mapping) else ""
