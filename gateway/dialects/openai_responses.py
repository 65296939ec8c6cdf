"""OpenAI Responses dialect: an ``openai``-kind provider or model with ``wire:
responses`` (spec 10 §1, §5), e.g. a Responses-only model.

* **Request**: the canonical chat body becomes a Responses body: leading system
  messages as ``instructions``, later ones as ``system`` message items; user and
  assistant turns as ``message`` items (``input_text`` / ``input_image`` /
  ``input_file``, ``output_text``); an assistant turn's tool calls as
  ``function_call`` items and tool messages as ``function_call_output`` items;
  function tools flattened (``strict`` false unless asked: the Responses default
  is strict), ``tool_choice``, ``response_format`` as ``text.format``,
  ``reasoning_effort`` as ``reasoning.effort``, ``max_tokens`` /
  ``max_completion_tokens`` as ``max_output_tokens``; ``store`` is always false
  (spec 09 §3.4).  Chat-only fields have no counterpart: left out and named
  (``UNSENT``, spec 09 §2.6) when the client set them to a value that asks for
  something (``stop``, ``top_k``, ``n`` above 1, ``seed``, penalties other than 0,
  ``logprobs``, ``top_logprobs``, ``logit_bias``, legacy ``functions``,
  ``web_search_options``, ``audio``/``modalities``, ``verbosity``), as are audio
  parts (``messages[i].content[j]``; in system and tool messages, anything but
  text) and tools other than functions (``tools[i]``).
* **Reply**: the ``response`` object becomes a ``chat.completion``: ``output_text``
  parts as the content, ``function_call`` items as tool calls, ``reasoning``
  summaries as ``reasoning_content``; ``incomplete`` for ``max_output_tokens`` is
  ``length``; usage with cached and reasoning tokens.
* **Stream**: the typed events become ``chat.completion.chunk`` objects; a
  passthrough (a Responses request, spec 09 §2.5) also relays every event as
  received (``RAW``).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

from gateway.dialects.anthropic_thinking import without_own_reasoning
from gateway.dialects.base import (
    JSON,
    RAW,
    BadUpstreamResponse,
    StreamErrorEvent,
    StreamTranslator,
    UpstreamCall,
    endpoint_url,
)
from gateway.dialects.carry import (
    OPENAI_ONLY,
    SAMPLING_EXTRAS,
    Carry,
    any_value,
    nonempty,
    text_or,
)
from gateway.dialects.openai import OpenAIDialect, error_from_payload
from gateway.dialects.tool_ids import OPENAI_IDS, fit_messages
from gateway.kernel.errors import UpstreamError
from gateway.kernel.sse import DONE
from gateway.kernel.text import text_of
from gateway.kernel.types import Auth

#: chat fields copied under the same name
_SAME = (
    "temperature",
    "top_p",
    "user",
    "metadata",
    "parallel_tool_calls",
    "prompt_cache_key",
    "safety_identifier",
    "service_tier",
)

_INCOMPLETE = {"max_output_tokens": "length", "content_filter": "content_filter"}

#: stream events whose ``delta`` is one field of a chunk's delta
_DELTAS = {
    "response.output_text.delta": "content",
    "response.refusal.delta": "refusal",
    "response.reasoning_summary_text.delta": "reasoning_content",
    "response.reasoning_text.delta": "reasoning_content",
}


def _dict(value: Any) -> JSON:
    return value if isinstance(value, dict) else {}


def _int(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


# --- request ---------------------------------------------------------------------


def _user_part(part: Any) -> JSON | None:
    if isinstance(part, str):
        return {"type": "input_text", "text": part}
    if not isinstance(part, dict):
        return None
    kind = part.get("type")
    if kind == "image_url":
        image = part.get("image_url")
        image = image if isinstance(image, dict) else {"url": image}
        out: JSON = {"type": "input_image", "image_url": image.get("url")}
        if image.get("detail"):
            out["detail"] = image["detail"]
        return out
    if kind == "file":
        file = _dict(part.get("file"))
        out = {"type": "input_file"}
        for name in ("file_id", "file_data", "filename"):
            if file.get(name):
                out[name] = file[name]
        return out
    text = part.get("text")
    if isinstance(text, str):
        return {"type": "input_text", "text": text}
    return None  # audio and unknown parts have no Responses counterpart


def _user_content(content: Any) -> str | list[JSON]:
    if isinstance(content, str):
        return content
    parts = [_user_part(p) for p in content] if isinstance(content, list) else []
    return [p for p in parts if p is not None]


def _assistant_items(message: JSON) -> list[JSON]:
    items: list[JSON] = []
    text = text_of(message.get("content"))
    if text:
        items.append(
            {
                "type": "message",
                "role": "assistant",
                "content": [{"type": "output_text", "text": text}],
            }
        )
    refusal = message.get("refusal")
    if isinstance(refusal, str) and refusal:
        items.append(
            {
                "type": "message",
                "role": "assistant",
                "content": [{"type": "refusal", "refusal": refusal}],
            }
        )
    for call in message.get("tool_calls") or ():
        if not isinstance(call, dict):
            continue
        function = _dict(call.get("function"))
        arguments = function.get("arguments")
        items.append(
            {
                "type": "function_call",
                "call_id": call.get("id"),
                "name": function.get("name"),
                "arguments": arguments if isinstance(arguments, str) else "{}",
            }
        )
    return items


def input_of(messages: list[Any]) -> tuple[str | None, list[JSON]]:
    """``(instructions, input items)`` of chat ``messages``."""
    instructions: list[str] = []
    items: list[JSON] = []
    for message in messages:
        if not isinstance(message, dict):
            continue
        role = message.get("role")
        content = message.get("content")
        if role in ("system", "developer"):
            if not items:  # the leading ones are the instructions
                instructions.append(text_of(content))
            else:
                items.append(
                    {"type": "message", "role": role, "content": text_of(content)}
                )
        elif role == "user":
            items.append(
                {"type": "message", "role": "user", "content": _user_content(content)}
            )
        elif role == "assistant":
            items += _assistant_items(message)
        elif role == "tool":
            items.append(
                {
                    "type": "function_call_output",
                    "call_id": message.get("tool_call_id"),
                    "output": text_of(content),
                }
            )
    joined = "\n\n".join(t for t in instructions if t)
    return (joined or None), items


def _tools(tools: Any) -> list[JSON]:
    out: list[JSON] = []
    for tool in tools if isinstance(tools, list) else ():
        function = _dict(_dict(tool).get("function"))
        if not function.get("name"):
            continue
        item: JSON = {
            "type": "function",
            "name": function["name"],
            "parameters": function.get("parameters")
            or {"type": "object", "properties": {}},
            "strict": function.get("strict") is True,
        }
        if function.get("description"):
            item["description"] = function["description"]
        out.append(item)
    return out


def _tool_choice(value: Any) -> Any:
    if isinstance(value, dict):
        name = _dict(value.get("function")).get("name")
        return {"type": "function", "name": name} if name else "auto"
    return value


def _text_format(value: Any) -> JSON | None:
    fmt = _dict(value)
    kind = fmt.get("type")
    if kind in ("text", "json_object"):
        return {"type": kind}
    if kind == "json_schema":
        schema = _dict(fmt.get("json_schema"))
        out: JSON = {
            "type": "json_schema",
            "name": schema.get("name") or "response",
            "schema": schema.get("schema") or {},
        }
        for name in ("strict", "description"):
            if schema.get(name) is not None:
                out[name] = schema[name]
        return out
    return None


#: what ``responses_body`` cannot carry, named per attempt (spec 09 §2.6)
UNSENT = Carry(
    fields=MappingProxyType(
        {**OPENAI_ONLY, **SAMPLING_EXTRAS, "stop": nonempty, "top_k": any_value}
    ),
    part=text_or(frozenset({"image_url", "file"})),
    arguments=True,  # a function_call item's arguments are the string as sent
)


def responses_body(body: JSON, *, model: str, stream: bool) -> JSON:
    """The Responses request for the canonical chat ``body`` aimed at ``model``."""
    messages = fit_messages(list(body.get("messages") or ()), OPENAI_IDS)
    instructions, items = input_of(messages)
    out: JSON = {"model": model, "input": items, "store": False}
    if instructions:
        out["instructions"] = instructions
    if stream:
        out["stream"] = True
    for name in _SAME:
        if body.get(name) is not None:
            out[name] = body[name]
    limit = body.get("max_completion_tokens", body.get("max_tokens"))
    if limit is not None:
        out["max_output_tokens"] = limit
    tools = _tools(body.get("tools"))
    if tools:
        out["tools"] = tools
        if body.get("tool_choice") is not None:
            out["tool_choice"] = _tool_choice(body["tool_choice"])
    else:
        out.pop("parallel_tool_calls", None)
    text = _text_format(body.get("response_format"))
    if text is not None:
        out["text"] = {"format": text}
    effort = body.get("reasoning_effort")
    if isinstance(effort, str):
        out["reasoning"] = {"effort": effort}
    return out


# --- reply -----------------------------------------------------------------------


def map_usage(usage: Any) -> JSON:
    """Responses usage -> OpenAI chat usage (cached input, reasoning output)."""
    usage = _dict(usage)
    prompt = _int(usage.get("input_tokens"))
    completion = _int(usage.get("output_tokens"))
    out: JSON = {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": _int(usage.get("total_tokens")) or prompt + completion,
    }
    cached = _int(_dict(usage.get("input_tokens_details")).get("cached_tokens"))
    out["prompt_tokens_details"] = {"cached_tokens": cached}
    reasoning = _int(_dict(usage.get("output_tokens_details")).get("reasoning_tokens"))
    out["completion_tokens_details"] = {"reasoning_tokens": reasoning}
    return out


def _summary(item: JSON) -> str:
    parts = item.get("summary") or item.get("content") or ()
    return "".join(str(p.get("text") or "") for p in parts if isinstance(p, dict))


def _call(item: JSON) -> JSON:
    arguments: Any
    if item.get("type") == "custom_tool_call":  # one string input (09 §3.1)
        arguments = json.dumps({"input": item.get("input") or ""})
    else:
        arguments = item.get("arguments")
        arguments = arguments if isinstance(arguments, str) and arguments else "{}"
    return {
        "id": item.get("call_id") or item.get("id"),
        "type": "function",
        "function": {"name": item.get("name"), "arguments": arguments},
    }


def finish_reason(response: JSON, calls: bool) -> str:
    if response.get("status") == "incomplete":
        reason = _dict(response.get("incomplete_details")).get("reason")
        return _INCOMPLETE.get(str(reason), "length")
    return "tool_calls" if calls else "stop"


def parse_response(payload: Any, *, created: int) -> JSON:
    """A ``response`` object -> an OpenAI ``chat.completion``."""
    if not isinstance(payload, dict):
        raise BadUpstreamResponse("response is not a JSON object")
    if payload.get("status") == "failed" or payload.get("error"):
        raise BadUpstreamResponse("response carries an error")
    output = payload.get("output")
    if not isinstance(output, list):
        raise BadUpstreamResponse("response has no output list")
    message, calls = _output_message(output)
    stamp = payload.get("created_at")
    completion: JSON = {
        "id": f"chatcmpl-{payload.get('id') or ''}",
        "object": "chat.completion",
        "created": stamp if isinstance(stamp, int) else created,
        "model": payload.get("model"),
        "choices": [
            {
                "index": 0,
                "message": message,
                "finish_reason": finish_reason(payload, calls),
            }
        ],
    }
    if isinstance(payload.get("usage"), dict):
        completion["usage"] = map_usage(payload["usage"])
    return completion


def _output_message(output: list[Any]) -> tuple[JSON, bool]:
    """The assistant message of a response's ``output`` items; whether it calls."""
    texts: list[str] = []
    refusals: list[str] = []
    reasoning: list[str] = []
    calls: list[JSON] = []
    for item in output:
        item = _dict(item)
        kind = item.get("type")
        if kind == "message":
            for part in item.get("content") or ():
                part = _dict(part)
                if part.get("type") == "output_text":
                    texts.append(str(part.get("text") or ""))
                elif part.get("type") == "refusal":
                    refusals.append(str(part.get("refusal") or ""))
        elif kind in ("function_call", "custom_tool_call"):
            calls.append(_call(item))
        elif kind == "reasoning":
            reasoning.append(_summary(item))
    message: JSON = {
        "role": "assistant",
        "content": None if calls and not texts else "".join(texts),
    }
    if refusals:
        message["refusal"] = "".join(refusals)
    if calls:
        message["tool_calls"] = calls
    if any(reasoning):
        message["reasoning_content"] = "".join(reasoning)
    return message, bool(calls)


def _stream_error(data: JSON) -> UpstreamError:
    error = data.get("error")
    if not isinstance(error, dict):
        error = _dict(_dict(data.get("response")).get("error")) or data
    code = error.get("code")
    return UpstreamError(
        message=str(error.get("message") or "response failed"),
        code=str(code) if code is not None else None,
        type=str(error["type"]) if isinstance(error.get("type"), str) else None,
    )


# --- stream ----------------------------------------------------------------------


class ResponsesStreamTranslator:
    """Responses events -> OpenAI chunks for one attempt.  Function calls are
    numbered from 0 in the order their items are added; ``item_id`` and
    ``output_index`` route each arguments delta."""

    __slots__ = (
        "_args_seen",
        "_calls",
        "_count",
        "_created",
        "_finished",
        "_id",
        "_model",
        "_raw",
    )

    def __init__(self, *, created: int, raw: bool = False) -> None:
        self._raw = raw
        self._created = created
        self._finished = False
        self._id = "chatcmpl-"
        self._model = ""
        self._calls: dict[Any, int] = {}
        self._count = 0
        self._args_seen: set[int] = set()

    @property
    def finished(self) -> bool:
        return self._finished

    def partial_usage(self) -> JSON | None:
        return None  # usage comes with the final response only

    def translate(self, event: str | None, data: Any) -> list[JSON]:
        chunks = self._translate(event, data)
        if self._raw and isinstance(data, dict):
            chunks.insert(0, {RAW: (event or data.get("type"), data)})
        return chunks

    def _chunk(self, delta: JSON, finish: str | None = None) -> JSON:
        return {
            "id": self._id,
            "object": "chat.completion.chunk",
            "created": self._created,
            "model": self._model,
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
        }

    def _position(self, data: JSON) -> int | None:
        for key in (data.get("item_id"), ("index", data.get("output_index"))):
            if key in self._calls:
                return self._calls[key]
        return None

    def _translate(self, event: str | None, data: Any) -> list[JSON]:
        if data == DONE or not isinstance(data, dict):
            return []
        kind = data.get("type") or event
        if kind in ("error", "response.failed"):
            raise StreamErrorEvent(_stream_error(data))
        field = _DELTAS.get(str(kind))
        if field is not None:
            return [self._chunk({field: str(data.get("delta") or "")})]
        if kind in ("response.created", "response.in_progress"):
            return self._start(_dict(data.get("response")), str(kind))
        handler = {
            "response.completed": self._end,
            "response.incomplete": self._end,
            "response.output_item.added": self._added,
            "response.function_call_arguments.delta": self._arguments,
            "response.custom_tool_call_input.delta": self._arguments,
            "response.output_item.done": self._item_done,
        }.get(str(kind))
        # every other event (parts added and done, text done, ...) carries nothing new
        return handler(data) if handler is not None else []

    def _start(self, response: JSON, kind: str) -> list[JSON]:
        if response.get("id"):
            self._id = f"chatcmpl-{response['id']}"
        if response.get("model"):
            self._model = str(response["model"])
        if isinstance(response.get("created_at"), int):
            self._created = response["created_at"]
        if kind == "response.created":
            return [self._chunk({"role": "assistant", "content": ""})]
        return []

    def _added(self, data: JSON) -> list[JSON]:
        item = _dict(data.get("item"))
        if item.get("type") not in ("function_call", "custom_tool_call"):
            return []
        position = self._count
        self._count += 1
        if item.get("id"):
            self._calls[item["id"]] = position
        self._calls[("index", data.get("output_index"))] = position
        call = {
            "index": position,
            "id": item.get("call_id") or item.get("id"),
            "type": "function",
            "function": {"name": item.get("name"), "arguments": ""},
        }
        return [self._chunk({"tool_calls": [call]})]

    def _arguments(self, data: JSON) -> list[JSON]:
        position = self._position(data)
        delta = data.get("delta")
        if position is None or not isinstance(delta, str) or not delta:
            return []
        self._args_seen.add(position)
        call = {"index": position, "function": {"arguments": delta}}
        return [self._chunk({"tool_calls": [call]})]

    def _item_done(self, data: JSON) -> list[JSON]:
        """A call whose arguments came only whole, on its ``done`` item."""
        item = _dict(data.get("item"))
        position = self._position({**data, "item_id": item.get("id")})
        if position is None or position in self._args_seen:
            return []
        arguments = _call(item)["function"]["arguments"]
        self._args_seen.add(position)
        call = {"index": position, "function": {"arguments": arguments}}
        return [self._chunk({"tool_calls": [call]})]

    def _end(self, data: JSON) -> list[JSON]:
        response = _dict(data.get("response"))
        self._finished = True
        self._start(response, "")
        finish = finish_reason(response, self._count > 0)
        chunks = [self._chunk({}, finish)]
        if isinstance(response.get("usage"), dict):
            usage = self._chunk({})
            usage["choices"] = []
            usage["usage"] = map_usage(response["usage"])
            chunks.append(usage)
        return chunks


class OpenAIResponsesDialect(OpenAIDialect):
    """``kind: openai`` with ``wire: responses``: ``{base}/responses``; embeddings
    and legacy completions as the chat wire has them."""

    wire = "responses"
    label = "OpenAI Responses"
    surfaces = frozenset({"responses"})

    def build_request(
        self,
        *,
        base_url: str,
        api_key: str | None,
        model: str,
        body: JSON,
        stream: bool,
        auth: Auth | None = None,
    ) -> UpstreamCall:
        return UpstreamCall(
            url=endpoint_url(base_url, "/responses"),
            headers=self.headers(api_key, auth),
            body=responses_body(body, model=model, stream=stream),
        )

    def parse_completion(self, payload: Any, *, created: int) -> JSON:
        return parse_response(payload, created=created)

    def passthrough_request(
        self,
        *,
        base_url: str,
        api_key: str | None,
        model: str,
        body: JSON,
        stream: bool,
        forward: tuple[tuple[str, str], ...],
        surface: str = "responses",
        auth: Auth | None = None,
    ) -> UpstreamCall:
        """A Responses request as the client sent it (the conversation of a
        ``previous_response_id`` already rebuilt into ``input``): only ``model``
        changes, and ``store`` is false (09 §3.4); reasoning items whose
        ``encrypted_content`` the gateway made for an Anthropic turn are left out
        (``anthropic_thinking.without_own_reasoning``)."""
        upstream = {**body, "model": model, "store": False}
        items = body.get("input")
        kept = without_own_reasoning(items)
        if kept is not items:
            upstream["input"] = kept
        if stream:
            upstream["stream"] = True
        else:
            upstream.pop("stream", None)
        return UpstreamCall(
            url=endpoint_url(base_url, "/responses"),
            headers=self.headers(api_key, auth),
            body=upstream,
            passthrough=True,
        )

    def stream_translator(self, *, created: int, raw: bool = False) -> StreamTranslator:
        return ResponsesStreamTranslator(created=created, raw=raw)

    def parse_error(
        self, payload: Any, text: str, headers: Mapping[str, str] | None = None
    ) -> UpstreamError:
        return error_from_payload(payload, text)


class MockResponsesDialect(OpenAIResponsesDialect):
    """The built-in ``mock`` kind with ``wire: responses``, answered in-process."""

    kind = "mock"
    label = "Built-in mock (in-process), Responses"
    needs_base_url = False
    catalog = False
    in_process = True
