"""The legacy Completions wire: ``POST /v1/completions`` (spec 09 §6).

* **Body -> ``ChatRequest``**: ``model``, ``prompt`` (a string or a list of strings),
  ``max_tokens``, ``temperature``, ``top_p``, ``n``, ``stop``, ``stream``
  (``stream_options``), ``suffix``, ``echo``, ``logprobs``, ``user``, validated with
  their own names.  The canonical chat body has the prompt as one user message.  An
  OpenAI-kind upstream gets the client's body by passthrough (``/completions``);
  any other is translated, and what it cannot carry (``suffix``, ``echo``,
  ``logprobs``, unknown fields) is named in ``X-OmniRoute-Dropped``.  Several prompts
  are one passthrough call (a choice per prompt): a candidate that would need a
  translation is skipped as a ``capability_mismatch`` of ``prompt``.
* **Result -> bytes**: the ``text_completion`` object (the upstream's own on a
  passthrough) with the ``omniroute`` report; streams of ``text_completion`` chunks
  ending with ``data: [DONE]``, the report on the finish chunk (on the usage chunk
  with ``stream_options.include_usage``), as on the chat wire (09 §7).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from gateway.inbound.base import (
    SSE_HEADERS,
    JSONReply,
    Pipelined,
    Reply,
    StreamReply,
    bearer_or_api_key,
    openai_error,
)
from gateway.inbound.chat import (
    GATEWAY_FIELDS,
    ChatStream,
    chat_request,
    json_reply,
    model_sent,
    parse_body,
)
from gateway.kernel.exchange import ChatRequest, RequestError
from gateway.pipeline.result import Answer, Failure, Result, Streamed, StreamEnd

#: fields of a Completions body; those of ``_LEGACY`` only a passthrough carries
_KNOWN = frozenset(
    {
        "model",
        "prompt",
        "max_tokens",
        "temperature",
        "top_p",
        "n",
        "stop",
        "stream",
        "stream_options",
        "suffix",
        "echo",
        "logprobs",
        "user",
        "presence_penalty",
        "frequency_penalty",
        "seed",
        "logit_bias",
        "best_of",
    }
)
_LEGACY = ("suffix", "echo", "logprobs", "best_of")
#: copied into the canonical chat body under the same name
_CHAT = (
    "max_tokens",
    "temperature",
    "top_p",
    "n",
    "stop",
    "stream",
    "stream_options",
    "user",
    "presence_penalty",
    "frequency_penalty",
    "seed",
    "logit_bias",
)
MAX_PROMPTS = 2048
MAX_LOGPROBS = 5


def _invalid(code: str, param: str, message: str) -> RequestError:
    return RequestError(400, code, message, param=param)


def _prompts(body: dict[str, Any]) -> list[str]:
    prompt = body.get("prompt")
    if prompt is None:
        raise _invalid("missing_parameter", "prompt", "'prompt' is required")
    if isinstance(prompt, str):
        return [prompt]
    if not isinstance(prompt, list):
        raise _invalid(
            "invalid_type", "prompt", "'prompt' must be a string or a list of strings"
        )
    if not 1 <= len(prompt) <= MAX_PROMPTS:
        raise _invalid(
            "invalid_value", "prompt", f"'prompt' must hold 1..{MAX_PROMPTS} strings"
        )
    for index, item in enumerate(prompt):
        if not isinstance(item, str):
            raise _invalid(
                "invalid_type",
                f"prompt[{index}]",
                f"'prompt[{index}]' must be a string",
            )
    return list(prompt)


def _check_legacy(body: dict[str, Any]) -> None:
    suffix = body.get("suffix")
    if suffix is not None and not isinstance(suffix, str):
        raise _invalid("invalid_type", "suffix", "'suffix' must be a string")
    echo = body.get("echo")
    if echo is not None and not isinstance(echo, bool):
        raise _invalid("invalid_type", "echo", "'echo' must be a boolean")
    logprobs = body.get("logprobs")
    if logprobs is not None and (
        isinstance(logprobs, bool)
        or not isinstance(logprobs, int)
        or not 0 <= logprobs <= MAX_LOGPROBS
    ):
        raise _invalid(
            "invalid_value",
            "logprobs",
            f"'logprobs' must be an integer 0..{MAX_LOGPROBS}",
        )


def _carried_only_by_passthrough(body: dict[str, Any]) -> list[str]:
    """What a translated attempt leaves out (09 §2.6): the legacy-only options a
    client set, and unknown fields."""
    dropped = [name for name in _LEGACY if body.get(name) not in (None, False, "", 0)]
    dropped += [
        name for name in body if name not in _KNOWN and name not in GATEWAY_FIELDS
    ]
    return dropped


def parse_completions_request(raw: bytes) -> ChatRequest:
    body = parse_body(raw)
    prompts = _prompts(body)
    _check_legacy(body)
    chat: dict[str, Any] = {k: body[k] for k in (*GATEWAY_FIELDS, "model") if k in body}
    chat["messages"] = [{"role": "user", "content": prompts[0]}]
    for name in _CHAT:
        if body.get(name) is not None:
            chat[name] = body[name]
    request = chat_request(chat)
    own = {k: v for k, v in body.items() if k not in GATEWAY_FIELDS}
    return dataclasses.replace(
        request,
        dropped=tuple(_carried_only_by_passthrough(body)),
        surface="completions",
        original=own,
        passthrough_only="prompt" if len(prompts) > 1 else None,
    )


def _cmpl_id(value: Any) -> str:
    text = str(value or "")
    return (
        "cmpl-" + text.removeprefix("chatcmpl-")
        if not text.startswith("cmpl-")
        else text
    )


def text_completion_of(completion: dict[str, Any]) -> dict[str, Any]:
    """A canonical ``chat.completion`` as a ``text_completion`` object."""
    choices = []
    for choice in completion.get("choices") or ():
        if not isinstance(choice, dict):
            continue
        message = choice.get("message")
        content = message.get("content") if isinstance(message, dict) else None
        choices.append(
            {
                "text": content if isinstance(content, str) else "",
                "index": choice.get("index", 0),
                "logprobs": choice.get("logprobs"),
                "finish_reason": choice.get("finish_reason"),
            }
        )
    out: dict[str, Any] = {
        "id": _cmpl_id(completion.get("id")),
        "object": "text_completion",
        "created": completion.get("created"),
        "model": completion.get("model"),
        "choices": choices,
    }
    if isinstance(completion.get("usage"), dict):
        out["usage"] = completion["usage"]
    return out


def _text_chunk(chunk: dict[str, Any]) -> dict[str, Any] | None:
    """A canonical chunk as a ``text_completion`` chunk; None for one that carries
    nothing a Completions client reads (the role chunk)."""
    choices = []
    for choice in chunk.get("choices") or ():
        if not isinstance(choice, dict):
            continue
        delta = choice.get("delta")
        text = delta.get("content") if isinstance(delta, dict) else None
        if not text and not choice.get("finish_reason"):
            continue
        choices.append(
            {
                "text": text if isinstance(text, str) else "",
                "index": choice.get("index", 0),
                "logprobs": choice.get("logprobs"),
                "finish_reason": choice.get("finish_reason"),
            }
        )
    if not choices and "usage" not in chunk:
        return None
    out = {
        "id": _cmpl_id(chunk.get("id")),
        "object": "text_completion",
        "created": chunk.get("created"),
        "model": chunk.get("model"),
        "choices": choices,
    }
    if "usage" in chunk:
        out["usage"] = chunk["usage"]
    return out


class CompletionsStream(ChatStream):
    """The chat wire's stream rules (09 §7) over ``text_completion`` chunks."""

    __slots__ = ()

    def chunks(self, chunks: list[dict[str, Any]]) -> bytes:
        texts = [c for c in (_text_chunk(chunk) for chunk in chunks) if c is not None]
        return super().chunks(texts) if texts else b""

    def base(self, end: StreamEnd) -> dict[str, Any]:
        return {
            "id": _cmpl_id(end.chunk_id),
            "object": "text_completion",
            "created": end.created,
            "model": end.model,
        }

    def empty_choice(self, finish: str) -> dict[str, Any]:
        return {"text": "", "index": 0, "logprobs": None, "finish_reason": finish}


class CompletionsWire(Pipelined):
    """``/v1/completions``: legacy Completions in and out."""

    paths = frozenset({"/v1/completions", "/v1/completions/"})
    surface = "completions"

    def credential(self, headers: Mapping[str, str]) -> str | None:
        return bearer_or_api_key(headers)

    def parse(self, raw: bytes, headers: Mapping[str, str]) -> ChatRequest:
        return parse_completions_request(raw)

    def model_sent(self, raw: bytes) -> str:
        return model_sent(raw)

    def error(self, failure: Failure) -> JSONReply:
        return openai_error(failure)

    def render(self, result: Result) -> Reply:
        if isinstance(result, Answer):
            served = result.completion.get("model")
            if result.raw is not None:  # the upstream's own object (09 §2.5)
                payload = {**result.raw, "model": served, "omniroute": result.report}
            else:
                payload = {
                    **text_completion_of(result.completion),
                    "omniroute": result.report,
                }
            return json_reply(result.status, payload, result.headers)
        if isinstance(result, Failure):
            return self.error(result)
        return self._stream(result)

    def _stream(self, streamed: Streamed) -> StreamReply:
        include_usage = streamed.request.include_usage
        return StreamReply(
            headers=[*SSE_HEADERS, *streamed.headers],
            body=streamed.relay.frames(CompletionsStream(include_usage)),
            status=streamed.status,
        )


WIRE = CompletionsWire()
