"""What Amazon Bedrock answers, in OpenAI terms (spec 10 §1): a Converse reply, an
embeddings ``invoke`` reply, the model lists and an error reply, and the usage, stop
reason and error mappings a ConverseStream shares with them
(``gateway.dialects.bedrock_stream``).  The ``bedrock`` dialect
(``gateway.dialects.bedrock``) re-exports what it used to define here; its module
doc describes the mappings.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

from gateway.dialects.base import JSON, BadUpstreamResponse
from gateway.kernel.errors import UpstreamError

ERROR_TEXT_MAX_CHARS = 2000
_STOP_REASONS = {
    "end_turn": "stop",
    "stop_sequence": "stop",
    "max_tokens": "length",
    "model_context_window_exceeded": "length",
    "tool_use": "tool_calls",
    "guardrail_intervened": "content_filter",
    "content_filtered": "content_filter",
}
#: a Bedrock exception -> an OpenAI-style error ``type`` (what
#: ``classify_stream_error`` and the logs read)
_ERROR_TYPES = {
    "ThrottlingException": "rate_limit_error",
    "ServiceQuotaExceededException": "rate_limit_error",
    "ModelNotReadyException": "overloaded_error",
    "ServiceUnavailableException": "overloaded_error",
    "InternalServerException": "api_error",
    "ModelStreamErrorException": "api_error",
    "ModelErrorException": "api_error",
    "ModelTimeoutException": "timeout_error",
    "ValidationException": "invalid_request_error",
    "AccessDeniedException": "permission_error",
    "UnrecognizedClientException": "authentication_error",
    "InvalidSignatureException": "authentication_error",
    "IncompleteSignatureException": "authentication_error",
    "MissingAuthenticationTokenException": "authentication_error",
    "ExpiredTokenException": "authentication_error",
    "ResourceNotFoundException": "not_found_error",
}
_MODEL_INVALID = re.compile(r"model identifier is invalid", re.IGNORECASE)


def as_dict(value: Any) -> JSON:
    return value if isinstance(value, dict) else {}


def as_int(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def map_usage(usage: Any) -> JSON:
    """Converse ``usage`` -> OpenAI usage (cache reads and writes inside the prompt)."""
    usage = as_dict(usage)
    read = as_int(usage.get("cacheReadInputTokens"))
    write = as_int(usage.get("cacheWriteInputTokens"))
    prompt = as_int(usage.get("inputTokens")) + read + write
    completion = as_int(usage.get("outputTokens"))
    return {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
        "prompt_tokens_details": {"cached_tokens": read},
        "cache_creation_input_tokens": write,
    }


def map_stop_reason(reason: Any, calls: bool = False) -> str:
    mapped = _STOP_REASONS.get(reason, "stop") if isinstance(reason, str) else "stop"
    return "tool_calls" if calls and mapped == "stop" else mapped


def _tool_call(use: JSON) -> JSON:
    return {
        "id": str(use.get("toolUseId") or ""),
        "type": "function",
        "function": {
            "name": str(use.get("name") or ""),
            "arguments": json.dumps(use.get("input") or {}),
        },
    }


def parse_converse_reply(payload: Any, *, created: int) -> JSON:
    """A ``ConverseResponse`` -> an OpenAI ``chat.completion``."""
    if not isinstance(payload, dict):
        raise BadUpstreamResponse("completion is not a JSON object")
    message = as_dict(as_dict(payload.get("output")).get("message"))
    content = message.get("content")
    if not isinstance(content, list):
        raise BadUpstreamResponse("completion has no output message")
    texts: list[str] = []
    thoughts: list[str] = []
    calls: list[JSON] = []
    for block in content:
        block = as_dict(block)
        if isinstance(block.get("text"), str):
            texts.append(block["text"])
        elif "toolUse" in block:
            calls.append(_tool_call(as_dict(block["toolUse"])))
        elif "reasoningContent" in block:
            reasoning = as_dict(as_dict(block["reasoningContent"]).get("reasoningText"))
            if isinstance(reasoning.get("text"), str):
                thoughts.append(reasoning["text"])
    out_message: JSON = {
        "role": "assistant",
        "content": None if calls and not texts else "".join(texts),
    }
    if calls:
        out_message["tool_calls"] = calls
    if thoughts:
        out_message["reasoning_content"] = "".join(thoughts)
    completion: JSON = {
        "object": "chat.completion",
        "created": created,
        "model": None,
        "choices": [
            {
                "index": 0,
                "message": out_message,
                "finish_reason": map_stop_reason(
                    payload.get("stopReason"), bool(calls)
                ),
            }
        ],
    }
    if isinstance(payload.get("usage"), dict):
        completion["usage"] = map_usage(payload["usage"])
    return completion


#: the reply header where ``invoke`` reports the input's token count (Cohere's
#: body has none; Titan's repeats it as ``inputTextTokenCount``)
INPUT_TOKENS_HEADER = "x-amzn-bedrock-input-token-count"


def _input_tokens(payload: JSON, headers: Mapping[str, str] | None) -> int:
    """The input token count: Titan's ``inputTextTokenCount``, else the reply's
    ``X-Amzn-Bedrock-Input-Token-Count`` header; 0 when neither gives one."""
    tokens = as_int(payload.get("inputTextTokenCount"))
    if tokens:
        return tokens
    raw = _header(headers, INPUT_TOKENS_HEADER)
    try:
        counted = int(raw.strip()) if raw is not None else 0
    except ValueError:
        return 0
    return max(counted, 0)


def parse_embed_reply(payload: Any, headers: Mapping[str, str] | None = None) -> JSON:
    """A Titan (``embedding``) or Cohere (``embeddings``) invoke reply -> the OpenAI
    embeddings list; ``headers``: the reply's, for the token count (module doc)."""
    payload = as_dict(payload)
    vectors: Any
    if isinstance(payload.get("embedding"), list):
        vectors = [payload["embedding"]]
    else:
        vectors = payload.get("embeddings")
        if isinstance(vectors, dict):  # Cohere with embedding_types
            vectors = vectors.get("float")
    if not isinstance(vectors, list) or not vectors:
        raise BadUpstreamResponse("embeddings reply has no embeddings")
    data = []
    for index, vector in enumerate(vectors):
        if not isinstance(vector, list):
            raise BadUpstreamResponse(f"embeddings reply item {index} is not a vector")
        data.append({"object": "embedding", "index": index, "embedding": vector})
    out: JSON = {"object": "list", "data": data}
    tokens = _input_tokens(payload, headers)
    if tokens:
        out["usage"] = {"prompt_tokens": tokens, "total_tokens": tokens}
    return out


def model_ids(payload: Any) -> list[str]:
    """The ids of a ``ListFoundationModels`` reply (the models invocable on demand)
    or a ``ListInferenceProfiles`` reply (the active profiles)."""
    payload = as_dict(payload)
    if isinstance(payload.get("modelSummaries"), list):
        found = []
        for item in payload["modelSummaries"]:
            item = as_dict(item)
            kinds = item.get("inferenceTypesSupported")
            if isinstance(kinds, list) and "ON_DEMAND" not in kinds:
                continue  # reachable through an inference profile only
            if isinstance(item.get("modelId"), str):
                found.append(item["modelId"])
        return found
    if isinstance(payload.get("inferenceProfileSummaries"), list):
        return [
            item["inferenceProfileId"]
            for item in map(as_dict, payload["inferenceProfileSummaries"])
            if isinstance(item.get("inferenceProfileId"), str)
            and item.get("status", "ACTIVE") == "ACTIVE"
        ]
    raise BadUpstreamResponse("model list has no modelSummaries")


def _header(headers: Mapping[str, str] | None, name: str) -> str | None:
    if not headers:
        return None
    value = headers.get(name)
    if value is None:
        value = next((v for k, v in headers.items() if k.lower() == name), None)
    return value


def exception_name(raw: Any) -> str | None:
    """``ThrottlingException`` from ``ThrottlingException:http://…``,
    ``com.amazon.coral.service#UnrecognizedClientException`` or a stream's
    ``throttlingException``."""
    if not isinstance(raw, str) or not raw:
        return None
    name = raw.split(":", 1)[0].rsplit("#", 1)[-1].strip()
    return name[:1].upper() + name[1:] if name else None


def error_of(name: str | None, message: str) -> UpstreamError:
    code = name
    if name == "ValidationException" and _MODEL_INVALID.search(message):
        code = "model_not_found"
    return UpstreamError(message=message, code=code, type=_ERROR_TYPES.get(name or ""))


def error_from_reply(
    payload: Any, text: str, headers: Mapping[str, str] | None = None
) -> UpstreamError:
    body = as_dict(payload)
    name = exception_name(_header(headers, "x-amzn-errortype")) or exception_name(
        body.get("__type")
    )
    message = body.get("message", body.get("Message"))
    if not isinstance(message, str) or not message:
        message = text[:ERROR_TEXT_MAX_CHARS]
    return error_of(name, message)
