"""The mock's Amazon Bedrock wire: the model is in the path, every request is signed.

* ``POST /model/{modelId}/converse``: a ``ConverseResponse`` (``output.message``
  with ``text`` or ``toolUse`` blocks, ``stopReason``, ``usage``).
* ``POST /model/{modelId}/converse-stream``: AWS event-stream frames
  (``application/vnd.amazon.eventstream``; each frame with its prelude and message
  CRC-32s and the ``:event-type``, ``:content-type`` and ``:message-type``
  headers): ``messageStart``, one ``contentBlockDelta`` per token (a tool call:
  ``contentBlockStart`` with its id and name, one delta with its whole input JSON,
  ``contentBlockStop``), ``messageStop`` with the ``stopReason``, ``metadata`` with
  the usage.  The ``stream_error`` knob sends an exception frame
  (``:message-type: exception``; ``__type`` of the knob names it, default
  ``internalServerException``).
* ``POST /model/{modelId}/invoke``: embeddings, Titan (``inputText``: one string,
  and for Titan V2 a ``dimensions`` of 256, 512 or 1024; anything else is a
  ``ValidationException`` as Bedrock answers it) or Cohere
  (``texts``, a model id containing ``cohere.``); the input's token count in the
  ``X-Amzn-Bedrock-Input-Token-Count`` reply header (Titan's body repeats it as
  ``inputTextTokenCount``; Cohere's body has none).
* ``GET /foundation-models`` and ``GET /inference-profiles``: every model the mock
  knows, on demand, and a ``us.`` profile of each.

Every request must carry a valid SigV4 ``Authorization`` for service ``bedrock``,
which the mock recomputes with botocore from the secret of the access key id
(``CREDENTIALS``), over the bytes received: an unknown key id is a 403
``UnrecognizedClientException``, a wrong signature (a wrong secret) a 403
``InvalidSignatureException``, a missing one a 403
``MissingAuthenticationTokenException``, a date more than 15 minutes off a 403
``InvalidSignatureException`` too.

A Converse request is refused as Bedrock refuses it (400 ``ValidationException``)
when its turns hold ``toolUse`` or ``toolResult`` blocks and it has no
``toolConfig``, or a ``toolUseId`` that is not 1-64 of ``[a-zA-Z0-9_-]``.

Errors are Bedrock's: the exception name in the ``x-amzn-errortype`` header and
``{"message": ...}`` as the body; a forced status names the exception Bedrock sends
with it (429 ``ThrottlingException``, 503 ``ServiceUnavailableException``, ...),
unless the behaviour's ``error_body`` has a ``__type``.
"""

from __future__ import annotations

import calendar
import hmac
import re
import struct
import time
import zlib
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any
from urllib.parse import quote, unquote

import orjson

from providers.mock_upstream.core import _SUCCESS, MockBehaviour, MockState
from providers.mock_upstream.reply import (
    Reply,
    _arguments_object,
    _Call,
    _Frames,
    _whole,
)
from providers.mock_upstream.wire import EMBEDDING_DIMENSIONS, _vector, _Wire

MODEL_PREFIX = "/model/"
#: what Bedrock takes as a ``toolUseId``
TOOL_USE_ID = re.compile(r"[a-zA-Z0-9_-]{1,64}")
FOUNDATION_MODELS = "/foundation-models"
INFERENCE_PROFILES = "/inference-profiles"
EVENT_STREAM_TYPE = "application/vnd.amazon.eventstream"
#: where ``invoke`` reports the input's token count
INPUT_TOKENS_HEADER = "x-amzn-bedrock-input-token-count"

#: the access keys the mock knows: key id -> secret (tests sign with these)
TEST_ACCESS_KEY_ID = "AKIAMOCKBEDROCK00001"
TEST_SECRET_ACCESS_KEY = "mock/bedrock+secret/key/0000000000000000"
CREDENTIALS: Mapping[str, str] = {TEST_ACCESS_KEY_ID: TEST_SECRET_ACCESS_KEY}
#: how far a request's ``X-Amz-Date`` may be from the mock's clock (AWS: 15 min)
MAX_SKEW_S = 15 * 60
_SIGV4_TIMESTAMP = "%Y%m%dT%H%M%SZ"
_ARN = "arn:aws:bedrock:us-east-1::foundation-model"

#: HTTP status -> the exception Bedrock answers it with
EXCEPTIONS: dict[int, str] = {
    400: "ValidationException",
    403: "AccessDeniedException",
    404: "ResourceNotFoundException",
    408: "ModelTimeoutException",
    424: "ModelErrorException",
    429: "ThrottlingException",
    500: "InternalServerException",
    503: "ServiceUnavailableException",
}

Complete = Callable[..., Reply]


def exception_for(status: int) -> str:
    name = EXCEPTIONS.get(status)
    if name is None:
        name = "ValidationException" if status < 500 else "InternalServerException"  # noqa: PLR2004
    return name


def error_reply(status: int, name: str, message: str, record: Any = None) -> Reply:
    return _whole(
        status,
        orjson.dumps({"message": message}),
        extra={"x-amzn-errortype": f"{name}:http://internal.amazon.com/coral/"},
        record=record,
    )


# --- event-stream frames ---------------------------------------------------------


def frame(headers: Iterable[tuple[str, str]], payload: bytes) -> bytes:
    """One AWS event-stream message: prelude (total length, headers length, CRC),
    string headers, payload, message CRC."""
    encoded = b""
    for name, value in headers:
        raw_name, raw_value = name.encode(), value.encode()
        encoded += bytes([len(raw_name)]) + raw_name + b"\x07"
        encoded += struct.pack(">H", len(raw_value)) + raw_value
    total = 12 + len(encoded) + len(payload) + 4
    prelude = struct.pack(">II", total, len(encoded))
    prelude += struct.pack(">I", zlib.crc32(prelude))
    message = prelude + encoded + payload
    return message + struct.pack(">I", zlib.crc32(message))


def event(kind: str, data: Mapping[str, Any]) -> bytes:
    return frame(
        (
            (":event-type", kind),
            (":content-type", "application/json"),
            (":message-type", "event"),
        ),
        orjson.dumps(data),
    )


def exception(kind: str, message: str) -> bytes:
    return frame(
        (
            (":exception-type", kind),
            (":content-type", "application/json"),
            (":message-type", "exception"),
        ),
        orjson.dumps({"message": message}),
    )


# --- SigV4 verification ------------------------------------------------------------


def _authorization(value: str) -> dict[str, str] | None:
    scheme, _, rest = value.partition(" ")
    if scheme != "AWS4-HMAC-SHA256":
        return None
    fields = {}
    for item in rest.split(","):
        name, _, found = item.strip().partition("=")
        fields[name] = found
    if not {"Credential", "SignedHeaders", "Signature"} <= set(fields):
        return None
    return fields


def _canonical_path(path: str) -> str:
    """The path as the client sent it: each segment percent-encoded (a runner may
    hand the mock the decoded path)."""
    route, _, query = path.partition("?")
    encoded = "/".join(quote(unquote(seg), safe="-_.~") for seg in route.split("/"))
    return f"{encoded}?{query}" if query else encoded


def verify(
    method: str,
    path: str,
    headers: Mapping[str, str],
    body: bytes,
    *,
    now: float | None = None,
) -> tuple[str, str] | None:
    """None when the request's SigV4 signature is valid; else (exception, message)."""
    from botocore.auth import SigV4Auth  # first use: off the import path
    from botocore.awsrequest import AWSRequest
    from botocore.credentials import Credentials

    fields = _authorization(headers.get("authorization", ""))
    if fields is None:
        return (
            "MissingAuthenticationTokenException",
            "Missing Authentication Token",
        )
    key_id, _, scope = fields["Credential"].partition("/")
    secret = CREDENTIALS.get(key_id)
    if secret is None:
        return (
            "UnrecognizedClientException",
            "The security token included in the request is invalid.",
        )
    day, region, service, *_ = [*scope.split("/"), "", "", ""]
    stamp = headers.get("x-amz-date", "")
    try:
        signed_at = calendar.timegm(time.strptime(stamp, _SIGV4_TIMESTAMP))
    except ValueError:
        return ("IncompleteSignatureException", "X-Amz-Date is missing or malformed.")
    clock = time.time() if now is None else now
    if abs(clock - signed_at) > MAX_SKEW_S or not stamp.startswith(day):
        return ("InvalidSignatureException", "Signature expired or mis-dated.")
    signed = fields["SignedHeaders"].split(";")
    request = AWSRequest(
        method=method,
        url=f"http://{headers.get('host', '')}{_canonical_path(path)}",
        data=body,
        headers={name: headers.get(name, "") for name in signed},
    )
    request.context["timestamp"] = stamp
    signer = SigV4Auth(
        Credentials(key_id, secret, headers.get("x-amz-security-token")),
        service,
        region,
    )
    canonical = signer.canonical_request(request)
    expected = signer.signature(signer.string_to_sign(request, canonical), request)
    if service != "bedrock" or not hmac.compare_digest(expected, fields["Signature"]):
        return (
            "InvalidSignatureException",
            "The request signature we calculated does not match the signature "
            "you provided. Check your AWS Secret Access Key and signing method.",
        )
    return None


# --- the wires ---------------------------------------------------------------------


def _usage(call: _Call, output: int) -> dict[str, int]:
    return {
        "inputTokens": call.prompt_tokens,
        "outputTokens": output,
        "totalTokens": call.prompt_tokens + output,
    }


def _tool_uses(call: _Call, tools: Iterable[Mapping[str, Any]]) -> list[dict]:
    return [
        {
            "toolUse": {
                "toolUseId": f"tooluse_mock{call.reply_id}_{index}",
                "name": str(tool.get("name", "")),
                "input": _arguments_object(tool.get("arguments", {})) or {},
            }
        }
        for index, tool in enumerate(tools)
    ]


class _ConverseWire:
    """``converse`` and ``converse-stream``."""

    def error_body(self, status: int, message: str) -> dict[str, Any]:
        return {"message": message}

    def message(
        self, call: _Call, behaviour: MockBehaviour, tokens: Sequence[str]
    ) -> dict[str, Any]:
        if behaviour.tool_calls:
            content = _tool_uses(call, behaviour.tool_calls)
            count, stop = len(content), "tool_use"
        else:
            content = [{"text": "".join(tokens)}]
            count, stop = len(tokens), "end_turn"
        out: dict[str, Any] = {
            "output": {"message": {"role": "assistant", "content": content}},
            "stopReason": stop,
            "metrics": {"latencyMs": 1},
        }
        if behaviour.usage:
            out["usage"] = _usage(call, count)
        return out

    def stream(
        self, call: _Call, behaviour: MockBehaviour, tokens: Sequence[str]
    ) -> _Frames:
        head = event("messageStart", {"role": "assistant"})
        pieces: list[bytes] = []
        if behaviour.tool_calls:
            stop = "tool_use"
            for index, block in enumerate(_tool_uses(call, behaviour.tool_calls)):
                use = block["toolUse"]
                pieces.append(
                    event(
                        "contentBlockStart",
                        {
                            "contentBlockIndex": index,
                            "start": {
                                "toolUse": {
                                    "toolUseId": use["toolUseId"],
                                    "name": use["name"],
                                }
                            },
                        },
                    )
                    + event(
                        "contentBlockDelta",
                        {
                            "contentBlockIndex": index,
                            "delta": {
                                "toolUse": {
                                    "input": orjson.dumps(use["input"]).decode()
                                }
                            },
                        },
                    )
                    + event("contentBlockStop", {"contentBlockIndex": index})
                )
            count, tail = len(pieces), b""
        else:
            stop = "end_turn"
            pieces = [
                event(
                    "contentBlockDelta",
                    {"contentBlockIndex": 0, "delta": {"text": token}},
                )
                for token in tokens
            ]
            count, tail = (
                len(tokens),
                event("contentBlockStop", {"contentBlockIndex": 0}),
            )
        tail += event("messageStop", {"stopReason": stop})
        metadata: dict[str, Any] = {"metrics": {"latencyMs": 1}}
        if behaviour.usage:
            metadata["usage"] = _usage(call, count)
        tail += event("metadata", metadata)
        return _Frames(head, pieces, tail)

    def stream_error(self, error: Mapping[str, Any]) -> bytes:
        kind = error.get("__type") or error.get("type") or "internalServerException"
        return exception(str(kind), str(error.get("message") or "mock stream error"))


def _is_cohere(model: str) -> bool:
    return "cohere." in model


def _token_count(text: str) -> int:
    """The mock's count of one embedded text's tokens (about four characters each)."""
    return max(1, len(text) // 4)


def _input_tokens(model: str, body: bytes) -> int:
    """The input token count ``invoke`` reports in its reply header: every text of a
    Cohere request, Titan's one ``inputText``."""
    try:
        request = orjson.loads(body)
    except orjson.JSONDecodeError:
        return 0
    if not isinstance(request, dict):
        return 0
    if _is_cohere(model):
        return sum(_token_count(str(t)) for t in request.get("texts") or ())
    return _token_count(str(request.get("inputText") or ""))


class _InvokeWire:
    """``invoke`` of an embedding model."""

    def error_body(self, status: int, message: str) -> dict[str, Any]:
        return {"message": message}

    def message(
        self, call: _Call, behaviour: MockBehaviour, tokens: Sequence[str]
    ) -> dict[str, Any]:
        request = call.request
        if _is_cohere(call.model):
            texts = [str(t) for t in request.get("texts") or ()]
            size = request.get("output_dimension")
            width = size if isinstance(size, int) else EMBEDDING_DIMENSIONS
            vectors = [_vector(text, width) for text in texts]
            if request.get("embedding_types"):
                return {
                    "id": f"mock-{call.reply_id}",
                    "response_type": "embeddings_by_type",
                    "embeddings": {"float": vectors},
                    "texts": texts,
                }
            return {
                "id": f"mock-{call.reply_id}",
                "embeddings": vectors,
                "texts": texts,
            }
        text = str(request.get("inputText") or "")
        size = request.get("dimensions")
        return {
            "embedding": _vector(
                text, size if isinstance(size, int) else EMBEDDING_DIMENSIONS
            ),
            "inputTextTokenCount": _token_count(text),
        }

    def stream(
        self, call: _Call, behaviour: MockBehaviour, tokens: Sequence[str]
    ) -> _Frames:
        return _Frames(orjson.dumps(self.message(call, behaviour, tokens)), [], b"")

    def stream_error(self, error: Mapping[str, Any]) -> bytes:
        return b""


CONVERSE = _ConverseWire()
INVOKE = _InvokeWire()

#: action -> (wire, streams)
_ACTIONS: dict[str, tuple[_Wire, bool]] = {
    "converse": (CONVERSE, False),
    "converse-stream": (CONVERSE, True),
    "invoke": (INVOKE, False),
}


def serves(route: str) -> bool:
    """True for a path of this wire (its query already cut off)."""
    return route.startswith(MODEL_PREFIX) or route in (
        FOUNDATION_MODELS,
        INFERENCE_PROFILES,
    )


def _model_route(route: str) -> tuple[_Wire, str, bool] | None:
    name, slash, action = route[len(MODEL_PREFIX) :].rpartition("/")
    found = _ACTIONS.get(action) if slash else None
    if found is None or not name:
        return None
    return found[0], unquote(name), found[1]


def _lists(route: str, ids: Sequence[str]) -> dict[str, Any]:
    if route == FOUNDATION_MODELS:
        return {
            "modelSummaries": [
                {
                    "modelId": model_id,
                    "modelArn": f"{_ARN}/{model_id}",
                    "modelName": model_id,
                    "providerName": "Mock",
                    "inputModalities": ["TEXT"],
                    "outputModalities": ["TEXT"],
                    "responseStreamingSupported": True,
                    "inferenceTypesSupported": ["ON_DEMAND"],
                    "modelLifecycle": {"status": "ACTIVE"},
                }
                for model_id in ids
            ]
        }
    return {
        "inferenceProfileSummaries": [
            {
                "inferenceProfileId": f"us.{model_id}",
                "inferenceProfileName": f"US {model_id}",
                "status": "ACTIVE",
                "type": "SYSTEM_DEFINED",
            }
            for model_id in ids
        ]
    }


def answer(
    state: MockState,
    method: str,
    route: str,
    path: str,
    headers: dict[str, str],
    body: bytes,
    complete: Complete,
) -> Reply:
    """One Bedrock request: verified, then answered (``complete``: the dispatcher's
    model call, which scripts the behaviour)."""
    found = _model_route(route) if route.startswith(MODEL_PREFIX) else None
    listing = route in (FOUNDATION_MODELS, INFERENCE_PROFILES)
    wanted = "GET" if listing else "POST"
    if (found is None and not listing) or method != wanted:
        status = 404 if found is None and not listing else 405
        message = f"{method} {path} is not served by the mock upstream."
        return error_reply(status, "UnknownOperationException", message)
    refused = verify(method, path, headers, body)
    if refused is not None:
        record = state.log.start(
            path=path, model=None, headers=headers, body=None, is_stream=False
        )
        return error_reply(403, *refused, record=record)
    if listing:
        record = state.log.start(
            path=path, model=None, headers=headers, body=None, is_stream=False
        )
        ids = list(dict.fromkeys([*state.model_ids, *state.script.model_ids()]))
        return _whole(200, orjson.dumps(_lists(route, ids)), record=record)
    assert found is not None
    wire, model, is_stream = found
    titan_problem = _bad_titan(model, body) if wire is INVOKE else None
    if titan_problem is not None:
        record = state.log.start(
            path=path, model=model, headers=headers, body=None, is_stream=False
        )
        return error_reply(400, "ValidationException", titan_problem, record=record)
    problem = converse_problem(body) if wire is CONVERSE else None
    if problem is not None:
        record = state.log.start(
            path=path, model=model, headers=headers, body=None, is_stream=is_stream
        )
        return error_reply(400, "ValidationException", problem, record=record)
    reply = complete(state, wire, path, headers, body, model=model, is_stream=is_stream)
    if wire is INVOKE and reply.status in _SUCCESS:
        _count_header(reply, _input_tokens(model, body))
    return _bedrock_shaped(reply)


def _blocks(request: Mapping[str, Any]) -> Iterable[Mapping[str, Any]]:
    messages = request.get("messages")
    for message in messages if isinstance(messages, list) else ():
        content = message.get("content") if isinstance(message, dict) else None
        for block in content if isinstance(content, list) else ():
            if isinstance(block, dict):
                yield block


#: a Converse document block's ``name`` and ``format`` as Bedrock checks them
DOCUMENT_NAME = re.compile(r"(?!.*\s\s)[A-Za-z0-9\s\-()\[\]]{1,200}")
DOCUMENT_FORMATS = frozenset(
    {"pdf", "csv", "doc", "docx", "xls", "xlsx", "html", "txt", "md"}
)


def _document_problem(request: Mapping[str, Any]) -> str | None:
    """A document block Converse refuses: an invalid or repeated name, an unknown
    format."""
    names: set[str] = set()
    for block in _blocks(request):
        document = block.get("document")
        if not isinstance(document, dict):
            continue
        name = document.get("name")
        if not isinstance(name, str) or not DOCUMENT_NAME.fullmatch(name):
            return (
                f"The document name '{name}' is invalid: it can only contain "
                "alphanumeric characters, whitespace characters (no more than one in "
                "a row), hyphens, parentheses and square brackets."
            )
        if name in names:
            return "The request contains two documents with the same name."
        names.add(name)
        if document.get("format") not in DOCUMENT_FORMATS:
            return f"Unsupported document format: {document.get('format')}"
    return None


def converse_problem(body: bytes) -> str | None:
    """What Bedrock's Converse refuses of a request (a ``ValidationException``):
    invalid tool-use ids, tool blocks without a ``toolConfig``, and documents with
    an invalid or repeated name or an unknown format."""
    try:
        request = orjson.loads(body)
    except orjson.JSONDecodeError:
        return "Malformed request body"
    if not isinstance(request, dict):
        return "Malformed request body"
    for block in _blocks(request):
        use = block.get("toolUse") or block.get("toolResult")
        ident = use.get("toolUseId") if isinstance(use, dict) else None
        if ident is not None and not (
            isinstance(ident, str) and TOOL_USE_ID.fullmatch(ident)
        ):
            return (
                f"1 validation error detected: Value '{ident}' at 'toolUseId' failed "
                "to satisfy constraint: Member must have length less than or equal "
                "to 64 and satisfy regular expression pattern: [a-zA-Z0-9_-]+"
            )
    problem = _document_problem(request)
    if problem is not None:
        return problem
    tool_blocks = any("toolUse" in b or "toolResult" in b for b in _blocks(request))
    if tool_blocks and "toolConfig" not in request:
        return (
            "The toolConfig field must be defined when using toolUse and "
            "toolResult content blocks."
        )
    return None


def _count_header(reply: Reply, tokens: int) -> None:
    """``X-Amzn-Bedrock-Input-Token-Count`` on an ``invoke`` answer, as Bedrock sends
    it for every model (a scripted one is kept)."""
    if not any(name.lower() == INPUT_TOKENS_HEADER for name, _ in reply.headers):
        reply.headers.append((INPUT_TOKENS_HEADER, str(tokens)))


#: the sizes Titan Text Embeddings V2 makes
_TITAN_V2_SIZES = (256, 512, 1024)


#: the sizes Cohere Embed v4 makes (``output_dimension``)
_COHERE_V4_SIZES = (256, 512, 1024, 1536)


#: the most texts a Cohere embed invoke takes
_COHERE_MAX_TEXTS = 96


def _bad_cohere(model: str, request: Any) -> str | None:
    """Bedrock's refusal of a Cohere body: more than 96 ``texts``, or an
    ``output_dimension`` other than v4's 256, 512, 1024 or 1536 (v3 has none)."""
    texts = request.get("texts") if isinstance(request, dict) else None
    if isinstance(texts, list) and len(texts) > _COHERE_MAX_TEXTS:
        return (
            "Malformed input request: #/texts: expected maximum item count: "
            f"{_COHERE_MAX_TEXTS}, found: {len(texts)}"
        )
    size = request.get("output_dimension") if isinstance(request, dict) else None
    if size is None:
        return None
    if "embed-v4" not in model:
        return "Malformed input request: extraneous key [output_dimension]"
    if size not in _COHERE_V4_SIZES:
        return f"Malformed input request: #/output_dimension: {size} is not valid"
    return None


def _bad_titan(model: str, body: bytes) -> str | None:
    """Bedrock's message refusing an embeddings invoke body, None when it is fine:
    Titan takes one string as ``inputText``, and V2 a ``dimensions`` of 256, 512 or
    1024 only; Cohere's ``output_dimension`` as ``_bad_cohere`` says."""
    try:
        request = orjson.loads(body)
    except orjson.JSONDecodeError:
        request = None
    if _is_cohere(model):
        return _bad_cohere(model, request)
    if not isinstance(request, dict) or not isinstance(request.get("inputText"), str):
        return "Malformed input request: #/inputText: expected type: String"
    size = request.get("dimensions")
    titan_v2 = "titan-embed-text-v2" in model
    if titan_v2 and size is not None and size not in _TITAN_V2_SIZES:
        return f"Malformed input request: #/dimensions: {size} is not a valid value"
    return None


def _bedrock_shaped(reply: Reply) -> Reply:
    """The event-stream content type on a stream; the exception header on an error."""
    if reply.status in _SUCCESS:
        if reply.content_length is None:  # a stream
            reply.headers = [
                (name, EVENT_STREAM_TYPE if name == "content-type" else value)
                for name, value in reply.headers
            ]
        return reply
    if any(name == "x-amzn-errortype" for name, _ in reply.headers):
        return reply
    name = exception_for(reply.status)
    payload = b"".join(data for _, data in reply.parts)
    try:
        parsed = orjson.loads(payload)
    except orjson.JSONDecodeError:
        parsed = None
    if isinstance(parsed, dict) and isinstance(parsed.get("__type"), str):
        name = parsed["__type"]
    reply.headers.append(
        ("x-amzn-errortype", f"{name}:http://internal.amazon.com/coral/")
    )
    return reply


__all__ = [
    "CREDENTIALS",
    "TEST_ACCESS_KEY_ID",
    "TEST_SECRET_ACCESS_KEY",
    "answer",
    "event",
    "exception",
    "frame",
    "serves",
    "verify",
]
