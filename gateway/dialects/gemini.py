"""Google Gemini API dialect (``generativelanguage.googleapis.com``, spec 10 §1).

Clients only ever see OpenAI Chat Completions shapes, so the dialect translates both
ways.  The API key goes in the ``x-goog-api-key`` header, never in the URL.

Endpoints (``{base}`` is the provider's base URL; ``/v1beta`` is added unless its path
already ends with it, or ``/v1alpha``; a trailing ``/v1`` becomes ``/v1beta``):
``{base}/v1beta/models/{model}:generateContent``, ``:streamGenerateContent?alt=sse``
``:batchEmbedContents`` and ``:countTokens``.

The translation lives beside this module, one responsibility each:
``gemini_request`` (canonical body -> ``GenerateContentRequest``, the count and
embeddings requests, what an attempt leaves out: ``UNSENT``), ``gemini_reply``
(replies, streams, errors, the embeddings reply, the model list) and ``gemini_ids``
(thought signatures in tool-call ids).  Their public names are re-exported here, so
``from gateway.dialects.gemini import ...`` keeps working (Vertex's Gemini reuses
them whole).

Counting (``/v1/messages/count_tokens``, spec 09 §4.5): the canonical body becomes a
``:countTokens`` request whose ``generateContentRequest`` is the translated request
without ``generationConfig``; the reply's ``totalTokens`` is ``input_tokens``.

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

import re
from collections.abc import Mapping
from typing import Any
from urllib.parse import quote, urlsplit

from gateway.dialects.base import (
    API_KEY,
    JSON,
    CredentialShape,
    EventDecoder,
    NoPassthrough,
    UpstreamCall,
    sse_decoder,
)
from gateway.dialects.gemini_ids import call_id, reply_tag, signature_of
from gateway.dialects.gemini_reply import (
    ERROR_TEXT_MAX_CHARS,
    GeminiStreamTranslator,
    error_from_payload,
    map_finish_reason,
    map_usage,
    model_ids,
    parse_embed_reply,
    parse_generate_reply,
    retry_delay,
)
from gateway.dialects.gemini_request import (
    DEFAULT_IMAGE_MEDIA_TYPE,
    DEFAULT_THINKING_RANGE,
    DYNAMIC_THINKING,
    MAX_REF_DEPTH,
    MAX_STOP_SEQUENCES,
    MIN_THINKING_BUDGET,
    THINKING_BUDGET_FIELD,
    THINKING_BUDGETS,
    THINKING_OFF,
    THINKING_RANGES,
    UNSENT,
    contents_of,
    count_body,
    embed_body,
    gemini_schema,
    generate_body,
    generation_config,
    thinking_range,
)
from gateway.kernel.errors import UpstreamError
from gateway.kernel.types import Auth

__all__ = [
    "API_VERSION",
    "DEFAULT_IMAGE_MEDIA_TYPE",
    "DEFAULT_THINKING_RANGE",
    "DYNAMIC_THINKING",
    "ERROR_TEXT_MAX_CHARS",
    "MAX_REF_DEPTH",
    "MAX_STOP_SEQUENCES",
    "MIN_THINKING_BUDGET",
    "THINKING_BUDGETS",
    "THINKING_BUDGET_FIELD",
    "THINKING_OFF",
    "THINKING_RANGES",
    "UNSENT",
    "GeminiDialect",
    "GeminiStreamTranslator",
    "api_base",
    "call_id",
    "contents_of",
    "count_body",
    "embed_body",
    "error_from_payload",
    "gemini_schema",
    "generate_body",
    "generation_config",
    "headers",
    "map_finish_reason",
    "map_usage",
    "model_ids",
    "model_url",
    "parse_embed_reply",
    "parse_generate_reply",
    "reply_tag",
    "retry_delay",
    "signature_of",
    "thinking_range",
]

API_VERSION = "v1beta"


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
