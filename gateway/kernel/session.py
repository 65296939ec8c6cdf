"""The session id of a request (spec 05 §1.1-1.2) and its scoped key ``S`` (03 §3).

Pure: the caller passes the lower-cased request headers, the parsed body, the API
key's id and the requested model.  First match wins: a session header, then a body
field, then (when auto-detection is on) a hash of the conversation anchor.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

SESSION_HEADERS = (
    "x-session-id",
    "x-claude-code-session-id",
    "session-id",
    "session_id",
    "x-litellm-session-id",
    "helicone-session-id",
    "agent-session-id",
)
#: headers that must never be a session source (the id is written to the log)
CREDENTIAL_HEADERS = frozenset(
    {"authorization", "proxy-authorization", "x-api-key", "api-key", "cookie"}
)
MAX_ID_LENGTH = 200
ANCHOR_MESSAGES = 8
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
_SESSION_UUID = re.compile(
    r"_session_([0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})$",
    re.IGNORECASE,
)


@dataclass(frozen=True, slots=True)
class Session:
    id: str
    #: ``header:<name>``, ``body:<field path>`` or ``auto``
    source: str


def clean(value: Any) -> str | None:
    """The trimmed value, or None when empty, too long or holding a control char."""
    if not isinstance(value, str):
        return None
    text = value.strip()
    if not text or len(text) > MAX_ID_LENGTH or _CONTROL.search(text):
        return None
    return text


def _from_user_id(value: Any) -> str | None:
    if not isinstance(value, str):
        return None
    try:
        parsed = json.loads(value)
    except ValueError:
        parsed = None
    if isinstance(parsed, dict) and isinstance(parsed.get("session_id"), str):
        return clean(parsed["session_id"])
    match = _SESSION_UUID.search(value.strip())
    if match is not None:
        return str(match.group(1))
    return clean(value)


def _without_cache_control(value: Any) -> Any:
    if isinstance(value, dict):
        return {
            k: _without_cache_control(v)
            for k, v in value.items()
            if k != "cache_control"
        }
    if isinstance(value, list):
        return [_without_cache_control(v) for v in value]
    return value


def auto_id(
    key_id: int | str, model: str | None, body: Mapping[str, Any]
) -> str | None:
    """``auto-`` + 32 hex of the anchor hash; None without a user message in the
    first eight messages."""
    messages = body.get("messages")
    if not isinstance(messages, list):
        return None
    prefix = []
    for message in messages[:ANCHOR_MESSAGES]:
        if not isinstance(message, dict):
            return None
        prefix.append({"role": message.get("role"), "content": message.get("content")})
        if message.get("role") == "user":
            break
    else:
        return None
    tools = body.get("tools")
    anchor = _without_cache_control(
        {
            "k": key_id,
            "m": model,
            "t": tools if tools is not None else None,
            "p": prefix,
        }
    )
    data = json.dumps(
        anchor, sort_keys=True, separators=(",", ":"), ensure_ascii=False
    ).encode()
    return "auto-" + hashlib.sha256(data).hexdigest()[:32]


def derive(
    headers: Mapping[str, str],
    body: Mapping[str, Any],
    *,
    key_id: int | str,
    model: str | None,
    extra_headers: Sequence[str] = (),
    auto_detect: bool = True,
) -> Session | None:
    """Spec 05 §1.1: the first valid source wins; None when there is none."""
    for name in (*SESSION_HEADERS, *(h.lower() for h in extra_headers)):
        if name in CREDENTIAL_HEADERS:
            continue
        value = clean(headers.get(name))
        if value is not None:
            source = "session-id" if name == "session_id" else name
            return Session(value, f"header:{source}")
    metadata = body.get("metadata")
    if isinstance(metadata, dict):
        value = _from_user_id(metadata.get("user_id"))
        if value is not None:
            return Session(value, "body:metadata.user_id")
    # spec 09 §2.4: after these, the first response of a previous_response_id chain
    for name in (
        "session_id",
        "litellm_session_id",
        "prompt_cache_key",
        "previous_response_id",
    ):
        value = clean(body.get(name))
        if value is not None:
            return Session(value, f"body:{name}")
    if auto_detect:
        found = auto_id(key_id, model, body)
        if found is not None:
            return Session(found, "auto")
    return None


def scoped_key(key_id: int | str, session_id: str) -> str:
    """``S``: 32 hex of SHA-256(api key id + NUL + session id) (spec 03 §3)."""
    return hashlib.sha256(f"{key_id}\x00{session_id}".encode()).hexdigest()[:32]
