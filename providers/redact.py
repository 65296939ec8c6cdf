"""Masking for messages the providers app stores (job runs, spec 06 §1.4 and §3.1).

``providers`` is the lowest app and cannot use ``telemetry.sanitize``; this is the
same rule set for the patterns it can see without the live routing table: ``Bearer
<token>``, ``sk-``/``sk-or-`` + 16 or more key characters, ``key=``/``api_key=``/
``token=`` query values and credential headers become ``***``; control characters
go (line breaks and tabs become one space); the result is cut to 1 000 characters.
Keep the two in step (cases: ``tests/providers/test_redact.py``).
"""

from __future__ import annotations

import re

MAX_MESSAGE_CHARS = 1000  # spec 06 §1.4
_PATTERNS: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(r"(?i)\bbearer\s+[A-Za-z0-9._~+/=-]+"), "Bearer ***"),
    (re.compile(r"\bsk-(?:or-)?[A-Za-z0-9_-]{16,}"), "***"),
    (
        re.compile(r"(?i)\b((?:api_)?key|(?:access_|refresh_)?token)=[^&\s\"']+"),
        r"\1=***",
    ),
    (
        re.compile(
            r"(?i)(x[-_]api[-_]key|api[-_]key|authorization|proxy[-_]authorization|cookie)"
            r"(['\"]\s*[:=,]\s*b?['\"])[^'\"]*"
        ),
        r"\1\2***",
    ),
    (
        re.compile(
            r"(?i)(x[-_]api[-_]key|api[-_]key|authorization|proxy[-_]authorization|cookie)"
            r"(['\"]?\s*[:=]\s*['\"]?)(?:(?:basic|bearer|digest|token|negotiate"
            r"|ntlm|hoba|mutual|vapid|scram-sha-\d+|aws4-hmac-sha256)\s+)?"
            r"[^\s'\",};]+(?:;\s*[^\s'\",};]+)*"
        ),
        r"\1\2***",
    ),
)
_BREAKS = re.compile(r"[\t\n\r\x0b\x0c]+")
_CONTROL = re.compile(r"[\x00-\x08\x0e-\x1f\x7f-\x9f]")


def redact(message: object, *, limit: int = MAX_MESSAGE_CHARS) -> str:
    """The message with credentials masked, control characters removed, cut."""
    # Control characters go first: one inside a key would hide it from the masks.
    text = _CONTROL.sub("", _BREAKS.sub(" ", str(message)))
    for pattern, replacement in _PATTERNS:
        text = pattern.sub(replacement, text)
    return text[:limit]
