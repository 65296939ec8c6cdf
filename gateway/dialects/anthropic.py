"""Anthropic Messages API dialect (``anthropic-version: 2023-06-01``).

Clients only ever see OpenAI Chat Completions shapes, so this module translates both
ways.

Request (OpenAI chat body -> ``POST {base_url}/messages``, ``/v1`` added to a
base URL without a path):

1. ``system``/``developer`` messages, wherever they sit, are lifted into the top-level
   ``system`` (texts joined with a blank line; a list of text blocks instead when a
   part carries ``cache_control``, which is kept).
2. Every other message becomes a list of content blocks: ``text`` and ``image``
   (``data:`` URLs as base64 sources, http(s) URLs as url sources), assistant
   ``tool_calls`` as ``tool_use`` blocks (arguments that are not a JSON object become
   ``{}``), and ``tool`` messages as ``tool_result`` blocks in a user turn.
3. Consecutive turns of one role are merged, because Anthropic requires alternation;
   inside a user turn the ``tool_result`` blocks go first, as Anthropic requires.
   Empty text parts and turns left without blocks are dropped.
4. ``tools``/``tool_choice``/``parallel_tool_calls`` are translated (the choice only
   when tools are sent, since Anthropic rejects a choice without tools), ``max_tokens``
   is always set (Anthropic requires it: ``max_completion_tokens``, ``max_tokens``,
   else 4096), ``stop`` becomes ``stop_sequences``, ``user`` becomes
   ``metadata.user_id`` and ``temperature`` is capped at Anthropic's maximum of 1.

5. ``reasoning_effort`` becomes ``thinking`` with a token budget by level (the
   gateway sends it only to a model known to reason, spec 09 §2.6), with room left
   for the answer, and not in a tool turn that lost its signed thinking
   (``anthropic_thinking``; ``reasoning_effort`` is named then);
   ``temperature``/``top_k`` (which thinking refuses) are left out with it.  An
   assistant message's ``thinking_blocks`` go first in its content.

Left out of the attempt and named (``UNSENT``, spec 09 §2.6), when the client set
them to a value that asks for something: ``response_format`` (Anthropic has no JSON
mode; the instructions in the prompt still apply), ``n`` above 1, ``seed``,
``presence_penalty``/``frequency_penalty`` other than 0, ``logprobs``,
``top_logprobs``, ``logit_bias``, legacy ``functions``, ``web_search_options``,
``audio``/``modalities``, ``verbosity``; content parts other than text and images
(``messages[i].content[j]``; in system and tool messages, anything but text), tools
other than functions (``tools[i]``).  Fields that change nothing in the answer
(``metadata``, ``store``, ``service_tier``, ...) are left out silently.

Reply: text blocks are joined into ``content`` (``None`` when the reply is only tool
calls), ``tool_use`` blocks become ``tool_calls``, ``thinking`` blocks become
``reasoning_content`` and, signed, ``thinking_blocks`` (a stream hands each over
whole when it ends).  Stream events become ``chat.completion.chunk`` objects, ending
with one usage-only chunk at ``message_stop``.  Usage always counts cache reads and
cache writes inside ``prompt_tokens`` and keeps ``cache_creation_input_tokens`` beside
it, because the gateway bills cache writes from that key.

Invariants: ``build_request`` never mutates its body; the API key appears only in the
``x-api-key`` header; a chunk's id is ``chatcmpl-`` + the message id, as is the
completion's, so a client sees the same id either way.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any
from urllib.parse import unquote_to_bytes

from gateway.dialects.anthropic_thinking import (
    DEFAULT_MAX_TOKENS,
    MIN_THINKING_TOP_P,
    client_max_tokens,
    drop_unthought_thinking,
    signed_blocks,
    thinking_fit,
)
from gateway.dialects.anthropic_thinking import unsent as thinking_unsent
from gateway.dialects.base import (
    API_KEY,
    JSON,
    RAW,
    BadUpstreamResponse,
    CredentialShape,
    EventDecoder,
    NoEmbeddings,
    StreamErrorEvent,
    UpstreamCall,
    endpoint_url,
    sse_decoder,
)
from gateway.dialects.carry import (
    OPENAI_ONLY,
    SAMPLING_EXTRAS,
    Carry,
    arguments_object,
    not_text_format,
    text_or,
)
from gateway.dialects.openai import model_ids
from gateway.dialects.tool_ids import ANTHROPIC_IDS, fit_messages
from gateway.kernel.errors import UpstreamError
from gateway.kernel.ratelimits import PREFIXES as RATELIMIT_PREFIXES
from gateway.kernel.sse import DONE
from gateway.kernel.text import text_of
from gateway.kernel.types import Auth

ANTHROPIC_VERSION = "2023-06-01"
MAX_TEMPERATURE = 1.0  # Anthropic's range is 0..1, OpenAI's 0..2
ERROR_TEXT_MAX_CHARS = 2000
DEFAULT_IMAGE_MEDIA_TYPE = "image/png"

_FINISH_REASONS: dict[str, str] = {
    "end_turn": "stop",
    "stop_sequence": "stop",
    "max_tokens": "length",
    "model_context_window_exceeded": "length",
    "tool_use": "tool_calls",
    "refusal": "content_filter",
}
_SYSTEM_ROLES = frozenset({"system", "developer"})
_TOOL_CHOICES: dict[str, str] = {"auto": "auto", "required": "any", "none": "none"}


# --- request --------------------------------------------------------------------


def _with_cache_control(block: JSON, part: JSON) -> JSON:
    cache_control = part.get("cache_control")
    if isinstance(cache_control, dict):
        block["cache_control"] = dict(cache_control)
    return block


def _image_source(url: str) -> JSON:
    if not url.startswith("data:"):
        return {"type": "url", "url": url}
    header, _, payload = url[len("data:") :].partition(",")
    media_type, *params = header.split(";")
    if "base64" in params:
        data = payload
    else:
        data = base64.b64encode(unquote_to_bytes(payload)).decode("ascii")
    return {
        "type": "base64",
        "media_type": media_type or DEFAULT_IMAGE_MEDIA_TYPE,
        "data": data,
    }


def _text_block(part: JSON, text: Any) -> JSON | None:
    if not isinstance(text, str) or not text:
        return None  # Anthropic rejects empty text blocks
    return _with_cache_control({"type": "text", "text": text}, part)


def _image_block(part: JSON) -> JSON | None:
    image = part.get("image_url")
    url = image.get("url") if isinstance(image, dict) else image
    if not isinstance(url, str) or not url:
        return None
    return _with_cache_control({"type": "image", "source": _image_source(url)}, part)


def _part_block(part: Any) -> JSON | None:
    """One OpenAI content part -> one Anthropic block, or None when it has none."""
    if isinstance(part, str):
        return _text_block({}, part)
    if not isinstance(part, dict):
        return None
    kind = part.get("type")
    if kind in ("text", "refusal"):
        return _text_block(part, part.get(kind))
    if kind == "image_url":
        return _image_block(part)
    return None


def _content_blocks(content: Any) -> list[JSON]:
    parts = content if isinstance(content, list) else [content]
    return [block for part in parts if (block := _part_block(part)) is not None]


def _tool_use_blocks(tool_calls: Any) -> list[JSON]:
    blocks: list[JSON] = []
    for call in tool_calls if isinstance(tool_calls, list) else []:
        function = call.get("function") if isinstance(call, dict) else None
        if not isinstance(function, dict):
            continue
        blocks.append(
            {
                "type": "tool_use",
                "id": str(call.get("id") or ""),
                "name": str(function.get("name") or ""),
                "input": arguments_object(function.get("arguments")),
            }
        )
    return blocks


def _turn(message: JSON) -> tuple[str, list[JSON]] | None:
    """A non-system OpenAI message -> (Anthropic role, blocks), None when unknown."""
    role = message.get("role")
    if role == "tool":
        text = text_of(message.get("content"), "\n\n")
        result: JSON = {
            "type": "tool_result",
            "tool_use_id": str(message.get("tool_call_id") or ""),
            "content": text,
        }
        if message.get("is_error") is True:  # a Messages client's failed result
            result["is_error"] = True
            result["content"] = "" if text == "Error" else text.removeprefix("Error: ")
        return "user", [result]
    if role == "assistant":
        blocks = signed_blocks(message.get("thinking_blocks"))
        blocks += _content_blocks(message.get("content"))
        return "assistant", blocks + _tool_use_blocks(message.get("tool_calls"))
    if role == "user":
        return "user", _content_blocks(message.get("content"))
    return None


def _system_blocks(content: Any) -> list[JSON]:
    return [block for block in _content_blocks(content) if block["type"] == "text"]


def _translate_messages(messages: Any) -> tuple[list[JSON], list[JSON]]:
    """OpenAI messages -> (system text blocks, alternating Anthropic messages)."""
    system: list[JSON] = []
    turns: list[JSON] = []
    for message in messages if isinstance(messages, list) else []:
        if not isinstance(message, dict):
            continue
        if message.get("role") in _SYSTEM_ROLES:
            system.extend(_system_blocks(message.get("content")))
            continue
        turn = _turn(message)
        if turn is None or not turn[1]:
            continue
        role, blocks = turn
        if turns and turns[-1]["role"] == role:
            turns[-1]["content"].extend(blocks)
        else:
            turns.append({"role": role, "content": blocks})
    for turn_ in turns:
        if turn_["role"] == "user":
            # Stable: tool results first, everything else keeps its order.
            turn_["content"].sort(key=lambda block: block["type"] != "tool_result")
    return system, turns


def _render_system(blocks: list[JSON]) -> str | list[JSON]:
    if any("cache_control" in block for block in blocks):
        return blocks
    return "\n\n".join(block["text"] for block in blocks)


def _translate_tools(tools: Any) -> list[JSON]:
    translated: list[JSON] = []
    for tool in tools if isinstance(tools, list) else []:
        if not isinstance(tool, dict) or tool.get("type", "function") != "function":
            continue
        function = tool.get("function")
        if not isinstance(function, dict) or not function.get("name"):
            continue
        parameters = function.get("parameters")
        entry: JSON = {"name": str(function["name"])}
        if function.get("description"):
            entry["description"] = str(function["description"])
        entry["input_schema"] = (
            parameters
            if isinstance(parameters, dict)
            else {"type": "object", "properties": {}}
        )
        translated.append(entry)
    return translated


def _translate_tool_choice(choice: Any, parallel_tool_calls: Any) -> JSON | None:
    translated: JSON | None = None
    if isinstance(choice, str) and choice in _TOOL_CHOICES:
        translated = {"type": _TOOL_CHOICES[choice]}
    elif isinstance(choice, dict):
        function = choice.get("function")
        name = function.get("name") if isinstance(function, dict) else None
        if isinstance(name, str) and name:
            translated = {"type": "tool", "name": name}
    if parallel_tool_calls is False:
        translated = translated or {"type": "auto"}
        if translated["type"] != "none":
            translated["disable_parallel_tool_use"] = True
    return translated


def _sampling(body: JSON) -> JSON:
    """Sampling and stop fields that Anthropic understands, renamed where needed."""
    limit = client_max_tokens(body)
    out: JSON = {"max_tokens": DEFAULT_MAX_TOKENS if limit is None else limit}
    temperature = body.get("temperature")
    if isinstance(temperature, int | float) and not isinstance(temperature, bool):
        out["temperature"] = min(temperature, MAX_TEMPERATURE)
    for key in ("top_p", "top_k"):
        if body.get(key) is not None:
            out[key] = body[key]
    stop = body.get("stop")
    stops = [stop] if isinstance(stop, str) else stop
    if isinstance(stops, list):
        sequences = [item for item in stops if isinstance(item, str) and item]
        if sequences:
            out["stop_sequences"] = sequences
    user = body.get("user")
    if isinstance(user, str) and user:
        out["metadata"] = {"user_id": user}
    return out


def _thinking(upstream: JSON, body: JSON) -> None:
    """``thinking`` for the body's ``reasoning_effort``, with room for the answer
    and not in a tool turn that lost its thinking (``anthropic_thinking``)."""
    fit = thinking_fit(body)
    if fit is None:
        return  # "none", an unknown level, no room, or an unthought tool turn
    budget, upstream["max_tokens"] = fit
    upstream["thinking"] = {"type": "enabled", "budget_tokens": budget}
    upstream.pop("temperature", None)
    upstream.pop("top_k", None)
    top_p = upstream.get("top_p")
    if isinstance(top_p, int | float) and top_p < MIN_THINKING_TOP_P:
        upstream.pop("top_p")


#: what ``build_messages_body`` cannot carry, named per attempt (spec 09 §2.6): the
#: fields Anthropic has no counterpart for, parts other than text and images, images
#: and files outside user and assistant turns, tools other than functions
UNSENT = Carry(
    fields=MappingProxyType(
        {**OPENAI_ONLY, **SAMPLING_EXTRAS, "response_format": not_text_format}
    ),
    part=text_or(frozenset({"image_url"})),
    whole=thinking_unsent,
)


def build_messages_body(body: JSON, *, model: str, stream: bool) -> JSON:
    """An OpenAI chat request -> an Anthropic Messages request (a new dict)."""
    # ids another upstream made may break Anthropic's pattern (tool_ids)
    system, messages = _translate_messages(
        fit_messages(body.get("messages"), ANTHROPIC_IDS)
    )
    upstream: JSON = {"model": model, "messages": messages}
    if system:
        upstream["system"] = _render_system(system)
    upstream.update(_sampling(body))
    if body.get("reasoning_effort") is not None:
        _thinking(upstream, body)
    tools = _translate_tools(body.get("tools"))
    if tools:
        upstream["tools"] = tools
        choice = _translate_tool_choice(
            body.get("tool_choice"), body.get("parallel_tool_calls")
        )
        if choice is not None:
            upstream["tool_choice"] = choice
    if stream:
        upstream["stream"] = True
    return upstream


# --- reply ----------------------------------------------------------------------


def map_stop_reason(stop_reason: Any) -> str:
    """Anthropic ``stop_reason`` -> OpenAI ``finish_reason`` (unknown -> ``stop``)."""
    if isinstance(stop_reason, str):
        return _FINISH_REASONS.get(stop_reason, "stop")
    return "stop"


def _count(usage: JSON, key: str) -> int:
    value = usage.get(key)
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def map_usage(usage: JSON) -> JSON:
    """Anthropic usage -> OpenAI usage; prompt tokens include cache reads and writes."""
    cache_read = _count(usage, "cache_read_input_tokens")
    cache_creation = _count(usage, "cache_creation_input_tokens")
    prompt = _count(usage, "input_tokens") + cache_read + cache_creation
    completion = _count(usage, "output_tokens")
    return {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
        "prompt_tokens_details": {"cached_tokens": cache_read},
        "cache_creation_input_tokens": cache_creation,
    }


def _completion_id(message_id: Any) -> str:
    return f"chatcmpl-{message_id or ''}"


def _reply_message(content: list[Any]) -> JSON:
    texts: list[str] = []
    thinking: list[str] = []
    tool_calls: list[JSON] = []
    for block in content:
        kind = block.get("type") if isinstance(block, dict) else None
        if kind == "text":
            texts.append(str(block.get("text") or ""))
        elif kind == "thinking":
            thinking.append(str(block.get("thinking") or ""))
        elif kind == "tool_use":
            arguments = json.dumps(block.get("input") or {})
            function = {"name": block.get("name"), "arguments": arguments}
            tool_calls.append(
                {"id": block.get("id"), "type": "function", "function": function}
            )
    text: str | None = "".join(texts)
    if not texts and tool_calls:
        text = None
    message: JSON = {"role": "assistant", "content": text}
    if tool_calls:
        message["tool_calls"] = tool_calls
    if thinking:
        message["reasoning_content"] = "".join(thinking)
    signed = signed_blocks(content)
    if signed:  # sent back by the client, they keep a tool turn's thinking
        message["thinking_blocks"] = signed
    return message


def parse_messages_reply(payload: Any, *, created: int) -> JSON:
    """An Anthropic ``message`` object -> an OpenAI ``chat.completion``."""
    if not isinstance(payload, dict):
        raise BadUpstreamResponse("completion is not a JSON object")
    if payload.get("type") == "error" or payload.get("error") is not None:
        raise BadUpstreamResponse("completion carries an error object")
    content = payload.get("content")
    if not isinstance(content, list):
        raise BadUpstreamResponse("completion has no content list")
    completion: JSON = {
        "id": _completion_id(payload.get("id")),
        "object": "chat.completion",
        "created": created,
        "model": payload.get("model"),
        "choices": [
            {
                "index": 0,
                "message": _reply_message(content),
                "finish_reason": map_stop_reason(payload.get("stop_reason")),
            }
        ],
    }
    usage = payload.get("usage")
    if isinstance(usage, dict):
        completion["usage"] = map_usage(usage)
    return completion


def error_from_payload(payload: Any, text: str) -> UpstreamError:
    """``{"type": "error", "error": {"type", "message"}}`` -> ``UpstreamError``."""
    error = payload.get("error") if isinstance(payload, dict) else None
    if isinstance(error, str):
        return UpstreamError(message=error)
    if isinstance(error, dict):
        kind = error.get("type")
        return UpstreamError(
            message=str(error.get("message") or ""),
            type=str(kind) if kind is not None else None,
        )
    return UpstreamError(message=text[:ERROR_TEXT_MAX_CHARS])


# --- stream ---------------------------------------------------------------------


class AnthropicStreamTranslator:
    """Anthropic stream events -> OpenAI chunks for one attempt.

    Tool calls are numbered from 0 in the order their ``tool_use`` blocks start; the
    map from Anthropic block index to that number routes each ``input_json_delta``.
    """

    __slots__ = (
        "_created",
        "_finished",
        "_id",
        "_model",
        "_raw",
        "_thoughts",
        "_tools",
        "_usage",
    )

    def __init__(self, *, created: int, raw: bool = False) -> None:
        self._raw = raw
        self._created = created
        self._finished = False
        self._id = _completion_id(None)
        self._model = ""
        self._tools: dict[Any, int] = {}
        #: block index -> the thinking block being streamed (text and signature)
        self._thoughts: dict[Any, JSON] = {}
        self._usage: JSON = {}

    @property
    def finished(self) -> bool:
        return self._finished

    def partial_usage(self) -> JSON | None:
        """``message_start``'s input counts (and any output count since)."""
        return map_usage(self._usage) if self._usage else None

    def translate(self, event: str | None, data: Any) -> list[JSON]:
        chunks = self._translate(event, data)
        if self._raw and isinstance(data, dict):
            # the event as received first: a passthrough relays it, accounting reads
            # the chunks made of it
            chunks.insert(0, {RAW: (event or data.get("type"), data)})
        return chunks

    def _translate(self, event: str | None, data: Any) -> list[JSON]:
        if data == DONE or not isinstance(data, dict):
            return []
        kind = event or data.get("type")
        if kind == "error":
            raise StreamErrorEvent(error_from_payload(data, json.dumps(data)))
        if kind == "message_stop":
            self._finished = True
            return [self._usage_chunk()]
        handlers = {
            "message_start": self._on_message_start,
            "content_block_start": self._on_block_start,
            "content_block_delta": self._on_block_delta,
            "content_block_stop": self._on_block_stop,
            "message_delta": self._on_message_delta,
        }
        handler = handlers.get(kind) if isinstance(kind, str) else None
        # ping and any future event carry nothing for a client
        return handler(data) if handler is not None else []

    def _chunk(self, delta: JSON, finish_reason: str | None = None) -> JSON:
        return {
            "id": self._id,
            "object": "chat.completion.chunk",
            "created": self._created,
            "model": self._model,
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish_reason}],
        }

    def _usage_chunk(self) -> JSON:
        chunk = self._chunk({})
        chunk["choices"] = []
        chunk["usage"] = map_usage(self._usage)
        return chunk

    def _record_usage(self, usage: Any) -> None:
        if isinstance(usage, dict):
            self._usage.update(
                (key, value) for key, value in usage.items() if isinstance(value, int)
            )

    def _on_message_start(self, data: JSON) -> list[JSON]:
        message = data.get("message")
        message = message if isinstance(message, dict) else {}
        self._id = _completion_id(message.get("id"))
        self._model = str(message.get("model") or "")
        self._record_usage(message.get("usage"))
        return [self._chunk({"role": "assistant", "content": ""})]

    def _on_block_start(self, data: JSON) -> list[JSON]:
        block = data.get("content_block")
        block = block if isinstance(block, dict) else {}
        kind = block.get("type")
        if kind == "text" and block.get("text"):
            return [self._chunk({"content": block["text"]})]
        if kind == "thinking":
            self._thoughts[data.get("index")] = {
                "type": "thinking",
                "thinking": str(block.get("thinking") or ""),
                "signature": str(block.get("signature") or ""),
            }
            return []
        if kind == "redacted_thinking":
            redacted = signed_blocks([block])
            return [self._chunk({"thinking_blocks": redacted})] if redacted else []
        if kind != "tool_use":
            return []
        position = len(self._tools)
        self._tools[data.get("index")] = position
        call = {
            "index": position,
            "id": block.get("id"),
            "type": "function",
            "function": {"name": block.get("name"), "arguments": ""},
        }
        return [self._chunk({"tool_calls": [call]})]

    def _on_block_delta(self, data: JSON) -> list[JSON]:
        delta = data.get("delta")
        delta = delta if isinstance(delta, dict) else {}
        kind = delta.get("type")
        if kind == "text_delta":
            return [self._chunk({"content": delta.get("text", "")})]
        if kind == "thinking_delta":
            text = delta.get("thinking", "")
            thought = self._thoughts.get(data.get("index"))
            if thought is not None and isinstance(text, str):
                thought["thinking"] += text
            return [self._chunk({"reasoning_content": text})]
        if kind == "signature_delta":
            thought = self._thoughts.get(data.get("index"))
            signature = delta.get("signature")
            if thought is not None and isinstance(signature, str):
                thought["signature"] += signature
            return []
        if kind == "input_json_delta":
            position = self._tools.get(data.get("index"))
            if position is None:
                return []
            call = {
                "index": position,
                "function": {"arguments": delta.get("partial_json", "")},
            }
            return [self._chunk({"tool_calls": [call]})]
        return []  # citations_delta

    def _on_block_stop(self, data: JSON) -> list[JSON]:
        """A finished thinking block goes to the client whole, with its signature,
        as the delta's ``thinking_blocks`` (``anthropic_thinking``)."""
        thought = self._thoughts.pop(data.get("index"), None)
        signed = signed_blocks([thought]) if thought is not None else []
        return [self._chunk({"thinking_blocks": signed})] if signed else []

    def _on_message_delta(self, data: JSON) -> list[JSON]:
        self._record_usage(data.get("usage"))
        delta = data.get("delta")
        stop_reason = delta.get("stop_reason") if isinstance(delta, dict) else None
        return [self._chunk({}, map_stop_reason(stop_reason))]


def _unsigned(block: Any) -> bool:
    return (
        isinstance(block, dict)
        and block.get("type") == "thinking"
        and not block.get("signature")
    )


def signed_thinking_only(body: JSON) -> None:
    """Leave out of a Messages body's assistant turns the ``thinking`` blocks that
    carry no signature: Anthropic verifies a thinking block's signature and refuses
    the request without one.  Such blocks come from replies the gateway translated
    (a Gemini model's thoughts shown to a Messages client), not from Anthropic, and
    carry no user content (spec 09 §2.6: reasoning without a counterpart is dropped
    silently).  ``body`` is the attempt's own copy; its ``messages`` list is
    replaced only when a block is left out.  Then ``thinking`` is left out of a
    body that continues a tool turn without its thinking block, which Anthropic
    refuses (``anthropic_thinking``)."""
    messages = body.get("messages")
    if not isinstance(messages, list):
        return
    kept: list[Any] | None = None
    for index, message in enumerate(messages):
        content = message.get("content") if isinstance(message, dict) else None
        if (
            not isinstance(content, list)  # also: not a dict
            or message.get("role") != "assistant"
            or not any(_unsigned(block) for block in content)
        ):
            if kept is not None:
                kept.append(message)
            continue
        if kept is None:
            kept = list(messages[:index])
        kept.append({**message, "content": [b for b in content if not _unsigned(b)]})
    if kept is not None:
        body["messages"] = kept
    # a tool turn whose thinking was left out (or never came) can't ask for thinking
    drop_unthought_thinking(body)


class AnthropicDialect(NoEmbeddings):
    kind = "anthropic"
    label = "Anthropic Messages"
    needs_base_url = True
    catalog = True
    reasoning_effort = False
    in_process = False
    ratelimit_prefixes: tuple[str, ...] = RATELIMIT_PREFIXES
    surfaces = frozenset({"messages"})
    wire = "chat"
    counts_tokens = True
    credentials: CredentialShape = API_KEY

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
        headers = {
            "content-type": "application/json",
            "anthropic-version": ANTHROPIC_VERSION,
        }
        if api_key:
            headers["x-api-key"] = api_key
        return UpstreamCall(
            url=endpoint_url(base_url, "/messages"),
            headers=headers,
            body=build_messages_body(body, model=model, stream=stream),
        )

    def parse_completion(self, payload: Any, *, created: int) -> JSON:
        return parse_messages_reply(payload, created=created)

    def passthrough_request(
        self,
        *,
        base_url: str,
        api_key: str | None,
        model: str,
        body: JSON,
        stream: bool,
        forward: tuple[tuple[str, str], ...],
        surface: str = "messages",
        auth: Auth | None = None,
    ) -> UpstreamCall:
        """A Messages request as the client sent it: only ``model`` changes, and the
        client's ``anthropic-version`` and ``anthropic-beta`` go along (09 §2.5)."""
        headers = {
            "content-type": "application/json",
            "anthropic-version": ANTHROPIC_VERSION,
        }
        headers.update(forward)
        if api_key:
            headers["x-api-key"] = api_key
        upstream = {**body, "model": model}
        signed_thinking_only(upstream)
        if stream:
            upstream["stream"] = True
        else:
            upstream.pop("stream", None)
        return UpstreamCall(
            url=endpoint_url(base_url, "/messages"),
            headers=headers,
            body=upstream,
            passthrough=True,
        )

    def count_tokens_request(
        self,
        *,
        base_url: str,
        api_key: str | None,
        model: str,
        body: JSON,
        forward: tuple[tuple[str, str], ...],
        auth: Auth | None = None,
    ) -> UpstreamCall:
        """The client's count_tokens body as sent (only ``model`` changes), with its
        ``anthropic-version`` and ``anthropic-beta`` (09 §4.5)."""
        call = self.passthrough_request(
            base_url=base_url,
            api_key=api_key,
            model=model,
            body=body,
            stream=False,
            forward=forward,
            auth=auth,
        )
        return UpstreamCall(
            url=endpoint_url(base_url, "/messages/count_tokens"),
            headers=call.headers,
            body=call.body,
            passthrough=True,
            operation="count_tokens",
        )

    def list_models_request(
        self, *, base_url: str, api_key: str | None, auth: Auth | None = None
    ) -> UpstreamCall:
        headers = {"anthropic-version": ANTHROPIC_VERSION}
        if api_key:
            headers["x-api-key"] = api_key
        return UpstreamCall(
            url=endpoint_url(base_url, "/models?limit=1000"),
            headers=headers,
            body={},
            method="GET",
            operation="models",
        )

    def parse_model_list(self, payload: Any) -> list[str]:
        return model_ids(payload)

    def stream_decoder(self) -> EventDecoder:
        return sse_decoder()

    def connection_base_url(self, base_url: str, auth: Auth | None) -> str | None:
        return None

    def stream_translator(
        self, *, created: int, raw: bool = False
    ) -> AnthropicStreamTranslator:
        return AnthropicStreamTranslator(created=created, raw=raw)

    def parse_error(
        self, payload: Any, text: str, headers: Mapping[str, str] | None = None
    ) -> UpstreamError:
        return error_from_payload(payload, text)
