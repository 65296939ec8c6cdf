"""Keys derived from a request body (spec 03 §3, §4.2).

* ``input_tokens(messages)`` is ``R_in``: ``ceil(T / 4) + 1000 × I``, where ``I`` counts
  the non-text parts (``image_url``, ``input_image``, ``input_audio``, ``file``) and
  ``T`` is the length of ``json.dumps(messages without those parts,
  ensure_ascii=False)``, so base64 payloads never count as text.
* ``needed_tokens(body)`` is ``R``: ``R_in`` plus ``max_completion_tokens`` or
  ``max_tokens``.
* ``needs(body)`` lists the capabilities the request requires, in the order the
  filters check them, each with the request field it comes from: ``tools`` (non-empty
  ``tools``), ``vision`` (an image part), ``json`` (``response_format.type`` of
  ``json_object``/``json_schema``).
"""

from __future__ import annotations

import hashlib
import json
import math
from dataclasses import dataclass
from typing import Any

from gateway.kernel.text import text_of

NON_TEXT_PARTS = frozenset({"image_url", "input_image", "input_audio", "file"})
IMAGE_PARTS = frozenset({"image_url", "input_image"})
TOKENS_PER_NON_TEXT_PART = 1000
CHARS_PER_TOKEN = 4


@dataclass(frozen=True, slots=True)
class Need:
    capability: str
    param: str


def _split(messages: Any) -> tuple[list[Any], int, bool]:
    stripped: list[Any] = []
    non_text = 0
    has_image = False
    for message in messages if isinstance(messages, list) else []:
        content = message.get("content") if isinstance(message, dict) else None
        if isinstance(content, list):
            kept = []
            for part in content:
                kind = part.get("type") if isinstance(part, dict) else None
                if kind in NON_TEXT_PARTS:
                    non_text += 1
                    has_image = has_image or kind in IMAGE_PARTS
                else:
                    kept.append(part)
            message = {**message, "content": kept}
        stripped.append(message)
    return stripped, non_text, has_image


def input_tokens(messages: Any) -> int:
    stripped, non_text, _ = _split(messages)
    text = len(json.dumps(stripped, ensure_ascii=False))
    return math.ceil(text / CHARS_PER_TOKEN) + TOKENS_PER_NON_TEXT_PART * non_text


def needed_tokens(body: dict[str, Any]) -> int:
    reserve = body.get("max_completion_tokens") or body.get("max_tokens") or 0
    if isinstance(reserve, bool) or not isinstance(reserve, int | float):
        reserve = 0
    return input_tokens(body.get("messages")) + int(reserve)


#: needs the dialect meets or not, whatever the model declares (checked right
#: before the call, ``gateway.pipeline.filters``)
DIALECT_NEEDS = frozenset({"token_ids"})


def token_ids(value: Any) -> bool:
    """An embeddings ``input`` given as token ids: a list of integers, or a list
    of such lists."""
    if not isinstance(value, list) or not value:
        return False
    first = value[0]
    return (isinstance(first, int) and not isinstance(first, bool)) or (
        isinstance(first, list) and bool(first) and isinstance(first[0], int)
    )


def needs(body: dict[str, Any]) -> tuple[Need, ...]:
    if "messages" not in body and "input" in body:  # an embeddings body (09 §5.2)
        if token_ids(body["input"]):
            return (Need("embeddings", "model"), Need("token_ids", "input"))
        return (Need("embeddings", "model"),)
    found: list[Need] = []
    if isinstance(body.get("tools"), list) and body["tools"]:
        found.append(Need("tools", "tools"))
    if _split(body.get("messages"))[2]:
        found.append(Need("vision", "messages"))
    response_format = body.get("response_format")
    if isinstance(response_format, dict) and response_format.get("type") in (
        "json_object",
        "json_schema",
    ):
        found.append(Need("json", "response_format"))
    return tuple(found)


CACHE_KEY_MAX_CHARS = 1024
FINGERPRINT_HEX_CHARS = 32


def cache_key(body: dict[str, Any]) -> str | None:
    """``K`` (spec 03 §3): ``prompt_cache_key``, else 32 hex of fingerprint ``F``."""
    sent = body.get("prompt_cache_key")
    if isinstance(sent, str) and 1 <= len(sent.strip()) <= CACHE_KEY_MAX_CHARS:
        return sent.strip()
    messages = body.get("messages")
    if not isinstance(messages, list):
        return None
    system: list[str] = []
    index = 0
    while index < len(messages):
        message = messages[index]
        if not isinstance(message, dict) or message.get("role") not in (
            "system",
            "developer",
        ):
            break
        system.append(text_of(message.get("content")))
        index += 1
    user = next(
        (
            text_of(m.get("content"))
            for m in messages
            if isinstance(m, dict) and m.get("role") == "user"
        ),
        "",
    )
    if not user:
        return None
    digest = hashlib.sha256(
        ("\n".join(system) + "\x00" + user).encode("utf-8")
    ).hexdigest()
    return digest[:FINGERPRINT_HEX_CHARS]
