"""The one sanitiser for stored, published or returned messages (spec 06 §1.4).

Replaces configured provider secrets (in any letter case, and inside base64 text in
any of the three alignments, standard or URL-safe), ``Bearer <token>``, anything
shaped like an API key (``sk-``/``sk-or-`` + 16 or more key characters, any case) and
``key=``/``api_key=``/``token=`` query values (also ``access_token=``/
``refresh_token=``) with ``***``; removes control and zero-width characters (line
breaks and tabs become a space), so a secret split by them is whole again before it
is masked; cuts to 1 000 characters.  Also a logging filter that applies it to every
record.
"""

from __future__ import annotations

import base64
import logging
import re
from collections.abc import Iterable

MAX_MESSAGE_CHARS = 1000
_MIN_SECRET = 4  # shorter values would mask ordinary words
_NAME_AND_SEPARATOR = 2  # header patterns capture the name and the separator
_PATTERNS = (
    re.compile(r"(?i)\bbearer\s+[A-Za-z0-9._~+/=-]+"),
    re.compile(r"(?i)\bsk-(?:or-)?[A-Za-z0-9_-]{16,}"),
    re.compile(r"(?i)\b((?:api_)?key|(?:access_|refresh_)?token)=[^&\s\"']+"),
    # a quoted header value, whole: {'Cookie': 'a=1; b=2'}, (b'x-api-key', b'...')
    re.compile(
        r"(?i)(x[-_]api[-_]key|api[-_]key|authorization|proxy[-_]authorization|cookie)"
        r"(['\"]\s*[:=,]\s*b?['\"])[^'\"]*"
    ),
    re.compile(
        r"(?i)(x[-_]api[-_]key|api[-_]key|authorization|proxy[-_]authorization|cookie)"
        # the value, with its auth scheme when there is one ("Basic <credentials>"),
        # and every further "; name=value" of a cookie list
        r"(['\"]?\s*[:=]\s*['\"]?)(?:(?:basic|bearer|digest|token|negotiate|ntlm"
        r"|hoba|mutual|vapid|scram-sha-\d+|aws4-hmac-sha256)\s+)?"
        r"[^\s'\",};]+(?:;\s*[^\s'\",};]+)*"
    ),
)
#: line breaks and tabs become one space, so the words around them stay apart
_BREAKS = re.compile(r"[\t\n\r\x0b\x0c]+")
#: every other C0/C1 control character (and DEL) is removed, and so are the
#: zero-width and invisible formatting characters (U+200B..U+200F, U+2060..U+2064,
#: U+FEFF, the soft hyphen)
_CONTROL = re.compile(
    "[\x00-\x08\x0e-\x1f\x7f-\x9f\u00ad\u200b-\u200f\u2060-\u2064\ufeff]"
)
#: a base64 fragment shorter than this is not masked (it would match ordinary text)
_MIN_ENCODED = 12
_secrets: re.Pattern[str] | None = None


def encoded_forms(secret: str) -> set[str]:
    """The base64 text that any encoding of data holding ``secret`` contains, for
    each of the three byte alignments, standard and URL-safe alphabets."""
    raw = secret.encode()
    forms: set[str] = set()
    for lead in range(3):
        encoded = base64.b64encode(b"\0" * lead + raw).decode()
        start = (-(-lead // 3)) * 4  # the first group made of secret bytes only
        end = ((lead + len(raw)) // 3) * 4  # the end of the last full group
        fragment = encoded[start:end]
        if len(fragment) >= _MIN_ENCODED:
            forms.add(fragment)
            forms.add(fragment.replace("+", "-").replace("/", "_"))
    return forms


def set_known_secrets(values: Iterable[str | None]) -> None:
    """Provider secrets to mask (refreshed with each routing table): as written in
    any letter case, and their base64 forms."""
    global _secrets
    plain = {v for v in values if v and len(v) >= _MIN_SECRET}
    forms = plain | {form for v in plain for form in encoded_forms(v)}
    if not forms:
        _secrets = None
        return
    ordered = sorted(forms, key=len, reverse=True)  # the longest form wins
    _secrets = re.compile("|".join(map(re.escape, ordered)), re.IGNORECASE)


def _mask(match: re.Match[str]) -> str:
    text = match.group(0)
    if text.lower().startswith("bearer"):
        return "Bearer ***"
    if "=" in text and not text.lower().startswith(
        ("x-api", "api-key", "auth", "proxy", "cookie")
    ):
        return text.split("=", 1)[0] + "=***"
    if match.lastindex and match.lastindex >= _NAME_AND_SEPARATOR:
        return f"{match.group(1)}{match.group(2)}***"
    return "***"


#: the patterns that mask a secret by its shape alone (not by a field name before it)
_SHAPES = _PATTERNS[:2]


def sanitize(
    message: object, *, limit: int = MAX_MESSAGE_CHARS, vetted: bool = False
) -> str:
    """``vetted``: a message the gateway built from fields known to hold no secret
    (an event payload whose ``api_key`` is a key *name*): only provider secrets and
    secret-shaped values are masked, not the values named like credentials."""
    # Control characters go first: one inside a secret would otherwise hide it from
    # the masks below and reassemble it once removed.
    text = _CONTROL.sub("", _BREAKS.sub(" ", str(message)))
    if _secrets is not None:
        text = _secrets.sub("***", text)
    for pattern in _SHAPES if vetted else _PATTERNS:
        text = pattern.sub(_mask, text)
    return text[:limit]


#: ``extra={VETTED: True}`` on a log call whose message holds no secret by
#: construction (see ``sanitize(vetted=True)``)
VETTED = "omniroute_vetted"


class RedactingFilter(logging.Filter):
    """Applies ``sanitize`` to every log record's rendered message, and line by line
    to its traceback and stack (spec 08 §5.4)."""

    def filter(self, record: logging.LogRecord) -> bool:
        try:
            message = record.getMessage()
        except (TypeError, ValueError):
            return True
        vetted = getattr(record, VETTED, False) is True
        record.msg = sanitize(message, limit=10_000, vetted=vetted)
        record.args = None
        if record.exc_info and not record.exc_text:
            # the formatter keeps a cached ``exc_text``: it never renders the raw one
            record.exc_text = _by_line(_FORMATTER.formatException(record.exc_info))
        elif record.exc_text:
            record.exc_text = _by_line(record.exc_text)
        if record.stack_info:
            record.stack_info = _by_line(record.stack_info)
        return True


_FORMATTER = logging.Formatter()


def _by_line(text: str) -> str:
    return "\n".join(sanitize(line, limit=10_000) for line in text.splitlines())


class AccessLogRedactingFilter(logging.Filter):
    """``sanitize`` for uvicorn's access log, whose formatter needs the record's
    ``args`` (client, method, path, version, status): each string is masked in
    place, so a credential in a query string (``?api_key=…``) is never printed."""

    def filter(self, record: logging.LogRecord) -> bool:
        if isinstance(record.args, tuple):
            record.args = tuple(
                sanitize(arg, limit=10_000) if isinstance(arg, str) else arg
                for arg in record.args
            )
        return True
