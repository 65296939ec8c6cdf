"""Google Gemini API dialect (``generativelanguage.googleapis.com``, spec 10 §1).

Clients only ever see OpenAI Chat Completions shapes, so this module translates both
ways.  The API key goes in the ``x-goog-api-key`` header, never in the URL.

Endpoints (``{base}`` is the provider's base URL; ``/v1beta`` is added unless its path
already ends with it, or ``/v1alpha``; a trailing ``/v1`` becomes ``/v1beta``):
``{base}/v1beta/models/{model}:generateContent``, ``:streamGenerateContent?alt=sse``
``:batchEmbedContents`` and ``:countTokens``.

Request (canonical OpenAI chat body -> ``GenerateContentRequest``):

1. ``system``/``developer`` messages, wherever they sit, become ``systemInstruction``
   (their texts, one part each); a request of system messages only sends them as the
   user turn instead, since Gemini needs ``contents``.
2. Every other message becomes a ``contents`` turn, role ``user`` or ``model``:
   ``text`` parts; images as ``inlineData`` (``data:`` URLs) or ``fileData`` (other
   URLs, the MIME type guessed from the extension when it is a known one); ``file``
   parts with ``file_data`` and ``input_audio`` as ``inlineData``.  An assistant's
   ``tool_calls`` become ``functionCall`` parts (arguments as an object: text that is
   not a JSON object becomes ``{}``); a ``tool`` message becomes a
   ``functionResponse`` part in a user turn, its ``response`` the content when that
   is a JSON object, else ``{"result": <text>}``.  Gemini has no call ids: the
   function's name is recovered from the earlier call with the message's
   ``tool_call_id``, else the message's own ``name``, else the call at the same
   position of the last assistant turn; the responses of one turn are put in the
   order of its calls.
3. Consecutive turns of one role are merged; empty text parts and turns left without
   parts are dropped (Gemini rejects both).  ``reasoning_content`` of earlier
   assistant turns is not sent.
4. ``tools`` -> one ``{functionDeclarations: [...]}``; each ``parameters`` schema is
   cut down to the OpenAPI subset Gemini takes (``gemini_schema``), and left out when
   it declares no properties (Gemini rejects an empty object schema);
   ``tool_choice`` -> ``toolConfig.functionCallingConfig`` (``auto`` AUTO, ``none``
   NONE, ``required`` ANY, a named function ANY with ``allowedFunctionNames``), only
   when tools are sent.
5. ``generationConfig``: ``maxOutputTokens`` (``max_completion_tokens``, else
   ``max_tokens``), ``temperature``, ``topP``, ``topK``, ``candidateCount`` (``n``),
   ``stopSequences`` (``stop``; Gemini takes at most 5, the rest are named), ``seed``,
   ``presencePenalty``, ``frequencyPenalty``; ``response_format`` ``json_object`` ->
   ``responseMimeType: application/json``, ``json_schema`` -> that plus
   ``responseSchema``; ``reasoning_effort`` -> ``thinkingConfig`` with a budget by
   level and ``includeThoughts`` (``none`` or an unknown level sends nothing: some
   Gemini models refuse a zero budget).  A client's exact budget
   (``thinking_budget``, the Messages wire's ``thinking``) is sent instead of the
   level's, clamped to the range of the model's family (``THINKING_RANGES``, read
   from the model id); -1 (adaptive) lets the model decide; 0 (thinking disabled)
   turns thinking off where the model can (``THINKING_OFF``) and sends nothing
   elsewhere.  Every budget stays below ``maxOutputTokens``, which thoughts count
   against.

Left out of the attempt and named (``UNSENT``, spec 09 §2.6), when the client set
them to a value that asks for something: ``logprobs`` and ``top_logprobs``
(``responseLogprobs`` exists, but the reply's logprobs are not mapped back),
``logit_bias``, ``parallel_tool_calls: false`` (no counterpart), legacy
``functions``, ``web_search_options``, ``audio``/``modalities``, ``verbosity``,
stop sequences past the fifth (``stop[5]``…); content parts other than text,
images, audio and inline files (``messages[i].content[j]``: a file by id; in system
and tool messages, anything but text), tools other than functions (``tools[i]``).
Fields that change nothing in the answer (``user``, ``metadata``, ``store``,
``service_tier``, ...) and ``cache_control`` markers are left out silently.

Schemas (``gemini_schema``): Gemini's ``Schema`` is an OpenAPI 3.0 subset and rejects
unknown keys.  Kept: ``type``, ``format``, ``title``, ``description``, ``nullable``,
``enum`` (strings only; ``type: string`` added when missing), ``properties``,
``required`` (only names that are properties), ``items``, ``anyOf``,
``minItems``/``maxItems``,
``minProperties``/``maxProperties``, ``minLength``/``maxLength``, ``pattern``,
``minimum``/``maximum``, ``example``, ``default``, ``propertyOrdering`` (a ``null``
value is left out).  Rewritten:
local ``$ref`` (``#/$defs/…``, ``#/definitions/…``) inlined (a recursive one is cut
to a bare ``object`` past depth 4); ``oneOf`` -> ``anyOf``; ``const`` -> a one-value
``enum``; a ``type`` list with ``null`` and a ``null`` branch of ``anyOf`` ->
``nullable: true``.  Stripped (with everything else unknown): ``$schema``, ``$id``,
``$defs``, ``definitions``, ``$comment``, ``additionalProperties``,
``patternProperties``, ``unevaluatedProperties``, ``allOf``, ``not``,
``if``/``then``/``else``, ``examples``, ``exclusiveMinimum``/``exclusiveMaximum``,
``multipleOf``, ``uniqueItems``, ``strict``, ``readOnly``/``writeOnly``.

Reply: text parts joined into ``content`` (``None`` when there are only calls),
``thought: true`` parts into ``reasoning_content``, ``functionCall`` parts into
``tool_calls`` (ids ``call_<tag>_<n>``, the tag the letters and digits of the
``responseId``, else ``created`` in hex, so ids differ from one turn to the next and a
conversation can fail over to Anthropic, which refuses repeated ids; a part's
``thoughtSignature`` travels inside the id, ``call_<tag>_<n>_ts_<base64url>`` (``_tu_``
for a signature in the URL-safe alphabet), and goes back on that ``functionCall``
part, in the alphabet it came in and padded, when the client sends the call again,
as Gemini needs for its reasoning across tool turns).
``finishReason``: ``STOP`` -> ``stop`` (``tool_calls`` when the candidate calls a
function), ``MAX_TOKENS`` -> ``length``, the safety family -> ``content_filter``,
anything else -> ``stop``.  A prompt blocked before any candidate
(``promptFeedback.blockReason``) is an empty ``content_filter`` answer.
``usageMetadata`` -> ``prompt_tokens`` (``promptTokenCount`` +
``toolUsePromptTokenCount``), ``completion_tokens`` (``candidatesTokenCount`` +
``thoughtsTokenCount``), ``prompt_tokens_details.cached_tokens``
(``cachedContentTokenCount``, part of the prompt count) and
``completion_tokens_details.reasoning_tokens`` (``thoughtsTokenCount``).

Stream (``alt=sse``): each ``data:`` event is a whole ``GenerateContentResponse``.
Text and thoughts become deltas; each ``functionCall`` part arrives whole and becomes
a tool call's start chunk and one chunk with its full arguments.  There is no
``[DONE]``: the stream is ``finished`` once a candidate carries a ``finishReason``,
which gives the finish chunk and a usage-only chunk (when any ``usageMetadata``
came); ``partial_usage`` is the latest ``usageMetadata``.  An ``{"error": ...}``
event raises ``StreamErrorEvent``.

Errors: ``{"error": {"code", "message", "status"}}`` -> ``UpstreamError`` with the
``status`` as ``code`` and an OpenAI-style ``type`` (``RESOURCE_EXHAUSTED`` ->
``rate_limit_error``, ...), so ``kernel.errors`` classifies it as spec 10 §1 says;
Gemini sends the matching HTTP status (429, 503, 500, 400, 401, 403, 404) as well.
A ``google.rpc.RetryInfo`` detail's ``retryDelay`` (``"120s"``) is the error's
``retry_after_s``: Gemini and Vertex send it on a 429 without a ``Retry-After``
header, and the cooldown reads it as one (spec 03 §8.2, amended).

Counting (``/v1/messages/count_tokens``, spec 09 §4.5): the canonical body becomes a
``:countTokens`` request whose ``generateContentRequest`` is the translated request
above without ``generationConfig``; the reply's ``totalTokens`` is ``input_tokens``.

Embeddings: the OpenAI body -> ``:batchEmbedContents`` with one request per input
string (``outputDimensionality`` from ``dimensions``); the vectors come back as the
OpenAI list, always as floats (the reply cannot see ``encoding_format``).  The
Gemini API reports no token count for embeddings: a ``usageMetadata`` count is read
where one comes, else the usage is left out and the gateway records its estimate
(``usage_source`` ``estimated``).  Gemini embeds text only
(``embeddings_token_ids = False``): a request of token ids skips this dialect as a
``capability_mismatch`` on ``input`` before any call.
"""

from __future__ import annotations

import base64
import binascii
import json
import re
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any
from urllib.parse import quote, unquote_to_bytes, urlsplit

from gateway.dialects.base import (
    API_KEY,
    JSON,
    RAW,
    BadUpstreamResponse,
    CredentialShape,
    EventDecoder,
    NoPassthrough,
    StreamErrorEvent,
    UpstreamCall,
    sse_decoder,
)
from gateway.dialects.carry import OPENAI_ONLY, TEXT_PARTS, Carry, is_false
from gateway.kernel.errors import UpstreamError
from gateway.kernel.sse import DONE
from gateway.kernel.text import text_of
from gateway.kernel.types import Auth

API_VERSION = "v1beta"
ERROR_TEXT_MAX_CHARS = 2000
MAX_STOP_SEQUENCES = 5
DEFAULT_IMAGE_MEDIA_TYPE = "image/png"
#: reasoning_effort -> thinkingConfig.thinkingBudget (tokens)
THINKING_BUDGETS = {
    "minimal": 512,
    "low": 1024,
    "medium": 8192,
    "high": 24576,
    "xhigh": 32768,
}
#: the smallest budget every thinking Gemini model accepts
MIN_THINKING_BUDGET = 128
#: the budgets a model family takes, ``(pattern of the model id, lowest, highest)``,
#: the first match deciding: Gemini 2.5 Flash-Lite 512-24576, Flash 1-24576 (0 turns
#: thinking off), Pro 128-32768
THINKING_RANGES = (
    (re.compile(r"flash-lite"), 512, 24576),
    (re.compile(r"flash"), 1, 24576),
    (re.compile(r"pro"), 128, 32768),
)
#: the range of a model id no pattern names: what every Gemini 2.5 model takes
DEFAULT_THINKING_RANGE = (512, 24576)
#: the budget that thinks least, for a client that turns thinking off: 0 (off) on
#: Gemini 2.5 Flash and Flash-Lite, the lowest budget on 2.5 Pro (it always thinks);
#: other models get no ``thinkingConfig`` (some refuse one)
THINKING_OFF = (
    (re.compile(r"gemini-2\.5-flash"), 0),
    (re.compile(r"gemini-2\.5-pro"), 128),
)
#: ``thinkingBudget`` -1: the model decides how much to think
DYNAMIC_THINKING = -1
#: the canonical field with a client's exact budget (the Messages wire's
#: ``thinking``: ``budget_tokens``, 0 when disabled, -1 when adaptive)
THINKING_BUDGET_FIELD = "thinking_budget"
#: how deep a local ``$ref`` is inlined before it is cut to a bare object
MAX_REF_DEPTH = 4

_SYSTEM_ROLES = frozenset({"system", "developer"})
_TOOL_MODES = {"auto": "AUTO", "none": "NONE", "required": "ANY"}
_FINISH_REASONS = {
    "STOP": "stop",
    "MAX_TOKENS": "length",
    "SAFETY": "content_filter",
    "RECITATION": "content_filter",
    "PROHIBITED_CONTENT": "content_filter",
    "BLOCKLIST": "content_filter",
    "SPII": "content_filter",
    "IMAGE_SAFETY": "content_filter",
    "LANGUAGE": "content_filter",
}
#: Gemini ``error.status`` -> an OpenAI-style error ``type`` (what
#: ``classify_stream_error`` and the logs read)
_ERROR_TYPES = {
    "RESOURCE_EXHAUSTED": "rate_limit_error",
    "UNAVAILABLE": "overloaded_error",
    "INTERNAL": "api_error",
    "DEADLINE_EXCEEDED": "timeout_error",
    "INVALID_ARGUMENT": "invalid_request_error",
    "FAILED_PRECONDITION": "invalid_request_error",
    "OUT_OF_RANGE": "invalid_request_error",
    "PERMISSION_DENIED": "permission_error",
    "UNAUTHENTICATED": "authentication_error",
    "NOT_FOUND": "not_found_error",
}
#: sampling fields copied into ``generationConfig`` under Gemini's name
_SAMPLING = {
    "temperature": "temperature",
    "top_p": "topP",
    "top_k": "topK",
    "seed": "seed",
    "presence_penalty": "presencePenalty",
    "frequency_penalty": "frequencyPenalty",
}
_MIME_BY_EXTENSION = {
    "png": "image/png",
    "jpg": "image/jpeg",
    "jpeg": "image/jpeg",
    "gif": "image/gif",
    "webp": "image/webp",
    "heic": "image/heic",
    "heif": "image/heif",
    "pdf": "application/pdf",
}
#: the mark before a signature in a call id, by the alphabet it came in: ``_ts_``
#: the standard one (``+/``, Gemini's own), ``_tu_`` the URL-safe one (``-_``)
_STANDARD_MARK = "_ts_"
_URL_SAFE_MARK = "_tu_"
#: an id from ``call_id`` with a signature: ``call_[<tag>_]<n>_t<s|u>_<base64url>``
#: (the tag is letters and digits, so the first mark after the number is the one)
_SIGNED_ID = re.compile(r"call_(?:[A-Za-z0-9]+_)?\d+_t([su])_([A-Za-z0-9_-]+)")
#: a working key on a ``functionResponse`` part: the position of its call
_ORDER = "_order"


def _dict(value: Any) -> JSON:
    return value if isinstance(value, dict) else {}


def _int(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


# --- URLs and headers -------------------------------------------------------------


def api_base(base_url: str) -> str:
    """The base URL with its API version: one ending with a pre-release version
    (``…/v1beta``, ``…/v1alpha``) is used as given; a stable one (``…/v1``, as an
    OpenAI-style base URL ends) is replaced by ``v1beta``, which the request's fields
    need; any other gets ``/v1beta`` added."""
    base = base_url.rstrip("/")
    head, _, last = base.rpartition("/")
    if urlsplit(base).path in ("", "/"):
        return f"{base}/{API_VERSION}"
    if re.fullmatch(r"v\d+(alpha|beta)\d*", last):
        return base
    if re.fullmatch(r"v\d+", last):
        return f"{head}/{API_VERSION}"
    return f"{base}/{API_VERSION}"


def model_url(base_url: str, model: str, method: str) -> str:
    """``{base}/v1beta/models/{model}:{method}`` (a ``models/`` or ``tunedModels/``
    prefix is kept).  The id is one path segment, percent-encoded whole: a ``/`` in
    it is ``%2F`` and an id of ``.`` or ``..`` is escaped, so it never walks the
    path (as Vertex, Bedrock and Azure encode theirs)."""
    collection, slash, rest = model.partition("/")
    if not slash or collection not in ("models", "tunedModels"):
        collection, rest = "models", model
    segment = quote(rest, safe="-._~")
    if segment in (".", ".."):
        segment = segment.replace(".", "%2E")
    return f"{api_base(base_url)}/{collection}/{segment}:{method}"


def headers(api_key: str | None) -> dict[str, str]:
    out = {"content-type": "application/json"}
    if api_key:
        out["x-goog-api-key"] = api_key
    return out


# --- thought signatures in tool call ids ---------------------------------------------


def reply_tag(response_id: Any, created: int) -> str:
    """What makes a reply's call ids its own (Gemini numbers calls per reply, and a
    conversation failed over to Anthropic needs ids unique across its turns): the
    letters and digits of the reply's ``responseId``, else ``created`` in hex."""
    tag = "".join(c for c in str(response_id or "") if c.isascii() and c.isalnum())
    return tag[:32] or f"{created:x}"


def _signature_bytes(signature: str) -> tuple[bytes, bool] | None:
    """The bytes of a base64 ``signature`` and whether it is in the URL-safe
    alphabet (``-``, ``_``), or None when it is not base64 in either.  Padding may
    be left out."""
    url_safe = "-" in signature or "_" in signature
    if url_safe and ("+" in signature or "/" in signature):
        return None  # the two alphabets mixed: neither
    text = signature.translate(_FROM_URL_SAFE) if url_safe else signature
    text += "=" * (-len(text) % 4)
    try:
        raw = base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        return None
    return (raw, url_safe) if raw else None


_FROM_URL_SAFE = str.maketrans("-_", "+/")


def call_id(position: int, signature: Any = None, tag: str = "") -> str:
    """The id of the ``position``-th call of a reply (``tag``: ``reply_tag``); a
    ``thoughtSignature`` rides in it as base64url, with a mark saying which
    alphabet it came in (``signature_of`` gives it back in that one), so the call
    can go back with it."""
    plain = f"call_{tag}_{position}" if tag else f"call_{position}"
    if not isinstance(signature, str) or not signature:
        return plain
    found = _signature_bytes(signature)
    if found is None:
        return plain
    raw, url_safe = found
    packed = base64.urlsafe_b64encode(raw).decode("ascii").rstrip("=")
    mark = _URL_SAFE_MARK if url_safe else _STANDARD_MARK
    return f"{plain}{mark}{packed}"


def signature_of(tool_call_id: Any) -> str | None:
    """The ``thoughtSignature`` carried by an id from ``call_id`` (padded, in the
    alphabet it came in), else None."""
    if not isinstance(tool_call_id, str):
        return None
    found = _SIGNED_ID.fullmatch(tool_call_id)
    if found is None:
        return None
    packed = found.group(2)
    try:
        raw = base64.urlsafe_b64decode(packed + "=" * (-len(packed) % 4))
    except (binascii.Error, ValueError):
        return None
    if not raw:
        return None
    if found.group(1) == "u":
        return base64.urlsafe_b64encode(raw).decode("ascii")
    return base64.b64encode(raw).decode("ascii")


# --- request: schemas ---------------------------------------------------------------

_SCHEMA_KEYS = frozenset(
    {
        "type",
        "format",
        "title",
        "description",
        "nullable",
        "enum",
        "properties",
        "required",
        "items",
        "anyOf",
        "minItems",
        "maxItems",
        "minProperties",
        "maxProperties",
        "minLength",
        "maxLength",
        "pattern",
        "minimum",
        "maximum",
        "example",
        "default",
        "propertyOrdering",
    }
)


def _resolve_ref(ref: Any, root: JSON) -> JSON | None:
    if not isinstance(ref, str) or not ref.startswith("#/"):
        return None
    node: Any = root
    for step in ref[2:].split("/"):
        if not isinstance(node, dict):
            return None
        node = node.get(step.replace("~1", "/").replace("~0", "~"))
    return node if isinstance(node, dict) else None


def _nullable_type(out: JSON, kind: Any) -> None:
    if not isinstance(kind, list):
        if isinstance(kind, str) and kind != "null":
            out["type"] = kind
        return
    kinds = [k for k in kind if isinstance(k, str) and k != "null"]
    if len(kinds) < len(kind):
        out["nullable"] = True
    if len(kinds) == 1:
        out["type"] = kinds[0]
    elif kinds:
        out["anyOf"] = [{"type": k} for k in kinds]


def _schema(node: Any, root: JSON, depth: int) -> JSON:
    if not isinstance(node, dict):
        return {}
    if "$ref" in node:
        target = _resolve_ref(node["$ref"], root)
        if target is None or depth >= MAX_REF_DEPTH:
            return {"type": "object"}
        merged = {**target, **{k: v for k, v in node.items() if k != "$ref"}}
        return _schema(merged, root, depth + 1)
    out: JSON = {}
    _nullable_type(out, node.get("type"))
    for key, value in node.items():
        if key in _SCHEMA_KEYS and key != "type":
            _schema_key(out, key, value, root, depth)
    if isinstance(node.get("const"), str):
        out["enum"] = [node["const"]]
    if "enum" in out:
        out.setdefault("type", "string")  # Gemini's enums are strings
    branches = node.get("anyOf", node.get("oneOf"))
    if isinstance(branches, list):
        _branches(out, branches, root, depth)
    if isinstance(out.get("required"), list):
        names = set(_dict(out.get("properties")))
        out["required"] = [n for n in out["required"] if n in names]
        if not out["required"]:
            del out["required"]
    return out


def _schema_key(out: JSON, key: str, value: Any, root: JSON, depth: int) -> None:
    """One kept key of a schema node (``anyOf`` is read by ``_branches``)."""
    if key == "anyOf":
        return
    if key == "properties":
        if isinstance(value, dict):
            out[key] = {
                str(name): _schema(sub, root, depth) for name, sub in value.items()
            }
    elif key == "items":
        out[key] = _schema(value, root, depth)
    elif key == "enum":
        if isinstance(value, list) and all(isinstance(v, str) for v in value):
            out[key] = list(value)
    elif value is not None:  # a null ``default``, ``title``...: nothing to say
        out[key] = value


def _branches(out: JSON, branches: list[Any], root: JSON, depth: int) -> None:
    kept = []
    for branch in branches:
        if isinstance(branch, dict) and branch.get("type") == "null":
            out["nullable"] = True
            continue
        kept.append(_schema(branch, root, depth))
    if len(kept) == 1:
        for key, value in kept[0].items():
            out.setdefault(key, value)
    elif kept:
        out["anyOf"] = kept


def gemini_schema(schema: Any) -> JSON:
    """A JSON Schema cut down to what Gemini's ``Schema`` accepts (module doc)."""
    root = _dict(schema)
    return _schema(root, root, 0)


# --- request: content ---------------------------------------------------------------


def _data_url(url: str) -> JSON | None:
    header, comma, payload = url[len("data:") :].partition(",")
    if not comma:
        return None
    media_type, *params = header.split(";")
    if "base64" in params:
        data = payload
    else:
        data = base64.b64encode(unquote_to_bytes(payload)).decode("ascii")
    return {
        "inlineData": {"mimeType": media_type or DEFAULT_IMAGE_MEDIA_TYPE, "data": data}
    }


def _file_data(url: str) -> JSON:
    data: JSON = {"fileUri": url}
    extension = urlsplit(url).path.rsplit(".", 1)[-1].lower()
    if extension in _MIME_BY_EXTENSION:
        data["mimeType"] = _MIME_BY_EXTENSION[extension]
    return {"fileData": data}


def _image_part(part: JSON) -> JSON | None:
    image = part.get("image_url")
    url = image.get("url") if isinstance(image, dict) else image
    if not isinstance(url, str) or not url:
        return None
    return _data_url(url) if url.startswith("data:") else _file_data(url)


def _file_part(part: JSON) -> JSON | None:
    data = _dict(part.get("file")).get("file_data")
    if isinstance(data, str) and data.startswith("data:"):
        return _data_url(data)
    return None  # a file id names the client's OpenAI storage: nothing to send


def _audio_part(part: JSON) -> JSON | None:
    audio = _dict(part.get("input_audio"))
    data, fmt = audio.get("data"), audio.get("format")
    if not isinstance(data, str) or not data:
        return None
    mime = f"audio/{fmt}" if isinstance(fmt, str) and fmt else "audio/wav"
    return {"inlineData": {"mimeType": mime, "data": data}}


def _text_part(part: JSON) -> JSON | None:
    text = part.get(str(part.get("type")))
    return {"text": text} if isinstance(text, str) and text else None


_PART_READERS = {
    "text": _text_part,
    "refusal": _text_part,
    "image_url": _image_part,
    "file": _file_part,
    "input_audio": _audio_part,
}


def _part(part: Any) -> JSON | None:
    """One OpenAI content part -> one Gemini part, or None when it has none."""
    if isinstance(part, str):
        return {"text": part} if part else None
    if not isinstance(part, dict):
        return None
    kind = part.get("type")
    reader = _PART_READERS.get(kind) if isinstance(kind, str) else None
    return reader(part) if reader is not None else None


def _parts(content: Any) -> list[JSON]:
    items = content if isinstance(content, list) else [content]
    return [found for item in items if (found := _part(item)) is not None]


def function_args(arguments: Any) -> JSON:
    """A call's arguments as the object Gemini wants (``{}`` when not an object)."""
    if isinstance(arguments, dict):
        return dict(arguments)
    try:
        parsed = json.loads(arguments) if isinstance(arguments, str) else None
    except ValueError:
        return {}
    return parsed if isinstance(parsed, dict) else {}


def _function_response(content: Any) -> JSON:
    text = text_of(content, "\n\n")
    try:
        parsed = json.loads(text) if text.lstrip().startswith("{") else None
    except ValueError:
        parsed = None
    return parsed if isinstance(parsed, dict) else {"result": text}


class _Turns:
    """The ``contents`` being built, with what tool results need of earlier calls."""

    def __init__(self) -> None:
        self.contents: list[JSON] = []
        self.names: dict[str, str] = {}  # call id -> function name
        self.last_calls: list[tuple[str, str]] = []  # (id, name) of the last turn
        self.answered = 0  # tool results since the last assistant turn

    def add(self, role: str, parts: list[JSON]) -> None:
        if not parts:
            return
        if self.contents and self.contents[-1]["role"] == role:
            self.contents[-1]["parts"].extend(parts)
        else:
            self.contents.append({"role": role, "parts": parts})

    def assistant(self, message: JSON) -> None:
        parts = _parts(message.get("content"))
        calls: list[tuple[str, str]] = []
        for call in message.get("tool_calls") or ():
            function = _dict(_dict(call).get("function"))
            name = str(function.get("name") or "")
            if not name:
                continue
            ident = str(_dict(call).get("id") or "")
            part: JSON = {
                "functionCall": {
                    "name": name,
                    "args": function_args(function.get("arguments")),
                }
            }
            signature = signature_of(ident)
            if signature is not None:
                part["thoughtSignature"] = signature
            parts.append(part)
            calls.append((ident, name))
            if ident:
                self.names[ident] = name
        self.last_calls = calls
        self.answered = 0
        self.add("model", parts)

    def tool(self, message: JSON) -> None:
        ident = str(message.get("tool_call_id") or "")
        order = [i for i, _ in self.last_calls]
        # the call it answers: by id, else by order (spec 10 §1)
        position = order.index(ident) if ident and ident in order else self.answered
        self.answered += 1
        name = self.names.get(ident) or message.get("name")
        if not name and position < len(self.last_calls):
            name = self.last_calls[position][1]
        part: JSON = {
            "functionResponse": {
                "name": str(name or ""),
                "response": _function_response(message.get("content")),
            },
            _ORDER: position,
        }
        self.add("user", [part])

    def finish(self) -> list[JSON]:
        for turn in self.contents:
            parts = turn["parts"]
            if any(_ORDER in p for p in parts):
                # the responses in the order of their calls; the rest after them
                last = len(parts)  # list.sort empties the list while it sorts
                parts.sort(key=lambda p: p.get(_ORDER, last))
                for p in parts:
                    p.pop(_ORDER, None)
        return self.contents


def contents_of(messages: Any) -> tuple[list[JSON], list[JSON]]:
    """OpenAI messages -> (system instruction parts, Gemini ``contents``)."""
    system: list[JSON] = []
    turns = _Turns()
    for message in messages if isinstance(messages, list) else ():
        if not isinstance(message, dict):
            continue
        role = message.get("role")
        if role in _SYSTEM_ROLES:
            system += [p for p in _parts(message.get("content")) if "text" in p]
        elif role == "user":
            turns.add("user", _parts(message.get("content")))
        elif role == "assistant":
            turns.assistant(message)
        elif role == "tool":
            turns.tool(message)
    return system, turns.finish()


# --- request: the rest -------------------------------------------------------------


def _declarations(tools: Any) -> list[JSON]:
    out: list[JSON] = []
    for tool in tools if isinstance(tools, list) else ():
        tool = _dict(tool)
        if tool.get("type", "function") != "function":
            continue
        function = _dict(tool.get("function"))
        if not function.get("name"):
            continue
        entry: JSON = {"name": str(function["name"])}
        if function.get("description"):
            entry["description"] = str(function["description"])
        parameters = gemini_schema(function.get("parameters"))
        if parameters.get("properties"):
            entry["parameters"] = parameters
        out.append(entry)
    return out


def _tool_config(choice: Any) -> JSON | None:
    if isinstance(choice, str) and choice in _TOOL_MODES:
        return {"functionCallingConfig": {"mode": _TOOL_MODES[choice]}}
    name = _dict(_dict(choice).get("function")).get("name")
    if isinstance(name, str) and name:
        return {
            "functionCallingConfig": {"mode": "ANY", "allowedFunctionNames": [name]}
        }
    return None


def _stops(stop: Any) -> list[str]:
    stops = [stop] if isinstance(stop, str) else stop
    if not isinstance(stops, list):
        return []
    return [s for s in stops if isinstance(s, str) and s][:MAX_STOP_SEQUENCES]


def _response_format(config: JSON, value: Any) -> None:
    fmt = _dict(value)
    if fmt.get("type") == "json_object":
        config["responseMimeType"] = "application/json"
    elif fmt.get("type") == "json_schema":
        config["responseMimeType"] = "application/json"
        schema = _dict(fmt.get("json_schema")).get("schema")
        if isinstance(schema, dict):
            config["responseSchema"] = gemini_schema(schema)


def thinking_range(model: str) -> tuple[int, int]:
    """The lowest and highest ``thinkingBudget`` of ``model`` (``THINKING_RANGES``)."""
    name = model.lower()
    for pattern, low, high in THINKING_RANGES:
        if pattern.search(name):
            return low, high
    return DEFAULT_THINKING_RANGE


def _fit_budget(config: JSON, budget: int, low: int) -> int | None:
    """``budget`` under ``maxOutputTokens`` (thoughts count against it), or None
    when no budget of at least ``low`` fits there."""
    limit = config.get("maxOutputTokens")
    if isinstance(limit, int) and not isinstance(limit, bool):
        budget = min(budget, limit - 1)
    return budget if budget >= low else None


def _thinking_off(config: JSON, model: str) -> None:
    name = model.lower()
    for pattern, budget in THINKING_OFF:
        if pattern.search(name):
            config["thinkingConfig"] = {"thinkingBudget": budget}
            return


def _thinking(config: JSON, effort: Any, exact: Any, model: str) -> None:
    """``thinkingConfig``: the client's exact budget (``THINKING_BUDGET_FIELD``)
    clamped to the model's range, else a budget by ``reasoning_effort`` level.  An
    exact 0 turns thinking off (``THINKING_OFF``); any other budget goes only with a
    ``reasoning_effort``, which a model known not to reason does not get."""
    if not isinstance(exact, int) or isinstance(exact, bool):
        exact = None
    if exact == 0:
        _thinking_off(config, model)
        return
    if effort is None or effort == "none":
        return
    low, high = thinking_range(model)
    if exact == DYNAMIC_THINKING:
        budget: int | None = DYNAMIC_THINKING
    elif exact is not None and exact > 0:
        budget = _fit_budget(config, min(max(exact, low), high), low)
    else:
        level = THINKING_BUDGETS.get(effort) if isinstance(effort, str) else None
        if level is None:
            return  # an unknown level: the model's default
        floor = max(low, MIN_THINKING_BUDGET)
        budget = _fit_budget(config, min(level, high), floor)
    if budget is not None:
        config["thinkingConfig"] = {"thinkingBudget": budget, "includeThoughts": True}


def generation_config(body: JSON, model: str = "") -> JSON:
    config: JSON = {}
    for key in ("max_completion_tokens", "max_tokens"):
        value = body.get(key)
        if isinstance(value, int) and not isinstance(value, bool):
            config["maxOutputTokens"] = value
            break
    for ours, theirs in _SAMPLING.items():
        if _number(body.get(ours)):
            config[theirs] = body[ours]
    n = body.get("n")
    if isinstance(n, int) and not isinstance(n, bool) and n > 1:
        config["candidateCount"] = n
    stops = _stops(body.get("stop"))
    if stops:
        config["stopSequences"] = stops
    _response_format(config, body.get("response_format"))
    _thinking(
        config, body.get("reasoning_effort"), body.get(THINKING_BUDGET_FIELD), model
    )
    return config


def _part_sent(part: JSON, text_only: bool) -> bool:
    """Whether Gemini gets a content part (``_PART_READERS``): text everywhere;
    images, audio and inline files in user and assistant turns (a file by id names
    the client's OpenAI storage)."""
    kind = part.get("type")
    if kind in TEXT_PARTS:
        return True
    if text_only:
        return False
    if kind == "file":
        data = _dict(part.get("file")).get("file_data")
        return isinstance(data, str) and data.startswith("data:")
    return kind in ("image_url", "input_audio")


#: what ``generate_body`` cannot carry, named per attempt (spec 09 §2.6, module doc)
UNSENT = Carry(
    fields=MappingProxyType({**OPENAI_ONLY, "parallel_tool_calls": is_false}),
    part=_part_sent,
    max_stops=MAX_STOP_SEQUENCES,
)


def generate_body(body: JSON, model: str = "") -> JSON:
    """A canonical chat request -> a ``GenerateContentRequest`` (a new dict);
    ``model`` decides the thinking budgets it takes."""
    system, contents = contents_of(body.get("messages"))
    if not contents and system:  # Gemini needs contents; the instruction is the prompt
        contents, system = [{"role": "user", "parts": system}], []
    out: JSON = {"contents": contents}
    if system:
        out["systemInstruction"] = {"parts": system}
    declarations = _declarations(body.get("tools"))
    if declarations:
        out["tools"] = [{"functionDeclarations": declarations}]
        tool_config = _tool_config(body.get("tool_choice"))
        if tool_config is not None:
            out["toolConfig"] = tool_config
    config = generation_config(body, model)
    if config:
        out["generationConfig"] = config
    return out


def count_body(body: JSON, *, model: str) -> JSON:
    """A canonical chat request -> a ``CountTokensRequest``: the whole
    ``generateContentRequest`` (so the system instruction and the tools count, as
    they do in a Messages count), without its ``generationConfig``, which changes
    no input token."""
    request = generate_body(body)
    request.pop("generationConfig", None)
    name = model if model.startswith(("models/", "tunedModels/")) else f"models/{model}"
    return {"generateContentRequest": {"model": name, **request}}


def embed_body(body: JSON, *, model: str) -> JSON:
    """An OpenAI embeddings request -> a ``BatchEmbedContentsRequest``."""
    raw = body.get("input")
    items: list[Any] = [raw] if isinstance(raw, str) else list(raw or ())
    if items and all(isinstance(t, int) for t in items):
        items = [items]  # one list of token ids
    name = model if model.startswith("models/") else f"models/{model}"
    dimensions = body.get("dimensions")
    requests = []
    for item in items:
        text = item if isinstance(item, str) else json.dumps(item)
        request: JSON = {"model": name, "content": {"parts": [{"text": text}]}}
        if isinstance(dimensions, int) and not isinstance(dimensions, bool):
            request["outputDimensionality"] = dimensions
        requests.append(request)
    return {"requests": requests}


# --- reply ---------------------------------------------------------------------------


def map_usage(usage: Any) -> JSON:
    """``usageMetadata`` -> OpenAI usage (thoughts are output; cache reads are part
    of the prompt, as OpenAI's ``cached_tokens``)."""
    usage = _dict(usage)
    prompt = _int(usage.get("promptTokenCount")) + _int(
        usage.get("toolUsePromptTokenCount")
    )
    thoughts = _int(usage.get("thoughtsTokenCount"))
    completion = _int(usage.get("candidatesTokenCount")) + thoughts
    return {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
        "prompt_tokens_details": {
            "cached_tokens": _int(usage.get("cachedContentTokenCount"))
        },
        "completion_tokens_details": {"reasoning_tokens": thoughts},
    }


def map_finish_reason(reason: Any, calls: bool) -> str:
    """Gemini ``finishReason`` -> OpenAI ``finish_reason`` (unknown -> ``stop``)."""
    mapped = _FINISH_REASONS.get(reason, "stop") if isinstance(reason, str) else "stop"
    return "tool_calls" if calls and mapped == "stop" else mapped


def _tool_call(position: int, part: JSON, tag: str) -> JSON:
    call = _dict(part.get("functionCall"))
    return {
        "id": call_id(position, part.get("thoughtSignature"), tag),
        "type": "function",
        "function": {
            "name": str(call.get("name") or ""),
            "arguments": json.dumps(call.get("args") or {}),
        },
    }


def _choice(candidate: JSON, position: int, tag: str) -> JSON:
    texts: list[str] = []
    thoughts: list[str] = []
    calls: list[JSON] = []
    for part in _dict(candidate.get("content")).get("parts") or ():
        part = _dict(part)
        if "functionCall" in part:
            calls.append(_tool_call(len(calls), part, tag))
        elif isinstance(part.get("text"), str):
            (thoughts if part.get("thought") is True else texts).append(part["text"])
    message: JSON = {
        "role": "assistant",
        "content": None if calls and not texts else "".join(texts),
    }
    if calls:
        message["tool_calls"] = calls
    if thoughts:
        message["reasoning_content"] = "".join(thoughts)
    index = candidate.get("index")
    return {
        "index": index if isinstance(index, int) else position,
        "message": message,
        "finish_reason": map_finish_reason(candidate.get("finishReason"), bool(calls)),
    }


def _completion_id(payload: JSON) -> str:
    return f"chatcmpl-{payload.get('responseId') or ''}"


def parse_generate_reply(payload: Any, *, created: int) -> JSON:
    """A ``GenerateContentResponse`` -> an OpenAI ``chat.completion``."""
    if not isinstance(payload, dict):
        raise BadUpstreamResponse("completion is not a JSON object")
    if payload.get("error") is not None:
        raise BadUpstreamResponse("completion carries an error object")
    candidates = payload.get("candidates")
    if isinstance(candidates, list) and candidates:
        tag = reply_tag(payload.get("responseId"), created)
        choices = [_choice(_dict(c), i, tag) for i, c in enumerate(candidates)]
    elif _dict(payload.get("promptFeedback")).get("blockReason"):
        choices = [
            {
                "index": 0,
                "message": {"role": "assistant", "content": ""},
                "finish_reason": "content_filter",
            }
        ]
    else:
        raise BadUpstreamResponse("completion has no candidates")
    completion: JSON = {
        "id": _completion_id(payload),
        "object": "chat.completion",
        "created": created,
        "model": payload.get("modelVersion"),
        "choices": choices,
    }
    if isinstance(payload.get("usageMetadata"), dict):
        completion["usage"] = map_usage(payload["usageMetadata"])
    return completion


def parse_embed_reply(payload: Any) -> JSON:
    """A ``BatchEmbedContentsResponse`` -> the OpenAI embeddings list."""
    embeddings = _dict(payload).get("embeddings")
    if not isinstance(embeddings, list) or not embeddings:
        raise BadUpstreamResponse("embeddings reply has no embeddings")
    data = []
    for index, item in enumerate(embeddings):
        values = _dict(item).get("values")
        if not isinstance(values, list):
            raise BadUpstreamResponse(f"embeddings reply item {index} has no values")
        data.append({"object": "embedding", "index": index, "embedding": values})
    out: JSON = {"object": "list", "data": data}
    usage = _dict(_dict(payload).get("usageMetadata"))
    prompt = _int(usage.get("promptTokenCount")) or _int(usage.get("totalTokenCount"))
    if prompt:
        out["usage"] = {"prompt_tokens": prompt, "total_tokens": prompt}
    return out


def model_ids(payload: Any) -> list[str]:
    """The ids of a ``{"models": [{"name": "models/<id>"}, ...]}`` list."""
    models = _dict(payload).get("models")
    if not isinstance(models, list):
        raise BadUpstreamResponse("model list has no models")
    return [
        name.removeprefix("models/")
        for item in models
        if isinstance(name := _dict(item).get("name"), str) and name
    ]


def _reason(error: JSON) -> str | None:
    """The ``ErrorInfo`` reason among the error's ``details``, if any."""
    for detail in error.get("details") or ():
        reason = _dict(detail).get("reason")
        if isinstance(reason, str):
            return reason
    return None


_RETRY_INFO = "type.googleapis.com/google.rpc.RetryInfo"
_DURATION = re.compile(r"(\d+(?:\.\d+)?)s")


def retry_delay(error: JSON) -> float | None:
    """Seconds of the ``google.rpc.RetryInfo`` among the error's ``details``
    (``retryDelay``, a protobuf Duration such as ``"120s"`` or ``"1.5s"``)."""
    for detail in error.get("details") or ():
        detail = _dict(detail)
        if detail.get("@type") != _RETRY_INFO:
            continue
        found = _DURATION.fullmatch(str(detail.get("retryDelay") or "").strip())
        if found is not None:
            return float(found.group(1))
    return None


def error_from_payload(payload: Any, text: str) -> UpstreamError:
    """``{"error": {"code", "message", "status"}}`` (or a list of one) ->
    ``UpstreamError`` with the ``status`` as ``code``."""
    if isinstance(payload, list) and payload:
        payload = payload[0]
    error = _dict(payload).get("error")
    if isinstance(error, str):
        return UpstreamError(message=error)
    if isinstance(error, dict):
        status = error.get("status")
        status = status if isinstance(status, str) and status else None
        if _reason(error) == "API_KEY_INVALID":  # a 400 that means a wrong key
            status = "API_KEY_INVALID"
        return UpstreamError(
            message=str(error.get("message") or "") or text[:ERROR_TEXT_MAX_CHARS],
            code=status,
            type=_ERROR_TYPES.get(status or ""),
            retry_after_s=retry_delay(error),
        )
    return UpstreamError(message=text[:ERROR_TEXT_MAX_CHARS])


# --- stream ---------------------------------------------------------------------


class GeminiStreamTranslator:
    """``GenerateContentResponse`` events -> OpenAI chunks for one attempt.

    Tool calls are numbered from 0 per candidate in the order they arrive; every
    ``functionCall`` part is whole, so it gives its start and its full arguments.
    """

    __slots__ = (
        "_calls",
        "_created",
        "_finished",
        "_id",
        "_model",
        "_raw",
        "_response_id",
        "_started",
        "_usage",
    )

    def __init__(self, *, created: int, raw: bool = False) -> None:
        self._raw = raw
        self._created = created
        self._finished = False
        self._started = False
        self._id = "chatcmpl-"
        self._response_id: Any = None
        self._model = ""
        self._calls: dict[int, int] = {}  # candidate index -> calls so far
        self._usage: JSON | None = None

    @property
    def finished(self) -> bool:
        return self._finished

    def partial_usage(self) -> JSON | None:
        return map_usage(self._usage) if self._usage is not None else None

    def translate(self, event: str | None, data: Any) -> list[JSON]:
        chunks = self._translate(data)
        if self._raw and isinstance(data, dict):
            chunks.insert(0, {RAW: (event, data)})
        return chunks

    def _chunk(self, index: int, delta: JSON, finish: str | None = None) -> JSON:
        return {
            "id": self._id,
            "object": "chat.completion.chunk",
            "created": self._created,
            "model": self._model,
            "choices": [{"index": index, "delta": delta, "finish_reason": finish}],
        }

    def _translate(self, data: Any) -> list[JSON]:
        if isinstance(data, list):  # a JSON-array stream: one response per item
            return [c for item in data for c in self._translate(item)]
        if data == DONE or not isinstance(data, dict):
            return []
        if data.get("error") is not None:
            raise StreamErrorEvent(error_from_payload(data, json.dumps(data)))
        self._note(data)
        chunks: list[JSON] = []
        if not self._started:
            self._started = True
            chunks.append(self._chunk(0, {"role": "assistant", "content": ""}))
        finished = False
        candidates = data.get("candidates")
        for position, candidate in enumerate(
            candidates if isinstance(candidates, list) else ()
        ):
            found, ended = self._candidate(_dict(candidate), position)
            chunks += found
            finished = finished or ended
        if not candidates and _dict(data.get("promptFeedback")).get("blockReason"):
            chunks.append(self._chunk(0, {}, "content_filter"))
            finished = True
        if finished:
            self._finished = True
            if self._usage is not None:  # none reported: the gateway estimates
                chunks.append(self._usage_chunk())
        return chunks

    def _note(self, data: JSON) -> None:
        """The id, model and usage a response carries (every event may)."""
        if data.get("responseId"):
            self._id = _completion_id(data)
            self._response_id = data["responseId"]
        if data.get("modelVersion"):
            self._model = str(data["modelVersion"])
        if isinstance(data.get("usageMetadata"), dict):
            self._usage = data["usageMetadata"]

    def _candidate(self, candidate: JSON, position: int) -> tuple[list[JSON], bool]:
        """One candidate's chunks, and whether it finished."""
        index = candidate.get("index")
        index = index if isinstance(index, int) else position
        chunks = self._parts(index, _dict(candidate.get("content")).get("parts"))
        reason = candidate.get("finishReason")
        if not reason:
            return chunks, False
        calls = self._calls.get(index, 0) > 0
        chunks.append(self._chunk(index, {}, map_finish_reason(reason, calls)))
        return chunks, True

    def _parts(self, index: int, parts: Any) -> list[JSON]:
        chunks: list[JSON] = []
        for part in parts if isinstance(parts, list) else ():
            part = _dict(part)
            if "functionCall" in part:
                chunks += self._call(index, part)
                continue
            text = part.get("text")
            if isinstance(text, str) and text:
                field = (
                    "reasoning_content" if part.get("thought") is True else "content"
                )
                chunks.append(self._chunk(index, {field: text}))
        return chunks

    def _call(self, index: int, part: JSON) -> list[JSON]:
        position = self._calls.get(index, 0)
        self._calls[index] = position + 1
        call = _tool_call(position, part, reply_tag(self._response_id, self._created))
        start = {
            "index": position,
            "id": call["id"],
            "type": "function",
            "function": {"name": call["function"]["name"], "arguments": ""},
        }
        arguments = {
            "index": position,
            "function": {"arguments": call["function"]["arguments"]},
        }
        return [
            self._chunk(index, {"tool_calls": [start]}),
            self._chunk(index, {"tool_calls": [arguments]}),
        ]

    def _usage_chunk(self) -> JSON:
        chunk = self._chunk(0, {})
        chunk["choices"] = []
        chunk["usage"] = map_usage(self._usage)
        return chunk


# --- the dialect ----------------------------------------------------------------


class GeminiDialect(NoPassthrough):
    kind = "gemini"
    label = "Google Gemini API"
    needs_base_url = True
    #: the kind is not a models.dev provider id (Gemini's is ``google``): prices come
    #: from the model row, a slug named ``google``, or OMNIROUTE_CATALOG_PROVIDER_MAP
    catalog = False
    reasoning_effort = False
    in_process = False
    ratelimit_prefixes: tuple[str, ...] = ()
    wire = "chat"
    embeddings = True
    embeddings_token_ids = False  # text only
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
        method = "streamGenerateContent?alt=sse" if stream else "generateContent"
        return UpstreamCall(
            url=model_url(base_url, model, method),
            headers=headers(api_key),
            body=generate_body(body, model),
        )

    def parse_completion(self, payload: Any, *, created: int) -> JSON:
        return parse_generate_reply(payload, created=created)

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
            url=model_url(base_url, model, "batchEmbedContents"),
            headers=headers(api_key),
            body=embed_body(body, model=model),
            operation="embeddings",
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
        """``:countTokens`` of the canonical ``body`` (``count_body``); the answer's
        ``totalTokens`` is the count."""
        return UpstreamCall(
            url=model_url(base_url, model, "countTokens"),
            headers=headers(api_key),
            body=count_body(body, model=model),
            operation="count_tokens",
            count_field="totalTokens",
        )

    def list_models_request(
        self, *, base_url: str, api_key: str | None, auth: Auth | None = None
    ) -> UpstreamCall:
        """``GET {base}/v1beta/models`` (one page of up to 1000)."""
        found = headers(api_key)
        found.pop("content-type")
        return UpstreamCall(
            url=f"{api_base(base_url)}/models?pageSize=1000",
            headers=found,
            body={},
            method="GET",
            operation="models",
        )

    def parse_model_list(self, payload: Any) -> list[str]:
        return model_ids(payload)

    def parse_embeddings(
        self, payload: Any, headers: Mapping[str, str] | None = None
    ) -> JSON:
        return parse_embed_reply(payload)

    def stream_decoder(self) -> EventDecoder:
        return sse_decoder()

    def connection_base_url(self, base_url: str, auth: Auth | None) -> str | None:
        return None

    def stream_translator(
        self, *, created: int, raw: bool = False
    ) -> GeminiStreamTranslator:
        return GeminiStreamTranslator(created=created, raw=raw)

    def parse_error(
        self, payload: Any, text: str, headers: Mapping[str, str] | None = None
    ) -> UpstreamError:
        return error_from_payload(payload, text)
