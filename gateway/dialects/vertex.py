"""Google Vertex AI dialect (spec 10 §1): Gemini models and Anthropic's Claude models
on Google Cloud, with an OAuth2 bearer token minted from a service account.

A Vertex model belongs to one publisher, and the publisher decides the wire:

* ``google`` (the kind's own wire, ``chat``): the Gemini API's request and reply
  (``gateway.dialects.gemini``, reused whole) at
  ``{root}/projects/{project}/locations/{region}/publishers/google/models/{model}``
  ``:generateContent``, ``:streamGenerateContent?alt=sse``; embeddings at
  ``:predict`` (``{"instances": [{"content"}], "parameters"}``); a Messages
  ``count_tokens`` at ``:countTokens`` (``count_body``: the prompt's ``contents``,
  ``systemInstruction`` and ``tools``; the answer's ``totalTokens``).
* ``anthropic`` (wire ``messages``): Anthropic's Messages body
  (``gateway.dialects.anthropic``, reused whole) at
  ``…/publishers/anthropic/models/{model}:rawPredict`` / ``:streamRawPredict``,
  with ``"anthropic_version": "vertex-2023-10-16"`` in the body and no ``model``
  field; a Messages client is served by passthrough; ``count_tokens`` at
  ``…/publishers/anthropic/models/count-tokens:rawPredict`` (``model`` in the body).

A model row's ``wire`` picks the publisher (``messages``: Anthropic's, ``chat``:
Google's); a row without one is Anthropic's when its id starts with ``claude``
(``wire_of_model``), Google's otherwise.  What a translated attempt leaves out and
names (spec 09 §2.6) is the reused translation's: ``gemini.UNSENT`` for Google's
publisher, ``anthropic.UNSENT`` for Anthropic's.

Endpoint: a provider without ``base_url`` is served at
``https://{region}-aiplatform.googleapis.com`` (``region: global`` at
``https://aiplatform.googleapis.com``, no region prefix), per connection
(``connection_base_url``); a provider's own ``base_url`` (a Private Service Connect
endpoint, the mock) is used instead.  ``{root}`` is that URL with ``/v1`` added
unless its path already ends with an API version (``/v1``, ``/v1beta1``).

The credential a connection holds and its checks at save: ``vertex_credential``.

Auth: ``Authorization: Bearer {token}``, the token minted by
``providers.vertex_auth`` (cached until 5 minutes before expiry, spec 10 §1) and
handed in as ``auth.token``; ``x-goog-user-project`` when the credential names a
``quota_project_id``.  The dialect never sees the service account's key.

Errors: Vertex itself answers ``{"error": {"code", "message", "status"}}`` for both
publishers (quota, auth, a model not enabled), read as the Gemini dialect reads it
(``RESOURCE_EXHAUSTED`` -> ``rate_limit_error``, ``UNAUTHENTICATED`` ->
``authentication_error``, …); a Claude model's own errors come in Anthropic's
envelope (``{"type": "error", "error": {"type", "message"}}``) and are read as the
Anthropic dialect reads them.

Discovery lists the publisher's models (``GET {root v1beta1}/publishers/{publisher}
/models``, one page): Google's for a provider of wire ``chat``, Anthropic's for one
of wire ``messages``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any
from urllib.parse import quote, urlsplit

from gateway.dialects.anthropic import (
    AnthropicStreamTranslator,
    build_messages_body,
    parse_messages_reply,
    signed_thinking_only,
)
from gateway.dialects.anthropic import error_from_payload as anthropic_error
from gateway.dialects.base import (
    JSON,
    BadUpstreamResponse,
    CredentialShape,
    EventDecoder,
    NoEmbeddings,
    NoPassthrough,
    UpstreamCall,
    sse_decoder,
)
from gateway.dialects.gemini import (
    GeminiStreamTranslator,
    generate_body,
    parse_generate_reply,
)
from gateway.dialects.gemini import error_from_payload as google_error
from gateway.dialects.vertex_credential import CREDENTIALS, REGION
from gateway.kernel.errors import UpstreamError
from gateway.kernel.types import Auth

#: the Messages version Vertex takes in the body (not a header)
ANTHROPIC_VERSION = "vertex-2023-10-16"
API_VERSION = "v1"
#: the Model Garden list of publisher models is only on v1beta1
LIST_API_VERSION = "v1beta1"
GLOBAL_REGION = "global"
GOOGLE = "google"
ANTHROPIC = "anthropic"
#: the ``wire`` of a model served by Anthropic's publisher
MESSAGES_WIRE = "messages"
#: a model id with this prefix is Anthropic's when its row names no wire
ANTHROPIC_PREFIX = "claude"
MODEL_LIST_PAGE = 1000
#: only these of a client's headers go along to a Claude model on Vertex
FORWARDED = frozenset({"anthropic-beta"})


def _dict(value: Any) -> JSON:
    return value if isinstance(value, dict) else {}


def wire_of_model(model_id: str) -> str | None:
    """The wire of a Vertex model whose row names none: ``messages`` (Anthropic's
    publisher) for a ``claude…`` id, None (the kind's own, Google's) otherwise."""
    return MESSAGES_WIRE if model_id.lower().startswith(ANTHROPIC_PREFIX) else None


# --- URLs and headers -------------------------------------------------------------


def host_url(region: str) -> str:
    """The regional endpoint; ``global`` has no region prefix."""
    if region == GLOBAL_REGION:
        return "https://aiplatform.googleapis.com"
    return f"https://{region}-aiplatform.googleapis.com"


def api_root(base_url: str, version: str = API_VERSION) -> str:
    """``base_url`` with the API ``version``: a path ending with a version
    (``/v1``, ``/v1beta1``) has it replaced, any other gets it added."""
    base = base_url.rstrip("/")
    head, _, last = base.rpartition("/")
    if urlsplit(base).path not in ("", "/") and re.fullmatch(
        r"v\d+((alpha|beta)\d*)?", last
    ):
        base = head
    return f"{base}/{version}"


def _setting(auth: Auth | None, name: str) -> str:
    value = auth.setting(name) if auth is not None else None
    return str(value) if value not in (None, "") else ""


def location_path(auth: Auth | None) -> str:
    """``projects/{project}/locations/{region}`` of the connection."""
    project = quote(_setting(auth, "project"), safe="")
    region = quote(_setting(auth, "region"), safe="")
    return f"projects/{project}/locations/{region}"


def model_url(
    base_url: str, auth: Auth | None, publisher: str, model: str, method: str
) -> str:
    """``{root}/projects/…/locations/…/publishers/{publisher}/models/{model}:{method}``."""
    name = quote(model, safe="-._~@")
    return (
        f"{api_root(base_url)}/{location_path(auth)}/publishers/{publisher}"
        f"/models/{name}:{method}"
    )


def headers(auth: Auth | None, *, json_body: bool = True) -> dict[str, str]:
    out = {"content-type": "application/json"} if json_body else {}
    if auth is not None and auth.token:
        out["authorization"] = f"Bearer {auth.token}"
    quota_project = _setting(auth, "quota_project_id")
    if quota_project:
        out["x-goog-user-project"] = quota_project
    return out


# --- replies shared by both publishers ----------------------------------------------


def publisher_model_ids(payload: Any) -> list[str]:
    """The ids of a ``{"publisherModels": [{"name": "publishers/p/models/<id>"}]}``
    list."""
    models = _dict(payload).get("publisherModels")
    if not isinstance(models, list):
        raise BadUpstreamResponse("model list has no publisherModels")
    return [
        name.rsplit("/", 1)[-1]
        for item in models
        if isinstance(name := _dict(item).get("name"), str) and name
    ]


def error_from_payload(payload: Any, text: str) -> UpstreamError:
    """Anthropic's envelope (a Claude model's own error) or Google's (Vertex's)."""
    if isinstance(payload, dict) and payload.get("type") == "error":
        return anthropic_error(payload, text)
    return google_error(payload, text)


def embed_body(body: JSON) -> JSON:
    """An OpenAI embeddings request -> a ``:predict`` request, one instance per
    input (text only: token-id requests skip this dialect before the call)."""
    raw = body.get("input")
    items: list[Any] = [raw] if isinstance(raw, str) else list(raw or ())
    if items and all(isinstance(t, int) for t in items):
        items = [items]  # one list of token ids
    instances = [
        {"content": item if isinstance(item, str) else json.dumps(item)}
        for item in items
    ]
    out: JSON = {"instances": instances}
    dimensions = body.get("dimensions")
    if isinstance(dimensions, int) and not isinstance(dimensions, bool):
        out["parameters"] = {"outputDimensionality": dimensions}
    return out


def parse_predictions(payload: Any) -> JSON:
    """A ``:predict`` reply -> the OpenAI embeddings list; usage from the
    predictions' ``statistics.token_count`` when they carry one."""
    predictions = _dict(payload).get("predictions")
    if not isinstance(predictions, list) or not predictions:
        raise BadUpstreamResponse("embeddings reply has no predictions")
    data = []
    tokens = 0
    for index, item in enumerate(predictions):
        embeddings = _dict(_dict(item).get("embeddings"))
        values = embeddings.get("values")
        if not isinstance(values, list):
            raise BadUpstreamResponse(f"embeddings reply item {index} has no values")
        data.append({"object": "embedding", "index": index, "embedding": values})
        count = _dict(embeddings.get("statistics")).get("token_count")
        if isinstance(count, int | float) and not isinstance(count, bool):
            tokens += int(count)
    out: JSON = {"object": "list", "data": data}
    if tokens:
        out["usage"] = {"prompt_tokens": tokens, "total_tokens": tokens}
    return out


class _VertexBase:
    """What both publishers share: the endpoint, the credential, errors, discovery."""

    kind = "vertex"
    label = "Google Vertex AI"
    needs_base_url = False
    #: models.dev names it ``google-vertex`` (the preset sets that id)
    catalog = False
    reasoning_effort = False
    in_process = False
    ratelimit_prefixes: tuple[str, ...] = ()
    credentials: CredentialShape = CREDENTIALS
    publisher = GOOGLE

    def connection_base_url(self, base_url: str, auth: Auth | None) -> str | None:
        """The region's host when the provider names no ``base_url``."""
        if base_url:
            return None
        region = _setting(auth, "region")
        return host_url(region) if region and REGION.fullmatch(region) else None

    def stream_decoder(self) -> EventDecoder:
        return sse_decoder()

    def list_models_request(
        self, *, base_url: str, api_key: str | None, auth: Auth | None = None
    ) -> UpstreamCall:
        root = api_root(base_url, LIST_API_VERSION)
        return UpstreamCall(
            url=f"{root}/publishers/{self.publisher}/models?pageSize={MODEL_LIST_PAGE}",
            headers=headers(auth, json_body=False),
            body={},
            method="GET",
            operation="models",
        )

    def parse_model_list(self, payload: Any) -> list[str]:
        return publisher_model_ids(payload)

    def parse_error(
        self, payload: Any, text: str, headers: Mapping[str, str] | None = None
    ) -> UpstreamError:
        return error_from_payload(payload, text)


class VertexDialect(NoPassthrough, _VertexBase):
    """Google's publisher: Gemini models (the kind's own wire, ``chat``)."""

    wire = "chat"
    embeddings = True
    embeddings_token_ids = False  # text only
    counts_tokens = True

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
            url=model_url(base_url, auth, GOOGLE, model, method),
            headers=headers(auth),
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
            url=model_url(base_url, auth, GOOGLE, model, "predict"),
            headers=headers(auth),
            body=embed_body(body),
            operation="embeddings",
        )

    def parse_embeddings(
        self, payload: Any, headers: Mapping[str, str] | None = None
    ) -> JSON:
        return parse_predictions(payload)

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
        """``:countTokens`` of the canonical ``body`` (``count_body``)."""
        return UpstreamCall(
            url=model_url(base_url, auth, GOOGLE, model, "countTokens"),
            headers=headers(auth),
            body=count_body(body),
            operation="count_tokens",
            count_field="totalTokens",
        )

    def stream_translator(
        self, *, created: int, raw: bool = False
    ) -> GeminiStreamTranslator:
        return GeminiStreamTranslator(created=created, raw=raw)


#: the fields of Vertex's ``CountTokensRequest`` a generate body shares
_COUNTED = ("contents", "systemInstruction", "tools")


def count_body(body: JSON) -> JSON:
    """A canonical chat request -> Vertex's ``CountTokensRequest``: the prompt's
    fields of the generate body, at the top level (Vertex takes no
    ``generateContentRequest`` wrapper, nor ``toolConfig`` or ``safetySettings``);
    ``generationConfig`` changes no input token."""
    request = generate_body(body)
    return {k: request[k] for k in _COUNTED if k in request}


def _claude_body(body: JSON, *, stream: bool) -> JSON:
    """A Messages body for Vertex: ``anthropic_version`` in it, no ``model``."""
    out = {k: v for k, v in body.items() if k != "model"}
    out["anthropic_version"] = ANTHROPIC_VERSION
    signed_thinking_only(out)
    if stream:
        out["stream"] = True
    else:
        out.pop("stream", None)
    return out


class VertexAnthropicDialect(NoEmbeddings, _VertexBase):
    """Anthropic's publisher: Claude models (wire ``messages``)."""

    wire = MESSAGES_WIRE
    surfaces = frozenset({"messages"})
    counts_tokens = True
    publisher = ANTHROPIC

    def _call(
        self, base_url: str, auth: Auth | None, model: str, stream: bool
    ) -> tuple[str, dict[str, str]]:
        method = "streamRawPredict" if stream else "rawPredict"
        return model_url(base_url, auth, ANTHROPIC, model, method), headers(auth)

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
        url, found = self._call(base_url, auth, model, stream)
        messages = build_messages_body(body, model=model, stream=stream)
        return UpstreamCall(
            url=url, headers=found, body=_claude_body(messages, stream=stream)
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
        """The client's Messages body as sent but for ``model`` (Vertex names the
        model in the URL) and ``anthropic_version``; its ``anthropic-beta`` goes
        along (09 §2.5)."""
        url, found = self._call(base_url, auth, model, stream)
        extra = {k: v for k, v in forward if k.lower() in FORWARDED}
        return UpstreamCall(
            url=url,
            headers={**extra, **found},
            body=_claude_body(body, stream=stream),
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
        """``…/publishers/anthropic/models/count-tokens:rawPredict`` with the
        client's body, the model named in it (09 §4.5)."""
        counted = _claude_body(body, stream=False)
        counted["model"] = model
        extra = {k: v for k, v in forward if k.lower() in FORWARDED}
        return UpstreamCall(
            url=model_url(base_url, auth, ANTHROPIC, "count-tokens", "rawPredict"),
            headers={**extra, **headers(auth)},
            body=counted,
            passthrough=True,
            operation="count_tokens",
        )

    def stream_translator(
        self, *, created: int, raw: bool = False
    ) -> AnthropicStreamTranslator:
        return AnthropicStreamTranslator(created=created, raw=raw)
