"""OpenAI Chat Completions dialect (any OpenAI-compatible upstream).

The body is passed through with only ``model`` replaced by the upstream's model id
and, for streams, ``stream_options.include_usage`` forced on so the gateway always
learns the usage (spec 06 §1.3); the proxy hides the usage-only chunk from clients
that did not ask for it.  A legacy Completions request (spec 09 §6) goes to
``/completions`` by passthrough; its ``text_completion`` answers and chunks are read
as chat ones (``choices[].text`` as the content, ``logprobs`` kept).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from gateway.dialects.anthropic_thinking import without_blocks
from gateway.dialects.base import (
    JSON,
    BadUpstreamResponse,
    CredentialProblem,
    CredentialShape,
    EventDecoder,
    NoCountTokens,
    StreamErrorEvent,
    StreamTranslator,
    UpstreamCall,
    endpoint_url,
    sse_decoder,
)
from gateway.dialects.tool_ids import OPENAI_IDS, fit_body
from gateway.kernel.errors import UpstreamError
from gateway.kernel.ratelimits import PREFIXES as RATELIMIT_PREFIXES
from gateway.kernel.sse import DONE
from gateway.kernel.types import Auth

_MAX_HEADER_NAME = 100
_HEADER_NAME_CHARS = frozenset("!#$%&'*+-.^_`|~0123456789abcdefghijklmnopqrstuvwxyz")


def _check_auth_header(provider: Mapping[str, Any]) -> list[CredentialProblem]:
    header = provider.get("auth_header")
    if header is None:
        return []
    if (
        not isinstance(header, str)
        or not header
        or len(header) > _MAX_HEADER_NAME
        or not set(header.lower()) <= _HEADER_NAME_CHARS
    ):
        return [("auth_header", "must be a header name, or none")]
    return []


#: ``api_key``, sent as ``Authorization: Bearer`` or in the provider's
#: ``auth_header`` (``api-key`` style hosts; ``none``: no key at all; spec 10 §1)
OPENAI_CREDENTIALS = CredentialShape(
    provider_settings=("auth_header",), check_provider=_check_auth_header
)


def error_from_payload(payload: Any, text: str) -> UpstreamError:
    """Read the ``{"error": {...}}``, ``{"error": "..."}`` and bare shapes."""
    if isinstance(payload, dict):
        error = payload.get("error", payload)
        if isinstance(error, str):
            return UpstreamError(message=error)
        if isinstance(error, dict):
            param = error.get("param")
            code = error.get("code")
            kind = error.get("type")
            return UpstreamError(
                # a body without a message ({"detail": [...]}, FastAPI/vLLM): its text
                message=str(error.get("message") or "") or text[:2000],
                code=str(code) if code is not None else None,
                type=str(kind) if kind is not None else None,
                param=param if isinstance(param, str) else None,
            )
    return UpstreamError(message=text[:2000])


def _as_chat_choice(choice: Any, *, stream: bool) -> Any:
    if not isinstance(choice, dict):
        return choice
    text = choice.get("text")
    out = {
        "index": choice.get("index", 0),
        ("delta" if stream else "message"): (
            {"content": text}
            if stream
            else {"role": "assistant", "content": text if isinstance(text, str) else ""}
        ),
        "finish_reason": choice.get("finish_reason"),
    }
    if choice.get("logprobs") is not None:
        out["logprobs"] = choice["logprobs"]
    return out


def text_completion_as_chat(payload: JSON, *, stream: bool) -> JSON:
    """A legacy ``text_completion`` object or chunk in the chat shape (a new dict)."""
    choices = payload.get("choices")
    return {
        **payload,
        "object": "chat.completion.chunk" if stream else "chat.completion",
        "choices": [
            _as_chat_choice(c, stream=stream)
            for c in (choices if isinstance(choices, list) else ())
        ],
    }


class OpenAIStreamTranslator:
    __slots__ = ("_finished",)

    def __init__(self) -> None:
        self._finished = False

    @property
    def finished(self) -> bool:
        return self._finished

    def partial_usage(self) -> JSON | None:
        return None  # OpenAI reports usage once, in the last chunk

    def translate(self, event: str | None, data: Any) -> list[JSON]:
        if data == DONE:
            self._finished = True
            return []
        if not isinstance(data, dict):
            return []
        if data.get("error") is not None:
            raise StreamErrorEvent(error_from_payload(data, ""))
        if data.get("object") == "text_completion":  # a legacy passthrough (09 §6)
            return [text_completion_as_chat(data, stream=True)]
        return [data]


def _object_arguments(message: Any) -> bool:
    calls = message.get("tool_calls") if isinstance(message, dict) else None
    return isinstance(calls, list) and any(
        isinstance(call, dict)
        and isinstance(call.get("function"), dict)
        and isinstance(call["function"].get("arguments"), dict)
        for call in calls
    )


def _stringified(message: JSON) -> JSON:
    calls = []
    for call in message["tool_calls"]:
        function = call.get("function") if isinstance(call, dict) else None
        if isinstance(function, dict) and isinstance(function.get("arguments"), dict):
            arguments = json.dumps(function["arguments"])
            call = {**call, "function": {**function, "arguments": arguments}}
        calls.append(call)
    return {**message, "tool_calls": calls}


def string_arguments(messages: Any) -> Any:
    """``messages`` with every history tool call's ``arguments`` a JSON string, as
    OpenAI requires (a client may send an object, which the other dialects read
    too): the same list when all are strings (one scan), else a new list whose
    changed messages are copies."""
    if not isinstance(messages, list) or not any(map(_object_arguments, messages)):
        return messages
    return [_stringified(m) if _object_arguments(m) else m for m in messages]


class OpenAIDialect(NoCountTokens):
    kind = "openai"
    label = "OpenAI-compatible"
    needs_base_url = True
    catalog = True
    reasoning_effort = True
    in_process = False
    ratelimit_prefixes: tuple[str, ...] = RATELIMIT_PREFIXES
    surfaces = frozenset({"chat", "completions"})
    wire = "chat"
    embeddings = True
    embeddings_token_ids = True
    credentials = OPENAI_CREDENTIALS

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
        # ids another upstream made (Gemini's carry a signature) may be too long
        upstream = dict(fit_body(body, OPENAI_IDS))
        messages = upstream.get("messages")
        # Anthropic's signed thinking stays home; arguments are a string on this wire
        bare = string_arguments(without_blocks(messages))
        if bare is not messages:
            upstream["messages"] = bare
        upstream["model"] = model
        if stream:
            options = upstream.get("stream_options")
            options = dict(options) if isinstance(options, dict) else {}
            options["include_usage"] = True
            upstream["stream_options"] = options
        return UpstreamCall(
            url=endpoint_url(base_url, "/chat/completions"),
            headers=self.headers(api_key, auth),
            body=upstream,
        )

    @staticmethod
    def headers(api_key: str | None, auth: Auth | None = None) -> dict[str, str]:
        """JSON, and the key as ``Authorization: Bearer`` or, with the provider's
        ``auth_header`` (spec 10 §1), in that header as is (``none``: no key)."""
        headers = {"content-type": "application/json"}
        if not api_key:
            return headers
        header = auth.setting("auth_header") if auth is not None else None
        if header is None or header.lower() == "authorization":
            headers["authorization"] = f"Bearer {api_key}"
        elif header.lower() != "none":
            headers[header.lower()] = api_key
        return headers

    def parse_completion(self, payload: Any, *, created: int) -> JSON:
        if not isinstance(payload, dict):
            raise BadUpstreamResponse("completion is not a JSON object")
        if payload.get("error") is not None:
            raise BadUpstreamResponse("completion carries an error object")
        completion: JSON = payload
        if payload.get("object") == "text_completion":  # a legacy passthrough
            completion = text_completion_as_chat(payload, stream=False)
        choices = completion.get("choices")
        if not isinstance(choices, list) or not choices:
            raise BadUpstreamResponse("completion has no choices")
        if not isinstance(completion.get("created"), int):
            completion["created"] = created
        return completion

    def passthrough_request(
        self,
        *,
        base_url: str,
        api_key: str | None,
        model: str,
        body: JSON,
        stream: bool,
        forward: tuple[tuple[str, str], ...],
        surface: str = "chat",
        auth: Auth | None = None,
    ) -> UpstreamCall:
        """A chat request already is this dialect's: the same as ``build_request``;
        a legacy Completions one goes to ``/completions`` as sent (09 §6)."""
        call = self.build_request(
            base_url=base_url,
            api_key=api_key,
            model=model,
            body=body,
            stream=stream,
            auth=auth,
        )
        if surface != "completions":
            return call
        return UpstreamCall(
            url=endpoint_url(base_url, "/completions"),
            headers=call.headers,
            body=call.body,
            passthrough=True,
        )

    def embeddings_request(
        self,
        *,
        base_url: str,
        api_key: str | None,
        model: str,
        body: JSON,
        auth: Auth | None = None,
    ) -> UpstreamCall:
        return UpstreamCall(
            url=endpoint_url(base_url, "/embeddings"),
            headers=self.headers(api_key, auth),
            body={**body, "model": model},
            operation="embeddings",
        )

    def parse_embeddings(
        self, payload: Any, headers: Mapping[str, str] | None = None
    ) -> JSON:
        return parse_embeddings_reply(payload)

    def list_models_request(
        self, *, base_url: str, api_key: str | None, auth: Auth | None = None
    ) -> UpstreamCall:
        headers = self.headers(api_key, auth)
        headers.pop("content-type", None)
        return UpstreamCall(
            url=endpoint_url(base_url, "/models"),
            headers=headers,
            body={},
            method="GET",
            operation="models",
        )

    def parse_model_list(self, payload: Any) -> list[str]:
        return model_ids(payload)

    def stream_translator(self, *, created: int, raw: bool = False) -> StreamTranslator:
        return OpenAIStreamTranslator()

    def stream_decoder(self) -> EventDecoder:
        return sse_decoder()

    def connection_base_url(self, base_url: str, auth: Auth | None) -> str | None:
        return None

    def parse_error(
        self, payload: Any, text: str, headers: Mapping[str, str] | None = None
    ) -> UpstreamError:
        return error_from_payload(payload, text)


def parse_embeddings_reply(payload: Any) -> JSON:
    """An OpenAI embeddings list, checked: every item an ``embedding`` with its
    ``index``."""
    if not isinstance(payload, dict):
        raise BadUpstreamResponse("embeddings reply is not a JSON object")
    data = payload.get("data")
    if not isinstance(data, list) or not data:
        raise BadUpstreamResponse("embeddings reply has no data")
    for position, item in enumerate(data):
        if not isinstance(item, dict) or "embedding" not in item:
            raise BadUpstreamResponse(f"embeddings reply item {position} has no vector")
        if not isinstance(item.get("index"), int):
            item["index"] = position
    return payload


def model_ids(payload: Any) -> list[str]:
    """The ``id`` of every entry of a ``{"data": [...]}`` model list (OpenAI's and
    Anthropic's shape)."""
    data = payload.get("data") if isinstance(payload, dict) else None
    if not isinstance(data, list):
        raise BadUpstreamResponse("model list has no data")
    return [
        str(item["id"])
        for item in data
        if isinstance(item, dict) and isinstance(item.get("id"), str)
    ]


class MockDialect(OpenAIDialect):
    """The built-in ``mock`` kind: the OpenAI dialect, answered in-process."""

    kind = "mock"
    label = "Built-in mock (in-process)"
    needs_base_url = False
    catalog = False
    in_process = True
