"""The Embeddings wire: ``POST /v1/embeddings`` (spec 09 §5).

* **Body -> ``ChatRequest``**: the OpenAI embeddings body (``input`` a string, strings,
  token ids or lists of token ids, 1..2048 items; ``encoding_format``,
  ``dimensions``, ``user``) validated with its own names, as an ``embeddings``
  operation: the planner keeps only candidates able to embed (a chat-only model, or
  a dialect without embeddings, is a ``capability_mismatch`` skip) and the upstream
  gets one call per attempt, the batch whole.  ``models`` and ``fallback_models``
  work as on every wire; the pipeline refuses what would pick a model on its own
  (``auto``, smart aliases, composite combos: ``unsupported_for_endpoint``).
* **Result -> bytes**: the embeddings list in input order, ``model`` the served one,
  with the ``omniroute`` report; errors in the OpenAI envelope.  Vectors are
  base64 (little-endian float32) when the client asked ``encoding_format: base64``
  and the upstream answered floats (Gemini, Vertex, Bedrock take no such option);
  ``usage`` is the prompt's estimate when the upstream reported none.
"""

from __future__ import annotations

import base64
import dataclasses
import struct
from collections.abc import Mapping
from typing import Any

from gateway.inbound.base import (
    JSONReply,
    Pipelined,
    Reply,
    bearer_or_api_key,
    openai_error,
)
from gateway.inbound.chat import (
    GATEWAY_FIELDS,
    chat_request,
    json_reply,
    model_sent,
    parse_body,
    positive_int,
)
from gateway.kernel.exchange import ChatRequest, RequestError
from gateway.pipeline.accounting import estimate_prompt_tokens
from gateway.pipeline.result import Answer, Failure, Result

MAX_INPUTS = 2048
_FIELDS = ("model", "input", "encoding_format", "dimensions", "user")


def _invalid(code: str, param: str, message: str) -> RequestError:
    return RequestError(400, code, message, param=param)


def _is_tokens(value: Any) -> bool:
    return (
        isinstance(value, list)
        and bool(value)
        and all(isinstance(t, int) and not isinstance(t, bool) for t in value)
    )


def _check_input(value: Any) -> None:
    if value is None:
        raise _invalid("missing_parameter", "input", "'input' is required")
    if isinstance(value, str):
        if not value:
            raise _invalid("invalid_value", "input", "'input' must not be empty")
        return
    if not isinstance(value, list):
        raise _invalid(
            "invalid_type",
            "input",
            "'input' must be a string, a list of strings or a list of token ids",
        )
    if not 1 <= len(value) <= MAX_INPUTS:
        raise _invalid(
            "invalid_value", "input", f"'input' must hold 1..{MAX_INPUTS} items"
        )
    if _is_tokens(value):
        return
    for index, item in enumerate(value):
        if isinstance(item, str) and item:
            continue
        if _is_tokens(item):
            continue
        raise _invalid(
            "invalid_type",
            f"input[{index}]",
            f"'input[{index}]' must be a non-empty string or a list of token ids",
        )


def _check(body: dict[str, Any]) -> None:
    _check_input(body.get("input"))
    fmt = body.get("encoding_format")
    if fmt is not None and fmt not in ("float", "base64"):
        raise _invalid(
            "invalid_value", "encoding_format", "'encoding_format' is float or base64"
        )
    if body.get("dimensions") is not None:
        body["dimensions"] = positive_int(body["dimensions"], "dimensions")
    user = body.get("user")
    if user is not None and not isinstance(user, str):
        raise _invalid("invalid_type", "user", "'user' must be a string")


def parse_embeddings_request(raw: bytes) -> ChatRequest:
    body = parse_body(raw)
    _check(body)
    kept = {k: body[k] for k in (*GATEWAY_FIELDS, *_FIELDS) if k in body}
    request = chat_request(kept, messages=False)
    return dataclasses.replace(
        request, stream=False, surface="embeddings", operation="embeddings"
    )


def as_base64(vector: list[Any]) -> str:
    """A float vector as OpenAI's ``encoding_format: base64`` gives it: the base64 of
    its little-endian float32 values."""
    return base64.b64encode(struct.pack(f"<{len(vector)}f", *vector)).decode("ascii")


def ordered(
    answer: dict[str, Any], request: ChatRequest | None = None
) -> dict[str, Any]:
    """The embeddings list in input order, with the served model and no ``id``.
    For ``request``: float vectors base64-encoded when it asked ``encoding_format:
    base64`` (an upstream without that option answers floats), and the prompt's
    estimate as ``usage`` when the upstream reported none (the request log's, 06
    §1.3)."""
    data = answer.get("data")
    if isinstance(data, list):
        answer["data"] = sorted(
            data, key=lambda item: item.get("index", 0) if isinstance(item, dict) else 0
        )
        if request is not None and request.body.get("encoding_format") == "base64":
            for item in answer["data"]:
                vector = item.get("embedding") if isinstance(item, dict) else None
                if isinstance(vector, list):
                    item["embedding"] = as_base64(vector)
    usage = answer.get("usage")
    if not isinstance(usage, dict) and request is not None:
        usage = answer["usage"] = {
            "prompt_tokens": estimate_prompt_tokens(request.body)
        }
    if isinstance(usage, dict) and "total_tokens" not in usage:
        usage["total_tokens"] = usage.get("prompt_tokens", 0)
    answer["object"] = "list"
    # OpenAI's embeddings list has no id: the one the pipeline gives every answer
    # (or an upstream's own) is not a field a client of this wire knows
    answer.pop("id", None)
    return answer


class EmbeddingsWire(Pipelined):
    """``/v1/embeddings``: OpenAI embeddings in and out."""

    paths = frozenset({"/v1/embeddings", "/v1/embeddings/"})
    surface = "embeddings"

    def credential(self, headers: Mapping[str, str]) -> str | None:
        return bearer_or_api_key(headers)

    def parse(self, raw: bytes, headers: Mapping[str, str]) -> ChatRequest:
        return parse_embeddings_request(raw)

    def model_sent(self, raw: bytes) -> str:
        return model_sent(raw)

    def error(self, failure: Failure) -> JSONReply:
        return openai_error(failure)

    def render(self, result: Result) -> Reply:
        if isinstance(result, Answer):
            completion = ordered(result.completion, result.request)
            payload = {**completion, "omniroute": result.report}
            return json_reply(result.status, payload, result.headers)
        if isinstance(result, Failure):
            return self.error(result)
        raise AssertionError("an embeddings request never streams")


WIRE = EmbeddingsWire()
