"""Gemini's thought signatures in tool-call ids (spec 10 §1).

Gemini has no call ids, and a ``functionCall`` part may carry a ``thoughtSignature``
that must go back on that part when the client sends the call again (Gemini's
reasoning across tool turns; Gemini 3 models validate it).  The id is the only field
every client echoes unchanged, so the reply's ids carry the signature:
``call_<tag>_<n>`` (``reply_tag``: the letters and digits of the ``responseId``,
else ``created`` in hex, so ids differ from one turn to the next and a conversation
can fail over to Anthropic, which refuses repeated ids), then ``_ts_<base64url>``
for a signature in the standard base64 alphabet or ``_tu_<base64url>`` for one in
the URL-safe alphabet.  ``signature_of`` gives the signature back in the alphabet it
came in, padded.  Pure: no state.
"""

from __future__ import annotations

import base64
import binascii
import re
from typing import Any

#: the mark before a signature in a call id, by the alphabet it came in: ``_ts_``
#: the standard one (``+/``, Gemini's own), ``_tu_`` the URL-safe one (``-_``)
_STANDARD_MARK = "_ts_"
_URL_SAFE_MARK = "_tu_"
#: an id from ``call_id`` with a signature: ``call_[<tag>_]<n>_t<s|u>_<base64url>``
#: (the tag is letters and digits, so the first mark after the number is the one)
_SIGNED_ID = re.compile(r"call_(?:[A-Za-z0-9]+_)?\d+_t([su])_([A-Za-z0-9_-]+)")


def reply_tag(response_id: Any, created: int) -> str:
    """What makes a reply's call ids its own (Gemini numbers calls per reply, and a
    conversation failed over to Anthropic needs ids unique across its turns): the
    letters and digits of the reply's ``responseId``, else ``created`` in hex."""
    tag = "".join(c for c in str(response_id or "") if c.isascii() and c.isalnum())
    return tag[:32] or f"{created:x}"


def _signature_bytes(signature: str) -> tuple[bytes, bool] | None:
    """The bytes of a base64 ``signature`` and whether it is in the URL-safe
    alphabet (``-``, ``_``), or None when it is not base64 in either.  Padding may
    be left out."""
    url_safe = "-" in signature or "_" in signature
    if url_safe and ("+" in signature or "/" in signature):
        return None  # the two alphabets mixed: neither
    text = signature.translate(_FROM_URL_SAFE) if url_safe else signature
    text += "=" * (-len(text) % 4)
    try:
        raw = base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        return None
    return (raw, url_safe) if raw else None


_FROM_URL_SAFE = str.maketrans("-_", "+/")


def call_id(position: int, signature: Any = None, tag: str = "") -> str:
    """The id of the ``position``-th call of a reply (``tag``: ``reply_tag``); a
    ``thoughtSignature`` rides in it as base64url, with a mark saying which
    alphabet it came in (``signature_of`` gives it back in that one), so the call
    can go back with it."""
    plain = f"call_{tag}_{position}" if tag else f"call_{position}"
    if not isinstance(signature, str) or not signature:
        return plain
    found = _signature_bytes(signature)
    if found is None:
        return plain
    raw, url_safe = found
    packed = base64.urlsafe_b64encode(raw).decode("ascii").rstrip("=")
    mark = _URL_SAFE_MARK if url_safe else _STANDARD_MARK
    return f"{plain}{mark}{packed}"


def signature_of(tool_call_id: Any) -> str | None:
    """The ``thoughtSignature`` carried by an id from ``call_id`` (padded, in the
    alphabet it came in), else None."""
    if not isinstance(tool_call_id, str):
        return None
    found = _SIGNED_ID.fullmatch(tool_call_id)
    if found is None:
        return None
    packed = found.group(2)
    try:
        raw = base64.urlsafe_b64decode(packed + "=" * (-len(packed) % 4))
    except (binascii.Error, ValueError):
        return None
    if not raw:
        return None
    if found.group(1) == "u":
        return base64.urlsafe_b64encode(raw).decode("ascii")
    return base64.b64encode(raw).decode("ascii")
