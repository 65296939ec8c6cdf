"""The Chat Completions wire: ``POST /v1/chat/completions`` (spec 01).

* **Body -> ``ChatRequest``**, or a 4xx that names the field (spec 01, 02 §3).  The
  redundancy validation rows of spec 02 §3 are checked in their order (1..11), each
  row over all entries in index order, so the first problem found is the one
  reported.  Model resolution (rows 12..14) needs the routing table and happens in
  the pipeline.
* **Result -> bytes**: a served completion with its ``omniroute`` object, the OpenAI
  error envelope, and streams as ``chat.completion.chunk`` SSE events ending with the
  chunk that carries the ``omniroute`` object (or the error) and ``data: [DONE]``.
  The usage-only chunk reaches only a client that asked for it
  (``stream_options.include_usage``), and the last chunk repeats that usage.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

import orjson

from gateway import jsonload
from gateway.inbound.base import (
    DONE_FRAME,
    JSON_CONTENT_TYPE,
    SSE_HEADERS,
    JSONReply,
    Pipelined,
    Reply,
    StreamReply,
    bearer_or_api_key,
    openai_error,
    sse_frame,
)
from gateway.kernel.errors import RETRYABLE_REASONS
from gateway.kernel.exchange import (
    Carried,
    ChainEntry,
    ChatRequest,
    Redundancy,
    RequestError,
)
from gateway.pipeline.result import Answer, Failure, Result, Streamed, StreamEnd

GATEWAY_FIELDS = (
    "models",
    "fallback_models",
    "redundancy",
    "session_id",
    "litellm_session_id",
)
_ENTRY_KEYS = frozenset({"model", "timeout_ms", "first_token_timeout_ms"})
_REDUNDANCY_KEYS = frozenset({"timeout_ms", "first_token_timeout_ms", "on"})
TIMEOUT_MS_RANGE = (1000, 300_000)  # spec 02 §3 row 9
FIRST_TOKEN_MS_RANGE = (500, 60_000)  # spec 02 §3 row 10
_MAX_MODELS = 3
_MAX_FALLBACKS = 2
_ON_VALUES = tuple(reason.value for reason in RETRYABLE_REASONS)

# Standard options checked here so that an obvious mistake is a clear 400 rather than
# an opaque upstream rejection: name -> (kind, minimum, maximum).
MAX_TOKENS_LIMIT = 2**31 - 1
_NUMBER_OPTIONS: dict[str, tuple[str, float | None, float | None]] = {
    "temperature": ("number", 0, 2),
    "top_p": ("number", 0, 1),
    "presence_penalty": ("number", -2, 2),
    "frequency_penalty": ("number", -2, 2),
    # beyond any context window; a larger value is a bad value, not a large request
    "max_tokens": ("integer", 1, MAX_TOKENS_LIMIT),
    "max_completion_tokens": ("integer", 1, MAX_TOKENS_LIMIT),
    "n": ("integer", 1, 128),
}


def _invalid(code: str, param: str | None, message: str) -> RequestError:
    return RequestError(400, code, message, param=param)


def _is_int(value: Any) -> bool:
    if isinstance(value, bool):
        return False
    if isinstance(value, int):
        return True
    return isinstance(value, float) and value.is_integer()


def positive_int(value: Any, param: str, high: int = MAX_TOKENS_LIMIT) -> int:
    """An integer in 1..``high``: a wrong type is ``invalid_type``, a wrong value
    ``invalid_value`` (01's codes), both naming ``param``."""
    if not _is_int(value):
        raise _invalid("invalid_type", param, f"'{param}' must be an integer")
    if not 1 <= value <= high:
        raise _invalid("invalid_value", param, f"'{param}' must be in 1..{high}")
    return int(value)


def _check_range(value: Any, bounds: tuple[int, int], param: str) -> int:
    low, high = bounds
    if not _is_int(value) or not low <= value <= high:
        raise _invalid(
            "invalid_value", param, f"'{param}' must be an integer in {low}..{high}"
        )
    return int(value)


def parse_body(raw: bytes) -> dict[str, Any]:
    try:
        body = jsonload.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise _invalid(
            "invalid_json", None, f"Request body is not valid JSON: {exc}"
        ) from None
    if not isinstance(body, dict):
        raise _invalid("invalid_type", None, "Request body must be a JSON object")
    return body


def _entry_list(body: dict[str, Any], name: str, limit: int) -> list[Any] | None:
    if name not in body:
        return None
    value = body[name]
    if not isinstance(value, list) or not 1 <= len(value) <= limit:
        raise _invalid(
            "invalid_value", name, f"'{name}' must be a list of 1..{limit} entries"
        )
    return value


def _check_entries(listed: list[tuple[str, Any]]) -> None:
    for param, entry in listed:  # row 5
        is_string = isinstance(entry, str) and entry != ""
        if not is_string and not isinstance(entry, dict):
            raise _invalid(
                "invalid_type", param, f"'{param}' must be a model string or an object"
            )
    for param, entry in listed:  # row 6
        if isinstance(entry, dict):
            model = entry.get("model")
            if not isinstance(model, str) or model == "":
                raise _invalid(
                    "invalid_type",
                    f"{param}.model",
                    f"'{param}.model' must be a non-empty string",
                )


def _chain_entry(
    param: str,
    entry: str | dict[str, Any],
    timeouts: dict[str, int],
    first: dict[str, int],
) -> ChainEntry:
    """A validated entry; an object entry's model is named ``<path>.model`` (row 12)."""
    if isinstance(entry, str):
        return ChainEntry(model=entry, param=param)
    return ChainEntry(
        model=entry["model"],
        param=f"{param}.model",
        timeout_ms=timeouts.get(param),
        first_token_timeout_ms=first.get(param),
    )


def _check_entry_keys(listed: list[tuple[str, Any]], redundancy: Any) -> None:
    for param, entry in listed:  # row 8
        if isinstance(entry, dict):
            for key in entry:
                if key not in _ENTRY_KEYS:
                    raise _invalid(
                        "unknown_parameter",
                        f"{param}.{key}",
                        f"Unknown parameter '{param}.{key}'",
                    )
    if isinstance(redundancy, dict):
        for key in redundancy:
            if key not in _REDUNDANCY_KEYS:
                raise _invalid(
                    "unknown_parameter",
                    f"redundancy.{key}",
                    f"Unknown parameter 'redundancy.{key}'",
                )


def _timeouts(
    listed: list[tuple[str, Any]],
    redundancy: dict[str, Any],
    field: str,
    bounds: tuple[int, int],
) -> dict[str, int]:
    found: dict[str, int] = {}
    for param, entry in listed:
        if isinstance(entry, dict) and field in entry:
            found[param] = _check_range(entry[field], bounds, f"{param}.{field}")
    if field in redundancy:
        found["redundancy"] = _check_range(
            redundancy[field], bounds, f"redundancy.{field}"
        )
    return found


def _on(redundancy: dict[str, Any]) -> tuple[str, ...] | None:
    if "on" not in redundancy:
        return None
    value = redundancy["on"]
    if not isinstance(value, list) or any(item not in _ON_VALUES for item in value):
        raise _invalid(
            "invalid_value",
            "redundancy.on",
            "'redundancy.on' must be a list of: " + ", ".join(_ON_VALUES),
        )
    return tuple(dict.fromkeys(value))


def _check_options(body: dict[str, Any]) -> None:
    if "stream" in body and not isinstance(body["stream"], bool | None):
        raise _invalid("invalid_type", "stream", "'stream' must be a boolean")
    for name, (kind, low, high) in _NUMBER_OPTIONS.items():
        value = body.get(name)
        if value is None:
            continue
        ok_type = (
            _is_int(value)
            if kind == "integer"
            else (isinstance(value, int | float) and not isinstance(value, bool))
        )
        if not ok_type:
            article = "an" if kind == "integer" else "a"
            raise _invalid("invalid_type", name, f"'{name}' must be {article} {kind}")
        if (low is not None and value < low) or (high is not None and value > high):
            bounds = f"{low}..{high}" if high is not None else f">= {low}"
            raise _invalid("invalid_value", name, f"'{name}' must be {bounds}")
    options = body.get("stream_options")
    if options is not None and not isinstance(options, dict):
        raise _invalid(
            "invalid_type", "stream_options", "'stream_options' must be an object"
        )
    tools = body.get("tools")
    if tools is not None and not isinstance(tools, list):
        raise _invalid("invalid_type", "tools", "'tools' must be a list")


def _check_messages(body: dict[str, Any]) -> None:
    if "messages" not in body:
        raise _invalid("missing_parameter", "messages", "'messages' is required")
    messages = body["messages"]
    if not isinstance(messages, list):
        raise _invalid("invalid_type", "messages", "'messages' must be a list")
    if not messages:  # the right type, a value not allowed
        raise _invalid("invalid_value", "messages", "'messages' must not be empty")
    for index, message in enumerate(messages):
        if not isinstance(message, dict):
            raise _invalid(
                "invalid_type",
                f"messages[{index}]",
                f"'messages[{index}]' must be an object",
            )
        if not isinstance(message.get("role"), str):
            raise _invalid(
                "invalid_type",
                f"messages[{index}].role",
                f"'messages[{index}].role' must be a string",
            )


#: every reasoning effort a client may ask for: OpenAI's levels, and ``max``, which
#: the smart classifier reads as explicit reasoning (``kernel.smart``)
EFFORTS = ("none", "minimal", "low", "medium", "high", "xhigh", "max")


def check_effort(value: Any, param: str) -> None:
    """A reasoning effort the client sent: a string of ``EFFORTS``."""
    if not isinstance(value, str):
        raise _invalid("invalid_type", param, f"'{param}' must be a string")
    if value not in EFFORTS:
        raise _invalid(
            "invalid_value", param, f"'{param}' must be one of: " + ", ".join(EFFORTS)
        )


def _string(
    owner: dict[str, Any], key: str, path: str, *, required: bool, empty: bool = True
) -> None:
    """``owner[key]`` is a string (or absent, or null, unless ``required``; not
    empty unless ``empty``: a name or an id)."""
    value = owner.get(key)
    if value is None or (value == "" and not empty and required):
        if required:
            raise _invalid(
                "missing_parameter", f"{path}.{key}", f"'{path}.{key}' is required"
            )
        return
    if not isinstance(value, str):
        raise _invalid(
            "invalid_type", f"{path}.{key}", f"'{path}.{key}' must be a string"
        )


def check_name(owner: dict[str, Any], key: str, path: str) -> None:
    """``owner[key]`` is a non-empty string: a tool's name, a call's id (every
    wire's upstreams refuse a call without them, and failover would not help)."""
    _string(owner, key, path, required=True, empty=False)


def _object(owner: dict[str, Any], key: str, path: str) -> dict[str, Any]:
    """``owner[key]``, which must be an object."""
    value = owner.get(key)
    if value is None:
        raise _invalid(
            "missing_parameter", f"{path}.{key}", f"'{path}.{key}' is required"
        )
    if not isinstance(value, dict):
        raise _invalid(
            "invalid_type", f"{path}.{key}", f"'{path}.{key}' must be an object"
        )
    return value


def _check_part(part: Any, path: str) -> None:
    """One content part of the kinds Chat Completions defines; a part of another
    type is left to the upstream (a passthrough carries it, a translation names
    it), and a bare string is read as text by every dialect."""
    if isinstance(part, str):
        return
    if not isinstance(part, dict):
        raise _invalid("invalid_type", path, f"'{path}' must be an object")
    _string(part, "type", path, required=True)
    kind = part["type"]
    if kind in ("text", "refusal"):
        _string(part, kind, path, required=True)
    elif kind == "image_url":
        image = part.get("image_url")
        if isinstance(image, str):  # a bare URL: what every dialect also reads
            return
        _string(
            _object(part, "image_url", path), "url", f"{path}.image_url", required=True
        )
    elif kind == "input_audio":
        audio = _object(part, "input_audio", path)
        _string(audio, "data", f"{path}.input_audio", required=True)
        _string(audio, "format", f"{path}.input_audio", required=False)
    elif kind == "file":
        file = _object(part, "file", path)
        for key in ("file_data", "file_id", "filename"):
            _string(file, key, f"{path}.file", required=False)


def _check_content(message: dict[str, Any], path: str, *, required: bool) -> None:
    content = message.get("content")
    if content is None:
        if required:
            raise _invalid(
                "missing_parameter", f"{path}.content", f"'{path}.content' is required"
            )
        return
    if isinstance(content, str):
        return
    if not isinstance(content, list):
        raise _invalid(
            "invalid_type",
            f"{path}.content",
            f"'{path}.content' must be a string or a list of parts",
        )
    for index, part in enumerate(content):
        _check_part(part, f"{path}.content[{index}]")


def check_arguments(function: dict[str, Any], path: str) -> None:
    """A tool call's ``arguments``: a string (or an object, which the dialects read
    too); empty means no arguments.  A string that is no JSON object is accepted, as
    OpenAI accepts it: a model's truncated call replayed in an agent's history must
    not stop the conversation.  A translation that cannot carry it names it
    (``carry.odd_elements``)."""
    arguments = function.get("arguments")
    if arguments is None or isinstance(arguments, str | dict):
        return
    param = f"{path}.arguments"
    raise _invalid("invalid_type", param, f"'{param}' must be a JSON string")


def _check_tool_calls(message: dict[str, Any], path: str) -> None:
    calls = message.get("tool_calls")
    if calls is None:
        return
    if not isinstance(calls, list):
        raise _invalid(
            "invalid_type", f"{path}.tool_calls", f"'{path}.tool_calls' must be a list"
        )
    for index, call in enumerate(calls):
        where = f"{path}.tool_calls[{index}]"
        if not isinstance(call, dict):
            raise _invalid("invalid_type", where, f"'{where}' must be an object")
        _string(call, "type", where, required=False)
        if call.get("type", "function") != "function":
            continue  # a custom tool's call: the upstream's to judge
        check_name(call, "id", where)
        function = _object(call, "function", where)
        _string(function, "name", f"{where}.function", required=True, empty=False)
        check_arguments(function, f"{where}.function")


#: roles whose message has content of its own (an assistant's may be only calls)
_CONTENT_REQUIRED = frozenset({"system", "developer", "user", "tool"})


def check_conversation(body: dict[str, Any]) -> None:
    """The Chat Completions messages, beyond a list of objects with a role: what a
    translated attempt would otherwise lose without a word (spec 09 §2.3).  Only
    the shapes OpenAI defines are checked; unknown keys and part types stay the
    upstream's to judge."""
    for index, message in enumerate(body["messages"]):
        path = f"messages[{index}]"
        role = message["role"]
        _check_content(message, path, required=role in _CONTENT_REQUIRED)
        _string(message, "name", path, required=False)
        if role == "assistant":
            _string(message, "refusal", path, required=False)
            _check_tool_calls(message, path)
        elif role == "tool":
            _string(message, "tool_call_id", path, required=True, empty=False)


def check_tools(tools: Any) -> None:
    """Chat Completions ``tools`` (a list, checked before): each a function with a
    string ``name``; a tool of another ``type`` is the upstream's to judge."""
    for index, tool in enumerate(tools or ()):
        path = f"tools[{index}]"
        if not isinstance(tool, dict):
            raise _invalid("invalid_type", path, f"'{path}' must be an object")
        _string(tool, "type", path, required=False)
        if tool.get("type", "function") != "function":
            continue
        function = _object(tool, "function", path)
        _string(function, "name", f"{path}.function", required=True, empty=False)
        _string(function, "description", f"{path}.function", required=False)
        parameters = function.get("parameters")
        if parameters is not None and not isinstance(parameters, dict):
            param = f"{path}.function.parameters"
            raise _invalid("invalid_type", param, f"'{param}' must be an object")


#: the client's own ``reasoning_effort``: carried where the model reasons, or where
#: its capabilities are unknown and the dialect takes the field (09 §2.6)
OWN_EFFORT = Carried("reasoning_effort", "reasoning_effort", own=True)


def parse_chat_request(raw: bytes) -> ChatRequest:
    """Validate a chat body; raises ``RequestError`` naming the first bad field."""
    body = parse_body(raw)
    request = chat_request(body)
    check_conversation(body)
    check_tools(body.get("tools"))
    if body.get("reasoning_effort") is not None:
        check_effort(body["reasoning_effort"], "reasoning_effort")
    if request.body.get("reasoning_effort") is not None:
        return dataclasses.replace(request, conditional=(OWN_EFFORT,))
    return request


def chat_request(
    body: dict[str, Any],
    session_fields: dict[str, Any] | None = None,
    *,
    messages: bool = True,
) -> ChatRequest:
    """A parsed chat body (a wire's own, or one a wire translated its body into) as
    the canonical request; raises ``RequestError`` naming the first bad field.
    ``session_fields``: what else names the session (never forwarded).
    ``messages``: the body is a chat body (an embeddings body has ``input``)."""
    if "models" in body and "fallback_models" in body:  # row 1
        raise _invalid(
            "conflicting_parameters",
            "fallback_models",
            "'models' and 'fallback_models' cannot be used together",
        )
    models = _entry_list(body, "models", _MAX_MODELS)  # row 2
    fallbacks = _entry_list(body, "fallback_models", _MAX_FALLBACKS)  # row 3
    model = body.get("model")
    if models is None and model in (None, ""):  # row 4
        raise _invalid("missing_parameter", "model", "'model' is required")
    if models is None and not isinstance(model, str):  # row 4: sent, not a string
        raise _invalid("invalid_type", "model", "'model' must be a string")
    listed: list[tuple[str, Any]]
    if models is not None:
        listed = [(f"models[{i}]", entry) for i, entry in enumerate(models)]
    else:
        listed = [(f"fallback_models[{i}]", e) for i, e in enumerate(fallbacks or [])]
    _check_entries(listed)  # rows 5-6
    redundancy = body.get("redundancy", {})
    if "redundancy" in body and not isinstance(redundancy, dict):  # row 7
        raise _invalid("invalid_type", "redundancy", "'redundancy' must be an object")
    _check_entry_keys(listed, redundancy)  # row 8
    timeouts = _timeouts(listed, redundancy, "timeout_ms", TIMEOUT_MS_RANGE)  # row 9
    first = _timeouts(  # row 10
        listed, redundancy, "first_token_timeout_ms", FIRST_TOKEN_MS_RANGE
    )
    on = _on(redundancy)  # row 11
    entries = [_chain_entry(param, entry, timeouts, first) for param, entry in listed]
    if models is None:
        assert isinstance(model, str)
        entries.insert(0, ChainEntry(model=model, param="model"))
    if messages:
        _check_messages(body)
        _check_options(body)
    stream = bool(body.get("stream"))
    options = body.get("stream_options")
    include_usage = bool(isinstance(options, dict) and options.get("include_usage"))
    clean = {k: v for k, v in body.items() if k not in GATEWAY_FIELDS}
    return ChatRequest(
        body=clean,
        stream=stream,
        model=model if isinstance(model, str) else None,
        entries=tuple(entries),
        explicit_chain=models is not None or fallbacks is not None,
        redundancy=Redundancy(
            timeout_ms=timeouts.get("redundancy"),
            first_token_timeout_ms=first.get("redundancy"),
            on=on,
        ),
        include_usage=include_usage,
        session_fields={
            **(session_fields or {}),
            **{k: body[k] for k in ("session_id", "litellm_session_id") if k in body},
        },
    )


def model_sent(raw: bytes) -> str:
    """The model string of a body that failed validation, for its log row (spec 06
    §1.1); empty when the body has none (not JSON, not an object, no string)."""
    try:
        body = orjson.loads(raw)
    except orjson.JSONDecodeError:
        return ""
    if not isinstance(body, dict):
        return ""
    model = body.get("model")
    models = body.get("models")
    if not isinstance(model, str) and isinstance(models, list) and models:
        first = models[0]
        model = first.get("model") if isinstance(first, dict) else first
    return model[:256] if isinstance(model, str) else ""


# --- result -> bytes ----------------------------------------------------------------


_CHUNK_FIELDS = ("id", "object", "created", "model")


def _finishes(chunk: dict[str, Any]) -> bool:
    choices = chunk.get("choices")
    return isinstance(choices, list) and any(
        isinstance(c, dict) and c.get("finish_reason") for c in choices
    )


class ChatStream:
    """The SSE encoding of a committed stream for one request (spec 01, 09 §7).

    A naive client reads ``chunk.choices[0]`` on every chunk, so the report rides on
    the chunk that carries the final ``finish_reason``, held until the stream ends;
    with ``stream_options.include_usage`` it rides on the usage chunk (``choices:
    []``) instead, as OpenAI sends usage, and the usage-only chunk reaches only a
    client that asked for it.  A tool call whose arguments never came gets ``"{}"``
    before the finish.  A stream that ends badly ends with one choice whose
    ``finish_reason`` is ``"error"``, the ``error`` object and the report.
    """

    __slots__ = ("args", "held", "include_usage")

    def __init__(self, include_usage: bool) -> None:
        self.include_usage = include_usage
        #: the chunk the report will ride on (the finish chunk, or the usage chunk)
        self.held: dict[str, Any] | None = None
        #: (choice index, tool call index) -> whether arguments arrived
        self.args: dict[tuple[int, int], bool] = {}

    def chunks(self, chunks: list[dict[str, Any]]) -> bytes:
        frames: list[bytes] = []
        for chunk in chunks:
            if "usage" in chunk:
                if not chunk.get("choices") and chunk["usage"] is not None:
                    if self.include_usage:  # the report rides on the usage chunk
                        self._hold(chunk, frames)
                    continue  # (or: the usage-only chunk the client did not ask for)
                if not self.include_usage:
                    del chunk["usage"]  # also when an upstream puts it on content
            if self.args or _has_tool_calls(chunk):
                self._track(chunk)
            if _finishes(chunk):
                frames += self._no_arguments(chunk)
                if not self.include_usage:
                    self._hold(chunk, frames)
                    continue
            frames.append(sse_frame(chunk))
        return frames[0] if len(frames) == 1 else b"".join(frames)

    def _hold(self, chunk: dict[str, Any], frames: list[bytes]) -> None:
        if self.held is not None:  # an earlier choice's finish: it goes out now
            frames.append(sse_frame(self.held))
        self.held = chunk

    def _track(self, chunk: dict[str, Any]) -> None:
        for choice in chunk.get("choices") or ():
            delta = choice.get("delta") if isinstance(choice, dict) else None
            calls = delta.get("tool_calls") if isinstance(delta, dict) else None
            for call in calls if isinstance(calls, list) else ():
                if not isinstance(call, dict):
                    continue
                key = (choice.get("index", 0), call.get("index", 0))
                function = call.get("function")
                sent = isinstance(function, dict) and bool(function.get("arguments"))
                self.args[key] = self.args.get(key, False) or sent

    def _no_arguments(self, finish: dict[str, Any]) -> list[bytes]:
        """``"{}"`` for every tool call of a finishing choice whose arguments never
        came (spec 09 §7: a tool call without arguments says ``"{}"``)."""
        finishing = {
            c.get("index", 0)
            for c in finish.get("choices") or ()
            if isinstance(c, dict) and c.get("finish_reason")
        }
        missing = [k for k, sent in self.args.items() if not sent and k[0] in finishing]
        if not missing:
            return []
        base: dict[str, Any] = {k: finish[k] for k in _CHUNK_FIELDS if k in finish}
        frames = []
        for choice, call in missing:
            self.args[(choice, call)] = True
            delta = {"tool_calls": [{"index": call, "function": {"arguments": "{}"}}]}
            frames.append(
                sse_frame(
                    {
                        **base,
                        "choices": [
                            {"index": choice, "delta": delta, "finish_reason": None}
                        ],
                    }
                )
            )
        return frames

    def base(self, end: StreamEnd) -> dict[str, Any]:
        """The identity fields of a chunk the gateway adds at the end."""
        return {
            "id": end.chunk_id,
            "object": "chat.completion.chunk",
            "created": end.created,
            "model": end.model,
        }

    def empty_choice(self, finish: str) -> dict[str, Any]:
        """A choice that adds no content, only ``finish``."""
        return {"index": 0, "delta": {}, "finish_reason": finish}

    def end(self, end: StreamEnd) -> bytes:
        base = self.base(end)
        if end.error is not None:
            frames = [] if self.held is None else [sse_frame(self.held)]
            last = {
                **base,
                "choices": [self.empty_choice("error")],
                "error": end.error,
                "omniroute": end.report,
            }
            if self.include_usage and end.usage is not None:
                last["usage"] = end.usage
            return b"".join([*frames, sse_frame(last)]) + DONE_FRAME
        if self.include_usage:
            last = self.held or {**base, "choices": []}
            if end.usage is not None:
                last["usage"] = end.usage  # the whole answer's (a composite sums it)
        else:
            last = self.held or {**base, "choices": [self.empty_choice("stop")]}
        last["omniroute"] = end.report
        return sse_frame(last) + DONE_FRAME


def no_empty_arguments(completion: dict[str, Any]) -> dict[str, Any]:
    """A completion whose tool calls without arguments say ``"{}"`` (09 §7)."""
    for choice in completion.get("choices") or ():
        message = choice.get("message") if isinstance(choice, dict) else None
        calls = message.get("tool_calls") if isinstance(message, dict) else None
        for call in calls if isinstance(calls, list) else ():
            function = call.get("function") if isinstance(call, dict) else None
            if isinstance(function, dict) and not function.get("arguments"):
                function["arguments"] = "{}"
    return completion


def _has_tool_calls(chunk: dict[str, Any]) -> bool:
    for choice in chunk.get("choices") or ():
        delta = choice.get("delta") if isinstance(choice, dict) else None
        if isinstance(delta, dict) and delta.get("tool_calls"):
            return True
    return False


def stream_reply(streamed: Streamed) -> StreamReply:
    encoder = ChatStream(streamed.request.include_usage)
    return StreamReply(
        headers=[*SSE_HEADERS, *streamed.headers],
        body=streamed.relay.frames(encoder),
        status=streamed.status,
    )


def json_reply(status: int, payload: dict[str, Any], headers: list[Any]) -> JSONReply:
    return JSONReply(
        status=status, body=orjson.dumps(payload), headers=[JSON_CONTENT_TYPE, *headers]
    )


class ChatWire(Pipelined):
    """``/v1/chat/completions``: OpenAI Chat Completions in and out."""

    paths = frozenset({"/v1/chat/completions", "/v1/chat/completions/"})
    surface = "chat"

    def credential(self, headers: Mapping[str, str]) -> str | None:
        return bearer_or_api_key(headers)

    def parse(self, raw: bytes, headers: Mapping[str, str]) -> ChatRequest:
        return parse_chat_request(raw)

    def model_sent(self, raw: bytes) -> str:
        return model_sent(raw)

    def answer(self, answer: Answer) -> JSONReply:
        payload = {**no_empty_arguments(answer.completion), "omniroute": answer.report}
        return json_reply(answer.status, payload, answer.headers)

    def error(self, failure: Failure) -> JSONReply:
        return openai_error(failure)

    def render(self, result: Result) -> Reply:
        if isinstance(result, Answer):
            return self.answer(result)
        if isinstance(result, Failure):
            return self.error(result)
        return stream_reply(result)


WIRE = ChatWire()
