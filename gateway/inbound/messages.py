"""The Messages wire: ``POST /v1/messages`` (spec 09 §4), what Claude Code and the
anthropic SDK speak.

* **Body -> ``ChatRequest``**: the Anthropic request is validated with its own names
  in ``param`` (``max_tokens`` is required) and translated into the canonical chat
  body: ``system`` (and ``system`` entries inside ``messages``, at their turn) as
  system messages, text / image / document blocks as parts, ``tool_use`` as tool
  calls, ``tool_result`` as tool messages, client tools as functions, ``tool_choice``,
  ``stop_sequences``, ``metadata.user_id`` (the session too, 09 §2.4).  What the
  canonical form cannot carry (server tools, thinking blocks, a ``cache_control``
  on a tool, a tool result or a document) is left out and named in
  ``X-OmniRoute-Dropped``.  What only some dialects take rides in the canonical
  body and is left out (and named) per attempt elsewhere (``Carried``):
  ``thinking`` as ``reasoning_effort`` (models that reason) and its exact budget as
  ``thinking_budget`` (Gemini and Vertex's Gemini only, never named), ``top_k``
  (Anthropic, Bedrock, Gemini, Vertex), a text or image block's ``cache_control``
  on its part (Anthropic, Bedrock's ``cachePoint``), a tool result's ``is_error``
  (Anthropic, Bedrock's ``status: error``; the text starts with ``Error:`` for
  every dialect).  The gateway's own body
  fields (``models``, ``fallback_models``, ``redundancy``, ``session_id``) work as on
  every wire.
* **Result -> bytes**: a ``message`` object with its ``omniroute`` report, the
  Anthropic error envelope with the gateway's codes (09 §4.4), and streams as named
  events (``message_start`` … ``message_stop``) with the report on ``message_delta``;
  a stream that ends badly ends with ``event: error``.
"""

from __future__ import annotations

import dataclasses
import time
import uuid
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

import orjson
from django.conf import settings

from gateway.dialects import RAW
from gateway.inbound.base import (
    JSON_CONTENT_TYPE,
    JSONReply,
    Pipelined,
    Reply,
    StreamReply,
    bearer_or_api_key,
    client_paths,
    with_retry_after,
)
from gateway.inbound.chat import (
    chat_request,
    check_name,
    model_sent,
    parse_body,
    positive_int,
)
from gateway.kernel.chain import ChainError, build_chain
from gateway.kernel.exchange import Carried, ChatRequest, RequestError
from gateway.kernel.facts import input_tokens
from gateway.kernel.text import text_of
from gateway.kernel.types import KeyPolicy
from gateway.pipeline.context import ChatContext
from gateway.pipeline.counting import count_upstream
from gateway.pipeline.handle import chain_entries
from gateway.pipeline.report import refusal
from gateway.pipeline.result import (
    Answer,
    Failure,
    Result,
    Streamed,
    StreamEnd,
    omniroute_headers,
)
from telemetry.sanitize import sanitize

#: how much of a streamed text is kept to find the stop sequence it ended at
_TAIL_CHARS = 256
#: the gateway's own body fields, as on the chat wire
_GATEWAY_FIELDS = ("models", "fallback_models", "redundancy", "session_id")
_STOP_REASONS = {
    "stop": "end_turn",
    "length": "max_tokens",
    "tool_calls": "tool_use",
    "function_call": "tool_use",
    "content_filter": "refusal",
}
#: spec 09 §4.4: the error ``type`` of the Anthropic envelope
_ERROR_TYPES = {
    "invalid_request_error": "invalid_request_error",
    "authentication_error": "authentication_error",
    "permission_error": "permission_error",
    "not_found_error": "not_found_error",
    "rate_limit_error": "rate_limit_error",
    "budget_error": "billing_error",
    "upstream_error": "api_error",
    "api_error": "api_error",
}
_TOOL_CHOICES = {"auto": "auto", "any": "required", "none": "none"}
SSE_HEADERS = (
    (b"content-type", b"text/event-stream; charset=utf-8"),
    (b"cache-control", b"no-cache"),
    (b"x-accel-buffering", b"no"),
)


def _invalid(code: str, param: str | None, message: str) -> RequestError:
    return RequestError(400, code, message, param=param)


# --- body -> canonical ----------------------------------------------------------------


class _Translation:
    """One Messages body into a chat body, remembering what it left out."""

    def __init__(self) -> None:
        self.dropped: list[str] = []
        #: what goes only to the dialects that take it (09 §2.6)
        self.carried: list[Carried] = []
        #: each image or document part made, and the client's path of its block
        self.sources: list[tuple[dict[str, Any], str]] = []

    def system(self, value: Any) -> dict[str, Any] | None:
        if value is None:
            return None
        if isinstance(value, str):
            return {"role": "system", "content": value}
        if not isinstance(value, list):
            raise _invalid(
                "invalid_type", "system", "'system' must be a string or text blocks"
            )
        parts = [
            self._text_part(block, f"system[{i}]") for i, block in enumerate(value)
        ]
        return {"role": "system", "content": [p for p in parts if p is not None]}

    def _text_part(self, block: Any, path: str) -> dict[str, Any] | None:
        if not isinstance(block, dict) or block.get("type") != "text":
            self.dropped.append(path)
            return None
        text = block.get("text")
        if not isinstance(text, str):
            raise _invalid(
                "invalid_type", f"{path}.text", f"'{path}.text' must be a string"
            )
        return self.marked({"type": "text", "text": text}, block, path)

    def marked(
        self, part: dict[str, Any], block: dict[str, Any], path: str
    ) -> dict[str, Any]:
        """``part`` with the block's ``cache_control`` marker, which goes only to a
        dialect that caches by it (``CACHE_CONTROL``) and is named elsewhere."""
        marker = block.get("cache_control")
        if marker is None:
            return part
        if not isinstance(marker, dict):
            self.dropped.append(f"{path}.cache_control")
            return part
        self.carried.append(
            Carried(
                f"{path}.cache_control",
                "cache_control",
                dialects=CACHE_CONTROL,
                nested=True,
            )
        )
        return {**part, "cache_control": marker}

    def marker(self, block: dict[str, Any], path: str) -> None:
        """A ``cache_control`` marker where the chat form has no part to hold it (a
        tool, a tool result, a document): named (09 §2.6)."""
        if "cache_control" in block:
            self.dropped.append(f"{path}.cache_control")

    def messages(self, value: Any) -> list[dict[str, Any]]:
        if value is None:
            raise _invalid("missing_parameter", "messages", "'messages' is required")
        if not isinstance(value, list):
            raise _invalid("invalid_type", "messages", "'messages' must be a list")
        if not value:
            raise _invalid("invalid_value", "messages", "'messages' must not be empty")
        out: list[dict[str, Any]] = []
        for index, message in enumerate(value):
            path = f"messages[{index}]"
            if not isinstance(message, dict):
                raise _invalid("invalid_type", path, f"'{path}' must be an object")
            role = message.get("role")
            if role not in ("user", "assistant", "system"):
                raise _invalid(
                    "invalid_value",
                    f"{path}.role",
                    f"'{path}.role' must be 'user' or 'assistant'",
                )
            out += self._message(role, message.get("content"), path)
        return out

    def _message(self, role: str, content: Any, path: str) -> list[dict[str, Any]]:
        if isinstance(content, str):
            return [{"role": role, "content": content}]
        if not isinstance(content, list):
            raise _invalid(
                "invalid_type",
                f"{path}.content",
                f"'{path}.content' must be a string or a list of blocks",
            )
        if role == "assistant":
            return [self._assistant(content, path)]
        if role == "system":
            parts = [
                self._text_part(b, f"{path}.content[{i}]")
                for i, b in enumerate(content)
            ]
            return [{"role": "system", "content": [p for p in parts if p is not None]}]
        return self._user(content, path)

    def _assistant(self, content: list[Any], path: str) -> dict[str, Any]:
        texts: list[str] = []
        calls: list[dict[str, Any]] = []
        for index, block in enumerate(content):
            where = f"{path}.content[{index}]"
            kind = block.get("type") if isinstance(block, dict) else None
            if kind == "text" and isinstance(block.get("text"), str):
                texts.append(block["text"])
            elif kind == "tool_use":
                check_name(block, "id", where)
                check_name(block, "name", where)
                if block.get("input") is not None and not isinstance(
                    block["input"], dict
                ):
                    param = f"{where}.input"
                    raise _invalid(
                        "invalid_type", param, f"'{param}' must be an object"
                    )
                calls.append(
                    {
                        "id": str(block.get("id") or f"toolu_{index}"),
                        "type": "function",
                        "function": {
                            "name": str(block.get("name") or ""),
                            "arguments": orjson.dumps(
                                block.get("input") or {}
                            ).decode(),
                        },
                    }
                )
            elif kind in ("thinking", "redacted_thinking"):
                continue  # reasoning carries no user content (09 §2.6: silently)
            else:
                self.dropped.append(where)
        message: dict[str, Any] = {
            "role": "assistant",
            "content": "\n\n".join(texts) if texts else None,
        }
        if calls:
            message["tool_calls"] = calls
        return message

    def _user(self, content: list[Any], path: str) -> list[dict[str, Any]]:
        results: list[dict[str, Any]] = []
        parts: list[dict[str, Any]] = []
        for index, block in enumerate(content):
            where = f"{path}.content[{index}]"
            kind = block.get("type") if isinstance(block, dict) else None
            if kind == "tool_result":
                results.append(self._tool_result(block, where))
            elif kind == "text":
                part = self._text_part(block, where)
                if part is not None:
                    parts.append(part)
            elif kind == "image":
                parts += self._source(block, where, "image")
            elif kind == "document":
                parts += self._source(block, where, "document")
            else:
                self.dropped.append(where)
        out = list(results)
        if parts:
            out.append({"role": "user", "content": parts})
        return out

    def _tool_result(self, block: dict[str, Any], path: str) -> dict[str, Any]:
        self.marker(block, path)
        _tool_use_id(block, path)
        content = block.get("content")
        text = content if isinstance(content, str) else text_of(content, "\n\n")
        message: dict[str, Any] = {
            "role": "tool",
            "tool_call_id": str(block.get("tool_use_id") or ""),
            "content": text,
        }
        if block.get("is_error") is True:
            # the text says it for every dialect; the flag, for those with a
            # status of their own (IS_ERROR)
            message["content"] = f"{ERROR_PREFIX}{text}" if text else "Error"
            message["is_error"] = True
            if not any(c.field == "is_error" for c in self.carried):
                self.carried.append(IS_ERROR_CARRIED)
        return message

    def _source(self, block: dict[str, Any], path: str, kind: str) -> list[Any]:
        source = block.get("source")
        if not isinstance(source, dict):
            raise _invalid(
                "invalid_type", f"{path}.source", f"'{path}.source' is required"
            )
        media = str(source.get("media_type") or "")
        if source.get("type") == "base64" and isinstance(source.get("data"), str):
            url = f"data:{media};base64,{source['data']}"
        elif source.get("type") == "url" and isinstance(source.get("url"), str):
            url = source["url"]
        elif source.get("type") == "text" and isinstance(source.get("data"), str):
            return [self.marked({"type": "text", "text": source["data"]}, block, path)]
        else:
            self.dropped.append(path)
            return []
        part: dict[str, Any]
        if kind == "image":
            part = {"type": "image_url", "image_url": {"url": url}}
            part = self.marked(part, block, path)
        elif url.startswith("data:"):
            self.marker(block, path)
            part = {"type": "file", "file": {"file_data": url}}
        else:
            self.marker(block, path)
            self.dropped.append(path)  # a document by URL: no chat counterpart
            return []
        self.sources.append((part, path))
        return [part]

    def tools(self, value: Any) -> list[dict[str, Any]] | None:
        if value is None:
            return None
        if not isinstance(value, list):
            raise _invalid("invalid_type", "tools", "'tools' must be a list")
        found = []
        for index, tool in enumerate(value):
            if not isinstance(tool, dict):
                raise _invalid(
                    "invalid_type",
                    f"tools[{index}]",
                    f"'tools[{index}]' must be an object",
                )
            if tool.get("type") not in (None, "custom") or "input_schema" not in tool:
                self.dropped.append(f"tools[{index}]")  # a server tool
                continue
            check_name(tool, "name", f"tools[{index}]")
            if not isinstance(tool["input_schema"], dict):
                param = f"tools[{index}].input_schema"
                raise _invalid("invalid_type", param, f"'{param}' must be an object")
            self.marker(tool, f"tools[{index}]")
            function: dict[str, Any] = {
                "name": str(tool.get("name") or ""),
                "parameters": tool.get("input_schema") or {"type": "object"},
            }
            if isinstance(tool.get("description"), str):
                function["description"] = tool["description"]
            found.append({"type": "function", "function": function})
        return found

    def tool_choice(self, value: Any, body: dict[str, Any]) -> None:
        if not isinstance(value, dict):
            return
        kind = value.get("type")
        if kind in _TOOL_CHOICES:
            body["tool_choice"] = _TOOL_CHOICES[kind]
        elif kind == "tool" and isinstance(value.get("name"), str):
            body["tool_choice"] = {
                "type": "function",
                "function": {"name": value["name"]},
            }
        if value.get("disable_parallel_tool_use") is True:
            body["parallel_tool_calls"] = False


def _tool_use_id(block: dict[str, Any], path: str) -> None:
    """A ``tool_result``'s ``tool_use_id``: what ties it to its call everywhere."""
    value = block.get("tool_use_id")
    param = f"{path}.tool_use_id"
    if value is None or value == "":
        raise _invalid("missing_parameter", param, f"'{param}' is required")
    if not isinstance(value, str):
        raise _invalid("invalid_type", param, f"'{param}' must be a string")


#: ``thinking.type`` as Anthropic defines it (Claude Code sends ``adaptive``)
_THINKING_TYPES = ("enabled", "disabled", "adaptive")


def _check_thinking(thinking: Any) -> None:
    """``thinking``: an object of a known ``type``, its ``budget_tokens`` (when
    sent) a positive integer."""
    if thinking is None:
        return
    if not isinstance(thinking, dict):
        raise _invalid("invalid_type", "thinking", "'thinking' must be an object")
    kind = thinking.get("type")
    if kind not in _THINKING_TYPES:
        code = "missing_parameter" if kind is None else "invalid_value"
        raise _invalid(
            code,
            "thinking.type",
            "'thinking.type' must be enabled, disabled or adaptive",
        )
    if thinking.get("budget_tokens") is not None:
        positive_int(thinking["budget_tokens"], "thinking.budget_tokens")


def _max_tokens(body: dict[str, Any]) -> int | None:
    value = body.get("max_tokens")
    if value is None:
        raise _invalid("missing_parameter", "max_tokens", "'max_tokens' is required")
    return _max_tokens_value(value)


def _max_tokens_value(value: Any) -> int:
    return positive_int(value, "max_tokens")


def to_chat(
    body: dict[str, Any], *, counting: bool = False
) -> tuple[dict[str, Any], list[str], Mapping[str, str], list[Carried]]:
    """The canonical chat body of a Messages body, the paths it left out, the
    client's names of canonical paths (``ChatRequest.renamed``), and what it
    carries only to some dialects (``cache_control`` markers, ``top_k``,
    ``is_error``).  ``counting``: a ``count_tokens`` body, which has no
    ``max_tokens``."""
    t = _Translation()
    chat: dict[str, Any] = {
        k: body[k] for k in (*_GATEWAY_FIELDS, "model") if k in body
    }
    messages = t.messages(body.get("messages"))
    _check_thinking(body.get("thinking"))
    if not messages:  # every block was of a kind the canonical form cannot hold
        path = t.dropped[0] if t.dropped else "messages"
        raise _invalid(
            "invalid_value", path, f"'{path}' is not a content block this gateway reads"
        )
    system = t.system(body.get("system"))
    chat["messages"] = [system, *messages] if system is not None else messages
    if not counting:
        chat["max_tokens"] = _max_tokens(body)
    elif body.get("max_tokens") is not None:
        chat["max_tokens"] = _max_tokens_value(body["max_tokens"])
    for name in ("temperature", "top_p", "top_k", "stream"):
        if name in body:
            chat[name] = body[name]
    stops = body.get("stop_sequences")
    if stops is not None:
        if not isinstance(stops, list) or not all(isinstance(s, str) for s in stops):
            raise _invalid(
                "invalid_type", "stop_sequences", "'stop_sequences' must be strings"
            )
        chat["stop"] = stops
    tools = t.tools(body.get("tools"))
    if tools:
        chat["tools"] = tools
        t.tool_choice(body.get("tool_choice"), chat)
    metadata = body.get("metadata")
    if isinstance(metadata, dict) and isinstance(metadata.get("user_id"), str):
        chat["user"] = metadata["user_id"]
    _thinking(chat, body.get("thinking"))
    if "top_k" in chat:
        t.carried.append(TOP_K)
    t.dropped += [name for name in _NOT_CARRIED if name in body]
    t.dropped += [name for name in body if name not in _KNOWN]
    renamed = client_paths(NAMES, chat["messages"], t.sources)
    return chat, t.dropped, renamed, t.carried


#: Messages fields a translation cannot carry (named when sent, 09 §2.6)
_NOT_CARRIED = (
    "container",
    "mcp_servers",
    "context_management",
    "output_config",
    "service_tier",
)
#: every field of a Messages body (spec 09 §4.1); others are unknown and named
_KNOWN = frozenset(
    {
        *_GATEWAY_FIELDS,
        *_NOT_CARRIED,
        "top_k",
        "model",
        "max_tokens",
        "messages",
        "system",
        "stop_sequences",
        "temperature",
        "top_p",
        "tools",
        "tool_choice",
        "thinking",
        "metadata",
        "stream",
    }
)
#: the dialects (``kind/wire``) a translated attempt carries a Messages
#: ``cache_control`` marker to (Bedrock as a ``cachePoint``); elsewhere it is named
CACHE_CONTROL = frozenset({"anthropic/chat", "bedrock/chat", "vertex/messages"})
#: the dialects that take ``top_k`` (Bedrock in ``additionalModelRequestFields``,
#: Gemini's and Vertex's ``topK``); OpenAI's API refuses it
TOP_K = Carried(
    "top_k",
    "top_k",
    dialects=frozenset(
        {
            "anthropic/chat",
            "bedrock/chat",
            "gemini/chat",
            "vertex/chat",
            "vertex/messages",
        }
    ),
)
#: a tool result's ``is_error`` goes as a flag only where the dialect has a status
#: for it (Bedrock's ``toolResult.status``, Anthropic's ``is_error``); the text's
#: ``Error:`` prefix says it everywhere, so it is never named
ERROR_PREFIX = "Error: "
IS_ERROR_CARRIED = Carried(
    "",
    "is_error",
    dialects=frozenset({"anthropic/chat", "bedrock/chat", "vertex/messages"}),
    nested=True,
)
#: ``thinking.budget_tokens`` below each bound -> that ``reasoning_effort``
_EFFORT_BUDGETS = ((4096, "low"), (16384, "medium"))
#: the canonical request carries ``thinking`` as an effort, to a model that reasons
THINKING = Carried("thinking", "reasoning_effort")
#: and its exact budget (``thinking_budget``) to the dialects that take one as it is
#: (Gemini's ``thinkingBudget``); the others get the effort alone, and the field is
#: never named (it only refines the effort, or says thinking is off)
THINKING_BUDGET = Carried(
    "",
    "thinking_budget",
    dialects=frozenset({"gemini/chat", "vertex/chat"}),
)
#: ``thinking_budget`` of ``{"type": "adaptive"}``: the model decides (Gemini's -1)
ADAPTIVE_BUDGET = -1


def thinking_effort(thinking: Any) -> str | None:
    """The ``reasoning_effort`` of a ``thinking`` setting (None: no thinking)."""
    if not isinstance(thinking, dict) or thinking.get("type") == "disabled":
        return None
    budget = thinking.get("budget_tokens")
    if thinking.get("type") != "enabled" or not isinstance(budget, int):
        return "medium"  # "adaptive", or enabled without a budget
    for bound, effort in _EFFORT_BUDGETS:
        if budget < bound:
            return effort
    return "high"


def _thinking(chat: dict[str, Any], thinking: Any) -> None:
    """``thinking`` in the canonical body: as an effort, carried to a model that
    reasons (09 §2.6), and as its exact budget, for Gemini's ``thinkingBudget``."""
    effort = thinking_effort(thinking)
    if effort is not None:
        chat["reasoning_effort"] = effort
    budget = thinking_budget(thinking)
    if budget is not None:
        chat[THINKING_BUDGET.field] = budget


def thinking_budget(thinking: Any) -> int | None:
    """The exact budget of a ``thinking`` setting: ``budget_tokens`` when enabled
    with a positive one, 0 when disabled, ``ADAPTIVE_BUDGET`` when adaptive; None
    when it names none (the effort alone says it)."""
    if not isinstance(thinking, dict):
        return None
    kind = thinking.get("type")
    if kind == "disabled":
        return 0
    if kind == "adaptive":
        return ADAPTIVE_BUDGET
    budget = thinking.get("budget_tokens")
    if kind != "enabled" or not isinstance(budget, int) or isinstance(budget, bool):
        return None
    return budget if budget > 0 else None


#: canonical fields this wire spells otherwise: how a path a translated attempt
#: leaves out is named to the client (09 §2.6)
NAMES = MappingProxyType(
    {
        "stop": "stop_sequences",
        "parallel_tool_calls": "tool_choice.disable_parallel_tool_use",
        "reasoning_effort": "thinking",
        "user": "metadata.user_id",
    }
)

#: the client's headers an Anthropic upstream gets on a passthrough (spec 09 §2.5)
FORWARDED = ("anthropic-version", "anthropic-beta")


def parse_messages_request(
    raw: bytes, headers: Mapping[str, str], *, counting: bool = False
) -> ChatRequest:
    body = parse_body(raw)
    chat, dropped, renamed, carried = to_chat(body, counting=counting)
    metadata = body.get("metadata")
    session = {"metadata": metadata} if isinstance(metadata, dict) else None
    request = chat_request(chat, session)
    own = {k: v for k, v in body.items() if k not in _GATEWAY_FIELDS}
    return dataclasses.replace(
        request,
        dropped=tuple(dropped),
        conditional=(
            *carried,
            *((THINKING,) if "reasoning_effort" in chat else ()),
            *((THINKING_BUDGET,) if THINKING_BUDGET.field in chat else ()),
        ),
        renamed=renamed,
        surface="messages",
        original=own,
        forward=tuple((h, headers[h]) for h in FORWARDED if h in headers),
    )


# --- canonical -> bytes ---------------------------------------------------------------


def anthropic_usage(usage: Mapping[str, Any] | None) -> dict[str, int]:
    """Canonical (OpenAI-shaped) usage in Anthropic's terms: ``input_tokens`` without
    the cache reads and writes, which are counted beside it."""
    usage = usage or {}
    prompt = _int(usage.get("prompt_tokens"))
    details = usage.get("prompt_tokens_details")
    read = _int(details.get("cached_tokens")) if isinstance(details, dict) else 0
    written = _int(usage.get("cache_creation_input_tokens"))
    return {
        "input_tokens": max(0, prompt - read - written),
        "output_tokens": _int(usage.get("completion_tokens")),
        "cache_creation_input_tokens": written,
        "cache_read_input_tokens": read,
    }


class MessagesPassthrough:
    """The upstream's own Anthropic events, relayed as received (spec 09 §2.5): only
    ``message_start``'s model becomes the served one, and the report rides on
    ``message_delta``, held with ``message_stop`` until the stream ends."""

    __slots__ = ("held",)

    def __init__(self) -> None:
        self.held: list[tuple[str, dict[str, Any]]] = []

    def chunks(self, chunks: list[dict[str, Any]]) -> bytes:
        out = b""
        for chunk in chunks:
            found = chunk.get(RAW)
            if found is None:
                continue  # a canonical chunk: what accounting reads
            name, data = found
            if name == "message_start" and isinstance(data.get("message"), dict):
                data["message"]["model"] = chunk.get("model")
            if name in ("message_delta", "message_stop"):
                self.held.append((name, data))
                continue
            out += _event(str(name), data)
        return out

    def end(self, end: StreamEnd) -> bytes:
        if end.error is not None:
            message = str(end.error.get("message") or "Upstream stream interrupted")
            return _event(
                "error",
                {
                    "type": "error",
                    "error": {"type": "api_error", "message": message},
                    "omniroute": end.report,
                },
            )
        out = b""
        delivered = False
        for name, data in self.held:
            if name == "message_delta":
                data["omniroute"] = end.report
                delivered = True
            out += _event(name, data)
        if not delivered:  # an upstream that sent none: the report still comes
            delta = {"type": "message_delta", "delta": {}, "omniroute": end.report}
            out = _event("message_delta", delta) + out
        return out


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _int(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def _message_id(completion_id: Any) -> str:
    text = str(completion_id or "")
    if text.startswith("chatcmpl-"):
        text = text[len("chatcmpl-") :]
    return f"msg_{text or uuid.uuid4().hex}"


def _arguments(text: Any) -> Any:
    if not isinstance(text, str) or not text.strip():
        return {}
    try:
        value = orjson.loads(text)
    except orjson.JSONDecodeError:
        return {}
    return value if isinstance(value, dict) else {}


def stop_sequences(request: ChatRequest | None) -> tuple[str, ...]:
    """The request's stop sequences (``stop`` in the canonical body)."""
    stops = request.body.get("stop") if request is not None else None
    if isinstance(stops, str):
        return (stops,)
    return tuple(s for s in stops or () if isinstance(s, str) and s)


def stopped_at(text: str, stops: tuple[str, ...]) -> str | None:
    """The stop sequence ``text`` ends at, if any (a translated ``stop`` finish
    that met one is Anthropic's ``stop_sequence``, 09 §4.2)."""
    return next((s for s in stops if text.endswith(s)), None)


def message_of(
    completion: dict[str, Any], stops: tuple[str, ...] = ()
) -> dict[str, Any]:
    """A ``chat.completion`` as an Anthropic ``message`` object (09 §4.2)."""
    choices = completion.get("choices") or [{}]
    choice = _dict(choices[0])
    message = _dict(choice.get("message"))
    content: list[dict[str, Any]] = []
    reasoning = message.get("reasoning_content") or message.get("reasoning")
    if isinstance(reasoning, str) and reasoning:
        content.append({"type": "thinking", "thinking": reasoning, "signature": ""})
    text = text_of(message.get("content"))
    calls = message.get("tool_calls") or []
    if text or not calls:
        content.append({"type": "text", "text": text})
    for call in calls:
        function = call.get("function") or {}
        content.append(
            {
                "type": "tool_use",
                "id": str(call.get("id") or ""),
                "name": str(function.get("name") or ""),
                "input": _arguments(function.get("arguments")),
            }
        )
    finish = choice.get("finish_reason")
    stop = _STOP_REASONS.get(finish, "end_turn") if finish else "end_turn"
    sequence = stopped_at(text, stops) if finish == "stop" else None
    return {
        "id": _message_id(completion.get("id")),
        "type": "message",
        "role": "assistant",
        "model": completion.get("model"),
        "content": content,
        "stop_reason": "stop_sequence" if sequence is not None else stop,
        "stop_sequence": sequence,
        "usage": anthropic_usage(completion.get("usage")),
    }


def overloaded(failure: Failure) -> bool:
    """``no_healthy_candidate`` as Anthropic's 529 ``overloaded_error``, when the
    operator asked for it (``OMNIROUTE_MESSAGES_OVERLOADED_529``, spec 09 §4.4)."""
    return failure.code == "no_healthy_candidate" and bool(
        settings.OMNIROUTE_MESSAGES_OVERLOADED_529
    )


def anthropic_error(failure: Failure) -> dict[str, Any]:
    """The Anthropic error envelope with the gateway's ``code`` and ``param``."""
    if failure.status == 413:  # noqa: PLR2004
        kind = "request_too_large"
    elif overloaded(failure):
        kind = "overloaded_error"
    else:
        kind = _ERROR_TYPES.get(failure.error_type, "api_error")
    error: dict[str, Any] = {
        "type": kind,
        "message": sanitize(failure.message, limit=10_000),
        "code": failure.code,
        "param": failure.param,
    }
    if failure.attempts is not None:
        error["attempts"] = failure.attempts
    return {"type": "error", "error": error}


def _event(name: str, data: dict[str, Any]) -> bytes:
    return b"event: " + name.encode() + b"\ndata: " + orjson.dumps(data) + b"\n\n"


class MessagesStream:
    """Canonical chat chunks as Anthropic stream events (spec 09 §4.2).

    ``message_start`` goes out with the first chunk (the stream has committed by
    then); text, reasoning and tool calls each open a content block, closed when the
    next one opens or the stream ends; the stop reason and usage arrive with the
    upstream's last chunks and go out on ``message_delta`` with the report.
    """

    __slots__ = (
        "args",
        "block",
        "calls",
        "index",
        "started",
        "stop",
        "stops",
        "tail",
        "usage",
    )

    def __init__(self, stops: tuple[str, ...] = ()) -> None:
        self.started = False
        #: the request's stop sequences, and the end of the text sent so far
        self.stops = stops
        self.tail = ""
        #: the open block's kind ("text", "thinking", "tool_use") and its index
        self.block: str | None = None
        self.index = -1
        #: tool call index -> its block index; block index -> arguments sent
        self.calls: dict[int, int] = {}
        self.args: dict[int, bool] = {}
        self.stop: str | None = None
        self.usage: dict[str, Any] | None = None

    def _start(self, chunk: dict[str, Any]) -> bytes:
        self.started = True
        message: dict[str, Any] = {
            "id": _message_id(chunk.get("id")),
            "type": "message",
            "role": "assistant",
            "model": chunk.get("model"),
            "content": [],
            "stop_reason": None,
            "stop_sequence": None,
            "usage": {"input_tokens": 0, "output_tokens": 0},
        }
        return _event("message_start", {"type": "message_start", "message": message})

    def _close(self) -> bytes:
        if self.block is None:
            return b""
        out = b""
        if self.block == "tool_use" and not self.args.get(self.index):
            out += self._delta({"type": "input_json_delta", "partial_json": "{}"})
        self.block = None
        return out + _event(
            "content_block_stop", {"type": "content_block_stop", "index": self.index}
        )

    def _open(self, kind: str, block: dict[str, Any]) -> bytes:
        out = self._close()
        self.index += 1
        self.block = kind
        return out + _event(
            "content_block_start",
            {
                "type": "content_block_start",
                "index": self.index,
                "content_block": block,
            },
        )

    def _delta(self, delta: dict[str, Any]) -> bytes:
        return _event(
            "content_block_delta",
            {"type": "content_block_delta", "index": self.index, "delta": delta},
        )

    def _text(self, kind: str, text: str) -> bytes:
        out = b""
        if self.block != kind:
            empty = {"type": "text", "text": ""}
            if kind == "thinking":
                empty = {"type": "thinking", "thinking": "", "signature": ""}
            out = self._open(kind, empty)
        field = "text_delta" if kind == "text" else "thinking_delta"
        return out + self._delta({"type": field, kind: text})

    def _tool(self, call: dict[str, Any]) -> bytes:
        out = b""
        position = call.get("index", 0)
        function = _dict(call.get("function"))
        if position not in self.calls:
            block = {
                "type": "tool_use",
                "id": str(call.get("id") or f"toolu_{position}"),
                "name": str(function.get("name") or ""),
                "input": {},
            }
            out += self._open("tool_use", block)
            self.calls[position] = self.index
        arguments = function.get("arguments")
        if isinstance(arguments, str) and arguments:
            if self.calls[position] != self.index:  # a late fragment of an earlier call
                return out
            self.args[self.index] = True
            out += self._delta({"type": "input_json_delta", "partial_json": arguments})
        return out

    def chunks(self, chunks: list[dict[str, Any]]) -> bytes:
        out = b""
        for chunk in chunks:
            if not self.started:
                out += self._start(chunk)
            usage = chunk.get("usage")
            if isinstance(usage, dict):
                self.usage = usage
            for choice in chunk.get("choices") or ():
                if not isinstance(choice, dict) or choice.get("index", 0) != 0:
                    continue  # one answer: the first choice
                delta = _dict(choice.get("delta"))
                reasoning = delta.get("reasoning_content") or delta.get("reasoning")
                if isinstance(reasoning, str) and reasoning:
                    out += self._text("thinking", reasoning)
                if isinstance(delta.get("content"), str) and delta["content"]:
                    out += self._text("text", delta["content"])
                    if self.stops:
                        self.tail = (self.tail + delta["content"])[-_TAIL_CHARS:]
                for call in delta.get("tool_calls") or ():
                    if isinstance(call, dict):
                        out += self._tool(call)
                finish = choice.get("finish_reason")
                if finish:
                    self.stop = _STOP_REASONS.get(finish, "end_turn")
        return out

    def end(self, end: StreamEnd) -> bytes:
        out = (
            b""
            if self.started
            else self._start({"id": end.chunk_id, "model": end.model})
        )
        out += self._close()
        if end.error is not None:
            message = str(end.error.get("message") or "Upstream stream interrupted")
            return out + _event(
                "error",
                {
                    "type": "error",
                    "error": {"type": "api_error", "message": message},
                    "omniroute": end.report,
                },
            )
        usage = anthropic_usage(end.usage or self.usage)
        stop, sequence = self.stop or "end_turn", None
        if stop == "end_turn" and self.stops:
            sequence = stopped_at(self.tail, self.stops)
            stop = "stop_sequence" if sequence is not None else stop
        delta = {
            "type": "message_delta",
            "delta": {"stop_reason": stop, "stop_sequence": sequence},
            "usage": usage,
            "omniroute": end.report,
        }
        return (
            out
            + _event("message_delta", delta)
            + _event("message_stop", {"type": "message_stop"})
        )


class MessagesWire(Pipelined):
    """``/v1/messages``: Anthropic Messages in and out."""

    paths = frozenset({"/v1/messages", "/v1/messages/"})
    surface = "messages"

    def credential(self, headers: Mapping[str, str]) -> str | None:
        return bearer_or_api_key(headers)

    def parse(self, raw: bytes, headers: Mapping[str, str]) -> ChatRequest:
        return parse_messages_request(raw, headers)

    def model_sent(self, raw: bytes) -> str:
        return model_sent(raw)

    def error(self, failure: Failure) -> JSONReply:
        return JSONReply(
            status=529 if overloaded(failure) else failure.status,
            body=orjson.dumps(anthropic_error(failure)),
            headers=[JSON_CONTENT_TYPE, *with_retry_after(failure)],
        )

    def render(self, result: Result) -> Reply:
        if isinstance(result, Answer):
            served = result.completion.get("model")
            if result.raw is not None:  # the upstream's own message (09 §2.5)
                payload = {**result.raw, "model": served, "omniroute": result.report}
            else:
                message = message_of(result.completion, stop_sequences(result.request))
                payload = {**message, "omniroute": result.report}
            headers = [JSON_CONTENT_TYPE, *result.headers]
            return JSONReply(
                status=result.status, body=orjson.dumps(payload), headers=headers
            )
        if isinstance(result, Failure):
            return self.error(result)
        return self._stream(result)

    def _stream(self, streamed: Streamed) -> StreamReply:
        return StreamReply(
            headers=[*SSE_HEADERS, *streamed.headers],
            body=streamed.relay.frames(
                MessagesPassthrough()
                if streamed.passthrough
                else MessagesStream(stop_sequences(streamed.request))
            ),
            status=streamed.status,
        )


class CountTokensWire(MessagesWire):
    """``/v1/messages/count_tokens`` (spec 09 §4.5): the prompt's input tokens, from
    the first candidate whose upstream counts tokens itself (an Anthropic-kind one
    by passthrough, a Gemini one by ``:countTokens``; the next on a failover
    trigger), else counted here with the
    estimator of the context-window checks (``X-OmniRoute-Token-Count:
    estimated``); the model must resolve for the key as on ``/v1/messages``.  Not
    billed, no limit consumed."""

    paths = frozenset({"/v1/messages/count_tokens", "/v1/messages/count_tokens/"})
    surface = "count_tokens"

    def parse(self, raw: bytes, headers: Mapping[str, str]) -> ChatRequest:
        return parse_messages_request(raw, headers, counting=True)

    async def serve(self, raw: bytes, ctx: ChatContext, key: KeyPolicy) -> Reply:
        rec = ctx.start_run(key)
        try:
            request = self.parse(raw, ctx.headers)
            rec.requested_model = request.entries[0].model
            chosen = chain_entries(ctx.table, key, request, ctx.headers, rec)
            chain = build_chain(
                ctx.table, key, chosen.entries, explicit=True, warnings=[]
            )
        except (RequestError, ChainError) as exc:
            if not rec.requested_model:
                rec.requested_model = model_sent(raw)
            return self.error(refusal(ctx, exc, rec))
        rec.route = "chain" if len(chain) > 1 else chain[0].resolved.route
        counted = await count_upstream(ctx.table, chain, request, rec)
        calls = len(rec.attempts)
        headers = [JSON_CONTENT_TYPE]
        if counted is not None:  # an upstream counted it (09 §4.5)
            rec.succeed(counted.target, 200, calls, len(chain) > 1)
            count = counted.input_tokens
            served: str | None = counted.target.model_key
        else:
            rec.attempt_count, rec.failover = calls, len(chain) > 1
            count = input_tokens(request.body.get("messages"))
            served = None
            headers.append((b"x-omniroute-token-count", b"estimated"))
        headers += omniroute_headers(
            served_model=served,
            attempts=calls,
            route=rec.route,
            overhead_ms=rec.overhead_ms(),
        )
        rec.finished_at = time.time()
        ctx.record(rec)
        return JSONReply(
            status=200, body=orjson.dumps({"input_tokens": count}), headers=headers
        )


WIRE = MessagesWire()
COUNT_TOKENS = CountTokensWire()
