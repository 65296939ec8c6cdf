"""The Responses wire: ``POST /v1/responses`` (spec 09 §3), what Codex, the openai
SDK's ``responses.*`` and openai-agents speak.

* **Body -> ``ChatRequest``**: the Responses request is validated with its own names
  in ``param`` (``input`` is required) and translated into the canonical chat body:
  ``instructions`` as the system message, message items (``developer`` as system),
  ``function_call`` / ``custom_tool_call`` items as an assistant turn's tool calls,
  their outputs as tool messages, ``function`` and ``custom`` tools as functions (a
  custom tool takes one string ``input``), ``text.format`` as ``response_format``,
  ``reasoning.effort``, ``max_output_tokens``.  What the canonical form cannot carry
  (built-in tools, ``namespace`` tools, unknown fields, ``text.verbosity``) is left
  out and named in ``X-OmniRoute-Dropped``; ``reasoning`` items are dropped silently.
* **Stored responses** (§3.4): a ``previous_response_id`` is read before the
  pipeline runs and its conversation goes before this request's input; an answered
  response with ``store`` true is written before the client gets the final event or
  the JSON answer (``gateway.inbound.stored``).  Upstream calls never store.
* **Result -> bytes**: the ``response`` object with the ``omniroute`` report, the
  OpenAI error envelope, and streams as typed events with a ``sequence_number``,
  ending with exactly one of ``response.completed`` / ``.incomplete`` / ``.failed``
  (whose ``response`` carries the report); no ``[DONE]``.  A passthrough (an upstream
  of this wire, spec 09 §2.5) relays the upstream's own response or events.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import time
from collections.abc import AsyncIterator, Mapping
from types import MappingProxyType
from typing import Any

import orjson

from gateway.dialects import RAW
from gateway.dialects.anthropic_thinking import (
    decode_blocks,
    encode_blocks,
    signed_blocks,
)
from gateway.inbound.base import (
    JSON_CONTENT_TYPE,
    SSE_HEADERS,
    JSONReply,
    Reply,
    StreamReply,
    bearer_or_api_key,
    client_paths,
    openai_error,
)
from gateway.inbound.chat import (
    GATEWAY_FIELDS,
    chat_request,
    check_arguments,
    check_effort,
    check_name,
    model_sent,
    parse_body,
    positive_int,
)
from gateway.inbound.stored import Stored
from gateway.inbound.stored import load as load_stored
from gateway.inbound.stored import save as save_stored
from gateway.kernel.exchange import Carried, ChatRequest, RequestError
from gateway.kernel.text import text_of
from gateway.kernel.types import KeyPolicy
from gateway.pipeline.context import ChatContext
from gateway.pipeline.handle import handle
from gateway.pipeline.result import Answer, Failure, Result, Streamed, StreamEnd

#: the fields of spec 09 §3.1 this wire reads or echoes; any other top-level field
#: goes upstream on a passthrough only
_KNOWN = frozenset(
    {
        "model",
        "input",
        "instructions",
        "tools",
        "tool_choice",
        "parallel_tool_calls",
        "max_output_tokens",
        "temperature",
        "top_p",
        "reasoning",
        "text",
        "stream",
        "stream_options",
        "store",
        "previous_response_id",
        "include",
        "metadata",
        "user",
        "prompt_cache_key",
        "safety_identifier",
        "service_tier",
        "truncation",
        "client_metadata",
        "background",
        "conversation",
        *GATEWAY_FIELDS,
    }
)
_TOOL_CHOICES = ("auto", "none", "required")
_CALLS = ("function_call", "custom_tool_call")
_OUTPUTS = ("function_call_output", "custom_tool_call_output")
_ROLES = {"user": "user", "assistant": "assistant", "system": "system"}
_ROLES["developer"] = "system"
_TEXT_PARTS = ("input_text", "output_text", "text", "summary_text")
#: a custom tool's one argument, as a function's parameters
_CUSTOM_PARAMETERS = {
    "type": "object",
    "properties": {"input": {"type": "string", "description": "The tool's input"}},
    "required": ["input"],
    "additionalProperties": False,
}
_INCOMPLETE = {"length": "max_output_tokens", "content_filter": "content_filter"}


def _invalid(code: str, param: str | None, message: str) -> RequestError:
    return RequestError(400, code, message, param=param)


def _number(body: dict[str, Any], name: str, low: float, high: float) -> None:
    value = body.get(name)
    if value is None:
        return
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise _invalid("invalid_type", name, f"'{name}' must be a number")
    if not low <= value <= high:
        raise _invalid("invalid_value", name, f"'{name}' must be in {low}..{high}")


def _validate(body: dict[str, Any]) -> None:
    """Spec 09 §2.3 and §3.1: this wire's own fields, with their own names."""
    for name in ("background", "conversation"):
        if body.get(name) not in (None, False):
            raise _invalid(
                "unsupported_parameter",
                name,
                f"'{name}' is not supported by this gateway",
            )
    if "input" not in body or body["input"] is None:
        raise _invalid("missing_parameter", "input", "'input' is required")
    if not isinstance(body["input"], str | list):
        raise _invalid(
            "invalid_type", "input", "'input' must be a string or a list of items"
        )
    if body.get("max_output_tokens") is not None:
        body["max_output_tokens"] = positive_int(
            body["max_output_tokens"], "max_output_tokens"
        )
    _number(body, "temperature", 0, 2)
    _number(body, "top_p", 0, 1)
    for name, kind in (
        ("stream", bool),
        ("store", bool),
        ("parallel_tool_calls", bool),
        ("instructions", str),
        ("previous_response_id", str),
        ("tools", list),
        ("text", dict),
        ("reasoning", dict),
        ("metadata", dict),
    ):
        value = body.get(name)
        if value is not None and not isinstance(value, kind):
            label = {bool: "a boolean", str: "a string", list: "a list"}.get(
                kind, "an object"
            )
            raise _invalid("invalid_type", name, f"'{name}' must be {label}")
    reasoning = body.get("reasoning")
    if reasoning is not None and reasoning.get("effort") is not None:
        check_effort(reasoning["effort"], "reasoning.effort")


def _call_id(item: dict[str, Any], path: str) -> None:
    """A tool output's ``call_id``: what ties it to its call on every upstream."""
    value = item.get("call_id")
    if value is None or value == "":
        raise _invalid(
            "missing_parameter", f"{path}.call_id", f"'{path}.call_id' is required"
        )
    if not isinstance(value, str):
        raise _invalid(
            "invalid_type", f"{path}.call_id", f"'{path}.call_id' must be a string"
        )


def _check_call(item: dict[str, Any], kind: str, path: str) -> None:
    """A call item of the request's own input: its ``call_id`` and ``name`` (every
    upstream refuses a call without them), a function call's ``arguments``."""
    check_name(item, "call_id", path)
    check_name(item, "name", path)
    if kind == "function_call":
        check_arguments(item, path)


# --- body -> canonical ----------------------------------------------------------------


def input_items(value: str | list[Any]) -> list[Any]:
    """``input`` as a list of items in their full form, as stored and listed: a
    string is one user message, a message's string content one text part."""
    if isinstance(value, str):
        value = [{"role": "user", "content": value}]
    return [_full(item) for item in value]


def _full(item: Any) -> Any:
    if not isinstance(item, dict) or item.get("type", "message") != "message":
        return item
    if "role" not in item:
        return item
    content = item.get("content")
    if isinstance(content, str):
        kind = "output_text" if item.get("role") == "assistant" else "input_text"
        content = [{"type": kind, "text": content}]
    return {**item, "type": "message", "content": content}


class _Translation:
    """Responses items and tools as a chat body, remembering what was left out."""

    def __init__(self) -> None:
        self.dropped: list[str] = []
        #: the custom tools' names: their calls come back as ``custom_tool_call``
        self.custom: set[str] = set()
        #: each image or file part made of this request's own input, and the
        #: client's path of its part
        self.sources: list[tuple[dict[str, Any], str]] = []
        self._own = False

    def items(self, items: list[Any], prefix: str | None) -> list[dict[str, Any]]:
        """``prefix``: the field the items' paths start with (None: the stored
        conversation, whose drops nobody named)."""
        out: list[dict[str, Any]] = []
        self._own = prefix is not None
        #: signed thinking of a reasoning item, for the assistant turn after it
        thought: list[dict[str, Any]] = []
        for index, item in enumerate(items):
            path = f"{prefix or 'input'}[{index}]"
            if not isinstance(item, dict):
                raise _invalid("invalid_type", path, f"'{path}' must be an object")
            kind = item.get("type") or ("message" if "role" in item else None)
            if kind == "message":
                message = self._message(item, path)
                if message is not None:
                    out.append(message)
            elif kind in _CALLS:
                if prefix is not None:
                    _check_call(item, kind, path)
                self._call(out, item, kind, path)
            elif kind in _OUTPUTS:
                if prefix is not None:
                    _call_id(item, path)
                out.append(self._output(item))
            elif kind == "reasoning":
                # no user content (09 §2.6: dropped silently), but the signed
                # thinking the gateway gave it goes back to its turn
                thought += decode_blocks(item.get("encrypted_content"))
                continue
            elif prefix is not None:
                self.dropped.append(path)
            if thought and out and out[-1].get("role") == "assistant":
                out[-1].setdefault("thinking_blocks", []).extend(thought)
                thought = []
        return out

    def _message(self, item: dict[str, Any], path: str) -> dict[str, Any] | None:
        role = _ROLES.get(item.get("role"))  # type: ignore[arg-type]
        if role is None:
            raise _invalid(
                "invalid_value",
                f"{path}.role",
                f"'{path}.role' must be user, assistant, system or developer",
            )
        content = item.get("content")
        if isinstance(content, str):
            return {"role": role, "content": content}
        if not isinstance(content, list):
            raise _invalid(
                "invalid_type",
                f"{path}.content",
                f"'{path}.content' must be a string or a list of parts",
            )
        parts: list[dict[str, Any]] = []
        for index, part in enumerate(content):
            parts += self._part(part, f"{path}.content[{index}]")
        if role != "user" or all(p["type"] == "text" for p in parts):
            # the widest-supported shape of a turn without media: one string
            return {"role": role, "content": text_of(parts, "\n\n")}
        return {"role": role, "content": parts}

    def _part(self, part: Any, path: str) -> list[dict[str, Any]]:
        if not isinstance(part, dict):
            raise _invalid("invalid_type", path, f"'{path}' must be an object")
        kind = part.get("type")
        if kind in _TEXT_PARTS or kind == "refusal":
            text = part.get("refusal") if kind == "refusal" else part.get("text")
            if not isinstance(text, str):
                raise _invalid(
                    "invalid_type", f"{path}.text", f"'{path}.text' must be a string"
                )
            return [{"type": "text", "text": text}]
        if kind == "input_image" and isinstance(part.get("image_url"), str):
            image: dict[str, Any] = {"url": part["image_url"]}
            if part.get("detail") in ("low", "high", "auto"):
                image["detail"] = part["detail"]
            return self._sourced({"type": "image_url", "image_url": image}, path)
        if kind == "input_file":
            file = {
                k: part[k]
                for k in ("file_data", "file_id", "filename")
                if isinstance(part.get(k), str)
            }
            if "file_data" in file or "file_id" in file:
                return self._sourced({"type": "file", "file": file}, path)
        self.dropped.append(path)
        return []

    def _sourced(self, part: dict[str, Any], path: str) -> list[dict[str, Any]]:
        if self._own:
            self.sources.append((part, path))
        return [part]

    def _call(
        self, out: list[dict[str, Any]], item: dict[str, Any], kind: str, path: str
    ) -> None:
        if kind == "custom_tool_call":
            arguments = orjson.dumps({"input": str(item.get("input") or "")}).decode()
        else:
            raw = item.get("arguments")
            arguments = raw if isinstance(raw, str) and raw else "{}"
        call = {
            "id": str(item.get("call_id") or item.get("id") or ""),
            "type": "function",
            "function": {"name": str(item.get("name") or ""), "arguments": arguments},
        }
        if self._own and kind == "function_call":
            self.sources.append((call, path))  # its arguments, in the client's terms
        last = out[-1] if out else None
        if last is not None and last["role"] == "assistant":
            last.setdefault("tool_calls", []).append(call)
            return
        out.append({"role": "assistant", "content": None, "tool_calls": [call]})

    def _output(self, item: dict[str, Any]) -> dict[str, Any]:
        output = item.get("output")
        text = output if isinstance(output, str) else text_of(output, "\n\n")
        return {
            "role": "tool",
            "tool_call_id": str(item.get("call_id") or ""),
            "content": text,
        }

    def tools(self, value: list[Any] | None) -> list[dict[str, Any]]:
        found: list[dict[str, Any]] = []
        for index, tool in enumerate(value or ()):
            path = f"tools[{index}]"
            if not isinstance(tool, dict):
                raise _invalid("invalid_type", path, f"'{path}' must be an object")
            kind = tool.get("type")
            name = tool.get("name")
            if kind not in ("function", "custom"):
                self.dropped.append(path)  # a built-in or namespace tool
                continue
            if not isinstance(name, str) or not name:
                raise _invalid(
                    "missing_parameter", f"{path}.name", f"'{path}.name' is required"
                )
            function: dict[str, Any] = {"name": name}
            description = tool.get("description")
            if kind == "custom":
                self.custom.add(name)
                function["description"] = _custom_description(tool)
                function["parameters"] = _CUSTOM_PARAMETERS
            else:
                if isinstance(description, str):
                    function["description"] = description
                parameters = tool.get("parameters")
                function["parameters"] = (
                    parameters
                    if isinstance(parameters, dict)
                    else {"type": "object", "properties": {}}
                )
                if isinstance(tool.get("strict"), bool):
                    function["strict"] = tool["strict"]
            found.append({"type": "function", "function": function})
        return found

    def tool_choice(self, value: Any, chat: dict[str, Any]) -> None:
        if value is None:
            return
        if value in _TOOL_CHOICES:
            chat["tool_choice"] = value
        elif (
            isinstance(value, dict)
            and value.get("type") in ("function", "custom")
            and isinstance(value.get("name"), str)
        ):
            chat["tool_choice"] = {
                "type": "function",
                "function": {"name": value["name"]},
            }
        else:
            self.dropped.append("tool_choice")

    def text(self, value: dict[str, Any] | None, chat: dict[str, Any]) -> None:
        if not value:
            return
        fmt = value.get("format")
        kind = fmt.get("type") if isinstance(fmt, dict) else None
        if kind == "json_object":
            chat["response_format"] = {"type": "json_object"}
        elif kind == "json_schema" and isinstance(fmt, dict):
            schema = {
                k: fmt[k]
                for k in ("name", "schema", "strict", "description")
                if k in fmt
            }
            chat["response_format"] = {"type": "json_schema", "json_schema": schema}
        elif kind not in (None, "text"):
            self.dropped.append("text.format")
        if value.get("verbosity") is not None:
            self.dropped.append("text.verbosity")


def _custom_description(tool: dict[str, Any]) -> str:
    text = str(tool.get("description") or "")
    fmt = tool.get("format")
    if isinstance(fmt, dict) and fmt.get("type") == "grammar":
        definition = str(fmt.get("definition") or "")
        syntax = str(fmt.get("syntax") or "")
        text += (
            f"\n\nThe input is free-form text in this {syntax} grammar:\n{definition}"
        )
    return (
        text + "\n\nPass the whole free-form input as the string argument 'input'."
    ).strip()


def to_chat(
    body: dict[str, Any], context: list[Any]
) -> tuple[dict[str, Any], list[str], set[str], Mapping[str, str]]:
    """The canonical chat body of a Responses body after the stored ``context``; the
    paths it left out; the custom tools' names; the client's names of canonical
    paths (``ChatRequest.renamed``)."""
    t = _Translation()
    chat: dict[str, Any] = {k: body[k] for k in (*GATEWAY_FIELDS, "model") if k in body}
    messages = t.items(context, None) + t.items(input_items(body["input"]), "input")
    instructions = body.get("instructions")
    if isinstance(instructions, str) and instructions:
        messages.insert(0, {"role": "system", "content": instructions})
    if not messages:
        raise _invalid("invalid_value", "input", "'input' holds no message")
    chat["messages"] = messages
    if body.get("max_output_tokens") is not None:
        chat["max_tokens"] = body["max_output_tokens"]
    for name in ("temperature", "top_p", "stream", "user"):
        if body.get(name) is not None:
            chat[name] = body[name]
    tools = t.tools(body.get("tools"))
    if tools:
        chat["tools"] = tools
        t.tool_choice(body.get("tool_choice"), chat)
        if body.get("parallel_tool_calls") is not None:
            chat["parallel_tool_calls"] = body["parallel_tool_calls"]
    t.text(body.get("text"), chat)
    reasoning = body.get("reasoning")
    if isinstance(reasoning, dict) and isinstance(reasoning.get("effort"), str):
        chat["reasoning_effort"] = reasoning["effort"]
    t.dropped += [name for name in body if name not in _KNOWN]
    renamed = client_paths(NAMES, messages, t.sources)
    return chat, t.dropped, t.custom, renamed


@dataclasses.dataclass(slots=True)
class Exchange:
    """One Responses request as the wire keeps it while the pipeline runs."""

    response_id: str
    #: the API key whose response this is (stored responses are scoped to it)
    key_id: int | None = None
    body: dict[str, Any] | None = None
    previous: Stored | None = None
    previous_missing: bool = False
    custom: frozenset[str] = frozenset()
    #: this request's own input items, and the conversation before them
    own_input: list[Any] = dataclasses.field(default_factory=list)
    context: list[Any] = dataclasses.field(default_factory=list)
    #: the final response object (without the report) once the answer is known
    final: dict[str, Any] | None = None

    @property
    def store(self) -> bool:
        return self.body is None or self.body.get("store") is not False

    @property
    def root_id(self) -> str:
        return self.previous.root_id if self.previous is not None else self.response_id


def parse_responses_request(raw: bytes, ex: Exchange) -> ChatRequest:
    body = ex.body if ex.body is not None else parse_body(raw)
    ex.body = body
    _validate(body)
    if ex.previous_missing:
        raise RequestError(
            404,
            "response_not_found",
            f"No stored response '{body.get('previous_response_id')}' for this key",
            param="previous_response_id",
            error_type="not_found_error",
        )
    ex.context = ex.previous.conversation() if ex.previous is not None else []
    ex.own_input = input_items(body["input"])
    chat, dropped, custom, renamed = to_chat(body, ex.context)
    ex.custom = frozenset(custom)
    session: dict[str, Any] = {}
    if isinstance(body.get("prompt_cache_key"), str):
        session["prompt_cache_key"] = body["prompt_cache_key"]
    if ex.previous is not None:  # 09 §2.4: the chain's first response
        session["previous_response_id"] = ex.previous.root_id
    request = chat_request(chat, session)
    own = {
        k: v
        for k, v in body.items()
        if k not in GATEWAY_FIELDS and k != "previous_response_id"
    }
    if ex.context:  # a conversation goes upstream whole (09 §3.4)
        own["input"] = [*ex.context, *ex.own_input]
    own["store"] = False  # 09 §3.4: upstream calls never store
    return dataclasses.replace(
        request,
        dropped=tuple(dropped),
        conditional=(EFFORT,) if "reasoning_effort" in chat else (),
        renamed=renamed,
        surface="responses",
        original=own,
    )


#: ``reasoning.effort``, carried to a model that reasons (09 §2.6)
EFFORT = Carried("reasoning.effort", "reasoning_effort")
#: canonical fields this wire spells otherwise: how a path a translated attempt
#: leaves out is named to the client (09 §2.6)
NAMES = MappingProxyType(
    {
        "response_format": "text.format",
        "reasoning_effort": "reasoning.effort",
        "max_tokens": "max_output_tokens",
    }
)


# --- canonical -> bytes ---------------------------------------------------------------


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _int(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def responses_usage(usage: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """Canonical (OpenAI chat) usage in the Responses shape."""
    if not usage:
        return None
    prompt = _int(usage.get("prompt_tokens"))
    completion = _int(usage.get("completion_tokens"))
    cached = _int(_dict(usage.get("prompt_tokens_details")).get("cached_tokens"))
    details = _dict(usage.get("completion_tokens_details"))
    total = _int(usage.get("total_tokens")) or prompt + completion
    return {
        "input_tokens": prompt,
        "input_tokens_details": {"cached_tokens": cached},
        "output_tokens": completion,
        "output_tokens_details": {
            "reasoning_tokens": _int(details.get("reasoning_tokens"))
        },
        "total_tokens": total,
    }


def _item_id(prefix: str, response_id: str, index: int) -> str:
    return f"{prefix}_{response_id.removeprefix('resp_')}{index:02d}"


def _arguments(text: Any) -> str:
    return text if isinstance(text, str) and text.strip() else "{}"


def _custom_input(arguments: str) -> str:
    try:
        value = orjson.loads(arguments)
    except orjson.JSONDecodeError:
        return arguments
    if isinstance(value, dict) and isinstance(value.get("input"), str):
        return str(value["input"])
    return arguments


def _call_item(
    call: dict[str, Any], ex: Exchange, index: int, *, done: bool = True
) -> dict[str, Any]:
    function = _dict(call.get("function"))
    name = str(function.get("name") or "")
    call_id = str(call.get("id") or _item_id("call", ex.response_id, index))
    arguments = _arguments(function.get("arguments")) if done else ""
    if name in ex.custom:
        return {
            "type": "custom_tool_call",
            "id": _item_id("ctc", ex.response_id, index),
            "status": "completed" if done else "in_progress",
            "call_id": call_id,
            "name": name,
            "input": _custom_input(arguments) if done else "",
        }
    return {
        "type": "function_call",
        "id": _item_id("fc", ex.response_id, index),
        "status": "completed" if done else "in_progress",
        "call_id": call_id,
        "name": name,
        "arguments": arguments,
    }


def _text_part(text: str) -> dict[str, Any]:
    return {"type": "output_text", "text": text, "annotations": [], "logprobs": []}


def _message_item(ex: Exchange, index: int, text: str, done: bool) -> dict[str, Any]:
    return {
        "type": "message",
        "id": _item_id("msg", ex.response_id, index),
        "status": "completed" if done else "in_progress",
        "role": "assistant",
        "content": [_text_part(text)] if done else [],
    }


def _reasoning_item(
    ex: Exchange, index: int, text: str | None, blocks: Any = None
) -> dict[str, Any]:
    """``blocks``: the reply's signed thinking (``thinking_blocks``), kept as the
    item's ``encrypted_content`` for the next turn (``anthropic_thinking``)."""
    summary = [{"type": "summary_text", "text": text}] if text else []
    item: dict[str, Any] = {
        "type": "reasoning",
        "id": _item_id("rs", ex.response_id, index),
        "summary": summary,
    }
    signed = signed_blocks(blocks)
    if signed:
        item["encrypted_content"] = encode_blocks(signed)
    return item


def skeleton(ex: Exchange, *, model: Any, created: int, status: str) -> dict[str, Any]:
    """A response object without output: the request's echoed fields (§3.2)."""
    body = ex.body or {}
    return {
        "id": ex.response_id,
        "object": "response",
        "created_at": created,
        "status": status,
        "error": None,
        "incomplete_details": None,
        "instructions": body.get("instructions"),
        "max_output_tokens": body.get("max_output_tokens"),
        "model": model,
        "output": [],
        "parallel_tool_calls": body.get("parallel_tool_calls", True),
        "previous_response_id": body.get("previous_response_id"),
        "reasoning": body.get("reasoning") or {"effort": None, "summary": None},
        "store": ex.store,
        "temperature": body.get("temperature"),
        "text": body.get("text") or {"format": {"type": "text"}},
        "tool_choice": body.get("tool_choice", "auto"),
        "tools": body.get("tools") or [],
        "top_p": body.get("top_p"),
        "truncation": body.get("truncation") or "disabled",
        "usage": None,
        "user": body.get("user"),
        "metadata": body.get("metadata") or {},
    }


def _finish(response: dict[str, Any], finish: Any) -> None:
    reason = _INCOMPLETE.get(finish)
    if reason is None:
        response["status"] = "completed"
    else:
        response["status"] = "incomplete"
        response["incomplete_details"] = {"reason": reason}


def response_of(completion: dict[str, Any], ex: Exchange) -> dict[str, Any]:
    """A ``chat.completion`` as a ``response`` object (09 §3.2)."""
    created = completion.get("created")
    response = skeleton(
        ex,
        model=completion.get("model"),
        created=created if isinstance(created, int) else int(time.time()),
        status="completed",
    )
    choice = _dict((completion.get("choices") or [{}])[0])
    message = _dict(choice.get("message"))
    output: list[dict[str, Any]] = []
    reasoning = message.get("reasoning_content") or message.get("reasoning")
    blocks = message.get("thinking_blocks")
    if (isinstance(reasoning, str) and reasoning) or blocks:
        text = reasoning if isinstance(reasoning, str) else None
        item = _reasoning_item(ex, len(output), text, blocks)
        if item["summary"] or "encrypted_content" in item:
            output.append(item)
    text = text_of(message.get("content"))
    calls = [c for c in message.get("tool_calls") or () if isinstance(c, dict)]
    if text or not calls:
        output.append(_message_item(ex, len(output), text, True))
    for call in calls:
        output.append(_call_item(call, ex, len(output)))
    response["output"] = output
    response["usage"] = responses_usage(completion.get("usage"))
    _finish(response, choice.get("finish_reason"))
    return response


def passthrough_response(
    raw: dict[str, Any], ex: Exchange, model: Any
) -> dict[str, Any]:
    """The upstream's own response object, as this gateway answered it: this
    gateway's id (the one it stores under, per key: an upstream's ids may repeat),
    the served model, and the client's own ``store`` and ``previous_response_id``."""
    body = ex.body or {}
    return {
        **raw,
        "id": ex.response_id,
        "model": model,
        "store": ex.store,
        "previous_response_id": body.get("previous_response_id"),
    }


class _Events:
    """Typed Responses SSE events with their ``sequence_number``."""

    __slots__ = ("seq",)

    def __init__(self) -> None:
        self.seq = 0

    def __call__(self, kind: str, data: dict[str, Any]) -> bytes:
        payload = {"type": kind, **data, "sequence_number": self.seq}
        self.seq += 1
        return (
            b"event: " + kind.encode() + b"\ndata: " + orjson.dumps(payload) + b"\n\n"
        )


def _failed(
    response: dict[str, Any], end: StreamEnd, error: dict[str, Any]
) -> dict[str, Any]:
    code = str(error.get("code") or "stream_interrupted")
    message = str(error.get("message") or "Upstream stream interrupted")
    return {
        **response,
        "status": "failed",
        "error": {"code": code, "message": message},
        "omniroute": end.report,
    }


class ResponsesStream:
    """Canonical chat chunks as Responses events (09 §3.2).

    ``response.created`` and ``response.in_progress`` go out with the first chunk
    (the stream has committed by then); reasoning, the message and each tool call are
    one output item each, opened on their first delta and closed (``….done``,
    ``response.output_item.done``) when the next opens or the stream ends; the last
    event is ``response.completed`` (``.incomplete`` after a length stop), or
    ``response.failed`` after a bad end, whose ``response`` carries the report.
    """

    __slots__ = (
        "calls",
        "created",
        "current",
        "events",
        "ex",
        "finish",
        "model",
        "output",
        "started",
        "usage",
    )

    def __init__(self, ex: Exchange) -> None:
        self.ex = ex
        self.events = _Events()
        self.started = False
        self.model: Any = None
        self.created = int(time.time())
        #: every output item so far, as it stands (the open one is the last)
        self.output: list[dict[str, Any]] = []
        #: the open item: (kind, output index, accumulated text) or None
        self.current: list[Any] | None = None
        #: tool call index -> its output index
        self.calls: dict[int, int] = {}
        self.finish: Any = None
        self.usage: dict[str, Any] | None = None

    def _response(self, status: str) -> dict[str, Any]:
        response = skeleton(
            self.ex, model=self.model, created=self.created, status=status
        )
        response["output"] = list(self.output)
        return response

    def _start(self, chunk: dict[str, Any]) -> bytes:
        self.started = True
        self.model = chunk.get("model")
        if isinstance(chunk.get("created"), int):
            self.created = chunk["created"]
        response = self._response("in_progress")
        return self.events("response.created", {"response": response}) + self.events(
            "response.in_progress", {"response": response}
        )

    def _open(self, kind: str, item: dict[str, Any]) -> bytes:
        out = self._close()
        index = len(self.output)
        self.output.append(item)
        self.current = [kind, index, ""]
        out += self.events(
            "response.output_item.added", {"output_index": index, "item": item}
        )
        if kind == "message":
            out += self.events(
                "response.content_part.added",
                {
                    "item_id": item["id"],
                    "output_index": index,
                    "content_index": 0,
                    "part": _text_part(""),
                },
            )
        elif kind == "reasoning":
            out += self.events(
                "response.reasoning_summary_part.added",
                {
                    "item_id": item["id"],
                    "output_index": index,
                    "summary_index": 0,
                    "part": {"type": "summary_text", "text": ""},
                },
            )
        return out

    def _close(self) -> bytes:
        if self.current is None:
            return b""
        kind, index, text = self.current
        self.current = None
        item = self.output[index]
        where = {"item_id": item["id"], "output_index": index}
        out = b""
        if kind == "message":
            part = _text_part(text)
            out += self.events(
                "response.output_text.done",
                {**where, "content_index": 0, "text": text, "logprobs": []},
            )
            out += self.events(
                "response.content_part.done",
                {**where, "content_index": 0, "part": part},
            )
            item = {**item, "status": "completed", "content": [part]}
        elif kind == "reasoning":
            part = {"type": "summary_text", "text": text}
            out += self.events(
                "response.reasoning_summary_text.done",
                {**where, "summary_index": 0, "text": text},
            )
            out += self.events(
                "response.reasoning_summary_part.done",
                {**where, "summary_index": 0, "part": part},
            )
            item = {**item, "summary": [part]}
        elif item["type"] == "custom_tool_call":
            value = _custom_input(_arguments(text))
            out += self.events(
                "response.custom_tool_call_input.delta", {**where, "delta": value}
            )
            out += self.events(
                "response.custom_tool_call_input.done", {**where, "input": value}
            )
            item = {**item, "status": "completed", "input": value}
        else:
            arguments = _arguments(text)
            if not text.strip():  # 09 §7: a call without arguments says "{}"
                out += self.events(
                    "response.function_call_arguments.delta",
                    {**where, "delta": arguments},
                )
            out += self.events(
                "response.function_call_arguments.done",
                {**where, "name": item["name"], "arguments": arguments},
            )
            item = {**item, "status": "completed", "arguments": arguments}
        self.output[index] = item
        return out + self.events(
            "response.output_item.done", {"output_index": index, "item": item}
        )

    def _text(self, kind: str, text: str) -> bytes:
        out = b""
        if self.current is None or self.current[0] != kind:
            index = len(self.output)
            item = (
                _message_item(self.ex, index, "", False)
                if kind == "message"
                else _reasoning_item(self.ex, index, None)
            )
            out = self._open(kind, item)
        assert self.current is not None
        self.current[2] += text
        index = self.current[1]
        where = {"item_id": self.output[index]["id"], "output_index": index}
        if kind == "message":
            return out + self.events(
                "response.output_text.delta",
                {**where, "content_index": 0, "delta": text, "logprobs": []},
            )
        return out + self.events(
            "response.reasoning_summary_text.delta",
            {**where, "summary_index": 0, "delta": text},
        )

    def _thought(self, blocks: Any) -> bytes:
        """Signed thinking for the open reasoning item (a new one when none is
        open), kept as its ``encrypted_content``."""
        signed = signed_blocks(blocks)
        if not signed:
            return b""
        out = b""
        if self.current is None or self.current[0] != "reasoning":
            index = len(self.output)
            out = self._open("reasoning", _reasoning_item(self.ex, index, None))
        assert self.current is not None
        item = self.output[self.current[1]]
        held = decode_blocks(item.get("encrypted_content"))
        item["encrypted_content"] = encode_blocks(held + signed)
        return out

    def _tool(self, call: dict[str, Any]) -> bytes:
        out = b""
        position = call.get("index", 0)
        if position not in self.calls:
            item = _call_item(call, self.ex, len(self.output), done=False)
            out += self._open("call", item)
            self.calls[position] = len(self.output) - 1
        arguments = _dict(call.get("function")).get("arguments")
        current = self.current
        if not isinstance(arguments, str) or not arguments:
            return out
        if current is None or current[1] != self.calls[position]:
            return out  # a late fragment of an earlier call
        current[2] += arguments
        item = self.output[current[1]]
        if item["type"] == "custom_tool_call":
            return out  # its input is known once the arguments are whole
        return out + self.events(
            "response.function_call_arguments.delta",
            {"item_id": item["id"], "output_index": current[1], "delta": arguments},
        )

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
                    out += self._text("reasoning", reasoning)
                if delta.get("thinking_blocks"):
                    out += self._thought(delta["thinking_blocks"])
                if isinstance(delta.get("content"), str) and delta["content"]:
                    out += self._text("message", delta["content"])
                for call in delta.get("tool_calls") or ():
                    if isinstance(call, dict):
                        out += self._tool(call)
                if choice.get("finish_reason"):
                    self.finish = choice["finish_reason"]
        return out

    def end(self, end: StreamEnd) -> bytes:
        out = b""
        if not self.started:
            out += self._start({"model": end.model, "created": end.created})
        out += self._close()
        if not self.output and end.error is None:  # an empty answer is one message
            out += self._text("message", "")
            out += self._close()
        response = self._response("completed")
        if end.error is not None:
            return out + self.events(
                "response.failed", {"response": _failed(response, end, end.error)}
            )
        response["usage"] = responses_usage(end.usage or self.usage)
        _finish(response, self.finish)
        self.ex.final = response
        kind = (
            "response.completed"
            if response["status"] == "completed"
            else "response.incomplete"
        )
        return out + self.events(
            kind, {"response": {**response, "omniroute": end.report}}
        )


_TERMINAL = ("response.completed", "response.incomplete", "response.failed")


class ResponsesPassthrough:
    """The upstream's own Responses events, relayed as received (09 §2.5): the served
    model set on every event's ``response``, the terminal event held until the stream
    ends and sent with the report."""

    __slots__ = ("ex", "held", "last_seq", "response")

    def __init__(self, ex: Exchange) -> None:
        self.ex = ex
        self.held: tuple[str, dict[str, Any]] | None = None
        self.last_seq = -1
        self.response: dict[str, Any] | None = None

    def chunks(self, chunks: list[dict[str, Any]]) -> bytes:
        out = b""
        for chunk in chunks:
            found = chunk.get(RAW)
            if found is None:
                continue  # a canonical chunk: what accounting reads
            name, data = found
            if isinstance(data.get("sequence_number"), int):
                self.last_seq = data["sequence_number"]
            response = data.get("response")
            if isinstance(response, dict):
                data["response"] = passthrough_response(
                    response, self.ex, chunk.get("model")
                )
                self.response = data["response"]
            if name in _TERMINAL:
                self.held = (str(name), data)
                continue
            out += _sse(str(name), data)
        return out

    def end(self, end: StreamEnd) -> bytes:
        if end.error is not None or self.held is None:
            base = self.response or skeleton(
                self.ex, model=end.model, created=end.created, status="failed"
            )
            error = end.error or {
                "code": "stream_interrupted",
                "message": "Upstream stream ended without a final event",
            }
            data = {
                "type": "response.failed",
                "response": _failed(base, end, error),
                "sequence_number": self.last_seq + 1,
            }
            return _sse("response.failed", data)
        name, data = self.held
        response = _dict(data.get("response"))
        if name != "response.failed":
            self.ex.final = dict(response)
        data["response"] = {**response, "omniroute": end.report}
        return _sse(name, data)


def _sse(name: str, data: dict[str, Any]) -> bytes:
    return b"event: " + name.encode() + b"\ndata: " + orjson.dumps(data) + b"\n\n"


class _Bound:
    """The wire's parser for one request: the pipeline's ``Parser`` over one
    ``Exchange``."""

    __slots__ = ("ex",)

    def __init__(self, ex: Exchange) -> None:
        self.ex = ex

    def parse(self, raw: bytes, headers: Mapping[str, str]) -> ChatRequest:
        return parse_responses_request(raw, self.ex)

    def model_sent(self, raw: bytes) -> str:
        return model_sent(raw)


class ResponsesWire:
    """``/v1/responses``: OpenAI Responses in and out, with stored responses."""

    paths = frozenset({"/v1/responses", "/v1/responses/"})
    surface = "responses"

    def credential(self, headers: Mapping[str, str]) -> str | None:
        return bearer_or_api_key(headers)

    def parse(self, raw: bytes, headers: Mapping[str, str]) -> ChatRequest:
        return parse_responses_request(raw, Exchange(response_id=new_response_id()))

    def model_sent(self, raw: bytes) -> str:
        return model_sent(raw)

    def error(self, failure: Failure) -> JSONReply:
        return openai_error(failure)

    def render(self, result: Result) -> Reply:
        return self.reply(result, Exchange(response_id=new_response_id()))

    async def serve(self, raw: bytes, ctx: ChatContext, key: KeyPolicy) -> Reply:
        ex = Exchange(response_id=f"resp_{ctx.request_id.hex}", key_id=key.id)
        with contextlib.suppress(RequestError):  # refused, and logged, by the parse
            ex.body = parse_body(raw)
        previous = ex.body.get("previous_response_id") if ex.body else None
        if isinstance(previous, str) and previous:
            ex.previous = await load_stored(previous, key.id)
            ex.previous_missing = ex.previous is None
        result = await handle(raw, _Bound(ex), ctx, key)
        reply = self.reply(result, ex)
        if isinstance(result, Answer) and ex.store and ex.final is not None:
            await _save(ex)
        return reply

    def reply(self, result: Result, ex: Exchange) -> Reply:
        if isinstance(result, Failure):
            return self.error(result)
        if isinstance(result, Answer):
            served = result.completion.get("model")
            if result.raw is not None:
                response = passthrough_response(result.raw, ex, served)
            else:
                response = response_of(result.completion, ex)
            ex.final = response
            payload = {**response, "omniroute": result.report}
            return JSONReply(
                status=result.status,
                body=orjson.dumps(payload),
                headers=[JSON_CONTENT_TYPE, *result.headers],
            )
        return self._stream(result, ex)

    def _stream(self, streamed: Streamed, ex: Exchange) -> StreamReply:
        encoder: ResponsesStream | ResponsesPassthrough = (
            ResponsesPassthrough(ex) if streamed.passthrough else ResponsesStream(ex)
        )
        frames = streamed.relay.frames(encoder)
        return StreamReply(
            headers=[*SSE_HEADERS, *streamed.headers],
            body=_stored_frames(frames, ex) if ex.store else frames,
            status=streamed.status,
        )


async def _stored_frames(
    frames: AsyncIterator[bytes], ex: Exchange
) -> AsyncIterator[bytes]:
    """The stream's bytes; the response is stored before its final event goes out."""
    saved = False
    async for data in frames:
        if ex.final is not None and not saved:
            await _save(ex)
            saved = True
        yield data


async def _save(ex: Exchange) -> None:
    assert ex.final is not None
    assert ex.key_id is not None
    await save_stored(
        str(ex.final.get("id") or ex.response_id),
        ex.key_id,
        ex.final,
        context=ex.context,
        input_items=ex.own_input,
        root_id=ex.root_id,
    )


def new_response_id() -> str:
    return "resp_" + hashlib.sha256(str(time.time_ns()).encode()).hexdigest()[:32]


WIRE = ResponsesWire()
