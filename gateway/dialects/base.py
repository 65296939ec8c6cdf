"""The dialect contract: how one provider kind is spoken to, in OpenAI terms.

A dialect is pure: it receives parsed JSON (``dict``) and returns parsed JSON or plain
value objects.  Serialisation and I/O belong to ``gateway.pipeline.upstream``.
Everything a client
sees is OpenAI-shaped, so every dialect translates *to* the OpenAI Chat Completions
shapes (completion, ``chat.completion.chunk``, ``usage``).

Invariants every dialect keeps:

* ``build_request`` never mutates the body it is given;
* credentials only ever appear in the returned headers;
* a stream translator yields chunks in upstream order and never invents content.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol
from urllib.parse import urlsplit

from gateway.kernel.errors import UpstreamError
from gateway.kernel.sse import SSEDecoder, SSEEvent
from gateway.kernel.types import Auth

JSON = dict[str, Any]


#: hosts whose API lives at the root, with no version prefix: a bare base URL of
#: one of them is used as given (``https://api.perplexity.ai/chat/completions``)
ROOT_API_HOSTS = frozenset({"api.perplexity.ai"})


def endpoint_url(base_url: str, path: str) -> str:
    """``base_url`` joined with an endpoint ``path`` (``/chat/completions``).

    A base URL with no path (``https://api.anthropic.com``, ``http://host:8080``) gets
    the API version prefix ``/v1``, as the vendors' own SDKs add it, unless its host
    is one of ``ROOT_API_HOSTS``; a base URL with a path
    (``https://api.openai.com/v1``, ``https://host/proxy``) is used as given.
    """
    base = base_url.rstrip("/")
    parts = urlsplit(base)
    if parts.path in ("", "/") and parts.hostname not in ROOT_API_HOSTS:
        base += "/v1"
    return base + path


class Signer(Protocol):
    """Signs one request over the exact bytes sent (AWS SigV4, spec 10 §1): pure, the
    clock passed in; returns the headers to add."""

    def __call__(
        self,
        *,
        method: str,
        url: str,
        headers: Mapping[str, str],
        body: bytes,
        now: float,
    ) -> dict[str, str]: ...


class EventDecoder(Protocol):
    """Turns a stream's bytes into events (``SSEEvent``: the event name and its data
    as JSON text), chunk by chunk: server-sent events, or Bedrock's binary
    event-stream frames."""

    def feed(self, chunk: bytes) -> list[SSEEvent]: ...

    def flush(self) -> list[SSEEvent]: ...


#: a problem with one credential field: (field, message); validation prefixes the
#: connection's path (``connections[0].region: is required for kind 'bedrock'``)
CredentialProblem = tuple[str, str]


@dataclass(frozen=True, slots=True, kw_only=True)
class CredentialShape:
    """The credential a kind's connections hold (spec 10 §3), declared by its
    dialect: what validation, storage, export and the admin form derive from.

    ``secrets`` are encrypted at rest and accept ``env:NAME`` like ``api_key``;
    ``settings`` are plain connection fields (``region``, ``project``,
    ``use_default_credentials``); ``provider_settings`` the plain fields a provider
    may give for all its connections (a connection's own wins).  ``check_provider``
    sees the provider's settings; ``check_connection`` a connection's fields
    (secrets as given: a literal or ``env:NAME``) and the provider's settings; each
    names every unusable field.
    """

    api_key: bool = True
    secrets: tuple[str, ...] = ()
    settings: tuple[str, ...] = ()
    provider_settings: tuple[str, ...] = ()
    check_provider: Callable[[Mapping[str, Any]], list[CredentialProblem]] = field(
        default=lambda provider: [], compare=False
    )
    check_connection: Callable[
        [Mapping[str, Any], Mapping[str, Any]], list[CredentialProblem]
    ] = field(default=lambda connection, provider: [], compare=False)

    @property
    def fields(self) -> tuple[str, ...]:
        return (*(("api_key",) if self.api_key else ()), *self.secrets, *self.settings)


#: the credential of most kinds: one ``api_key`` (or none, for a local server)
API_KEY = CredentialShape()


@dataclass(frozen=True, slots=True, kw_only=True)
class UpstreamCall:
    """One HTTP request to send upstream (POST with a JSON body)."""

    url: str
    headers: dict[str, str]
    body: JSON
    #: the client's own body, sent unchanged but for ``model`` (spec 09 §2.5)
    passthrough: bool = False
    #: what the answer is: ``chat`` (a completion), ``embeddings`` (09 §5),
    #: ``count_tokens`` (09 §4.5) or ``models`` (a model list, 10 §2)
    operation: str = "chat"
    #: ``POST`` with ``body``, or ``GET`` (a model list, spec 10 §2)
    method: str = "POST"
    #: the key of a ``count_tokens`` answer that holds the count (Gemini's
    #: ``totalTokens``)
    count_field: str = "input_tokens"
    #: signs the serialised body just before it is sent (None: nothing to sign)
    sign: Signer | None = field(default=None, compare=False, repr=False)
    #: further model lists whose ids join this one's (Bedrock's inference profiles
    #: beside its foundation models, spec 10 §2); only on a ``models`` call
    also: tuple[UpstreamCall, ...] = ()
    #: an embeddings request its upstream takes one input at a time (Bedrock's
    #: Titan): the calls sent in this one's place, one per input in input order,
    #: their replies joined by ``join_embeddings`` (spec 09 §5.2, amended); this
    #: call's own fields are its first part's.  Empty: this call is sent itself
    parts: tuple[UpstreamCall, ...] = ()


def join_embeddings(replies: Sequence[JSON]) -> JSON:
    """The parsed replies of a call's ``parts`` as one OpenAI embeddings list: the
    items in part order, re-indexed from 0; ``usage`` the sum of the parts' when
    every part reported one (else none: the gateway's estimate applies)."""
    data: list[JSON] = []
    for reply in replies:
        items = reply.get("data")
        for item in items if isinstance(items, list) else ():
            data.append({**item, "index": len(data)})
    out: JSON = {"object": "list", "data": data}
    usages = [reply.get("usage") for reply in replies]
    if usages and all(isinstance(u, dict) for u in usages):
        prompt = sum(_count(u, "prompt_tokens") for u in usages if u is not None)
        total = sum(_count(u, "total_tokens") for u in usages if u is not None)
        out["usage"] = {"prompt_tokens": prompt, "total_tokens": total or prompt}
    return out


def _count(usage: Mapping[str, Any], name: str) -> int:
    value = usage.get(name)
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def sse_decoder() -> EventDecoder:
    """The stream decoder of every server-sent-events dialect."""
    return SSEDecoder()


#: the key of a chunk that carries one upstream event as received, for a passthrough
#: relay: ``{RAW: (event name, data)}``; it carries nothing else
RAW = "_raw"


class StreamTranslator(Protocol):
    """Per-attempt state that turns upstream stream events into OpenAI chunks."""

    def translate(self, event: str | None, data: Any) -> list[JSON]:
        """One decoded SSE event (``data`` parsed from JSON) -> zero or more chunks.

        Raises ``StreamErrorEvent`` when the event is an error object.
        """
        ...

    def partial_usage(self) -> JSON | None:
        """The usage the upstream reported so far, OpenAI-shaped, for a stream that
        breaks before its usage chunk; None when it reports usage only at the end."""
        ...

    @property
    def finished(self) -> bool:
        """True once the upstream signalled the normal end of the stream."""
        ...


class StreamErrorEvent(Exception):
    """The upstream sent an error object inside its stream."""

    def __init__(self, error: UpstreamError) -> None:
        super().__init__(error.message)
        self.error = error


class BadUpstreamResponse(Exception):
    """A 2xx body that is not a usable completion (spec 02 §6.1 ``bad_response``)."""


class Dialect(Protocol):
    """One provider kind: how it is spoken to, and what it declares about itself.

    The declarations are the only place a kind's facts live: the provider model's
    choices, the validators, the catalog, the auto engine and the upstream client
    read them from ``gateway.dialects.REGISTRY``.
    """

    #: the provider kind (``Provider.kind``)
    kind: str
    #: the admin's name for the kind
    label: str
    #: a provider of this kind needs an http(s) ``base_url``
    needs_base_url: bool
    #: its models' prices and limits come from the models.dev catalog (spec 06 §3.2)
    catalog: bool
    #: passes OpenAI's ``reasoning_effort`` through (``X-OmniRoute-Effort``, 04 §5.3)
    reasoning_effort: bool
    #: served in-process, not over the network (the built-in ``mock`` kind)
    in_process: bool
    #: the response headers that carry its rate-limit readings (03 §8.5)
    ratelimit_prefixes: tuple[str, ...]
    #: the client wires it speaks itself (``chat``, ``messages``, ``responses``,
    #: ``completions``): a request of one goes to it by passthrough (spec 09 §2.5)
    surfaces: frozenset[str]
    #: the ``wire`` setting that selects it for its kind (``chat``: the kind's own;
    #: spec 10 §5)
    wire: str
    #: answers embeddings requests (spec 09 §5.2: else a ``capability_mismatch``)
    embeddings: bool
    #: takes embeddings inputs given as token ids (OpenAI's ``input: [[1, 2]]``);
    #: else such a request skips it as a ``capability_mismatch`` on ``input``
    embeddings_token_ids: bool
    #: counts a Messages prompt's tokens itself (spec 09 §4.5)
    counts_tokens: bool
    #: the credential its connections hold (spec 10 §3)
    credentials: CredentialShape

    def connection_base_url(self, base_url: str, auth: Auth | None) -> str | None:
        """A connection's own endpoint when its credential settings name one (a
        region, a project); None: the provider's ``base_url``."""
        ...

    def stream_decoder(self) -> EventDecoder:
        """A fresh decoder of this kind's stream framing."""
        ...

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
        """The upstream request for an OpenAI-shaped ``body`` aimed at ``model``."""
        ...

    def parse_completion(self, payload: Any, *, created: int) -> JSON:
        """A parsed 2xx body -> an OpenAI ``chat.completion`` object.

        ``created`` (unix seconds) is used where the upstream gives no timestamp.

        Raises ``BadUpstreamResponse`` when it has no choices or holds an error.
        """
        ...

    def passthrough_request(
        self,
        *,
        base_url: str,
        api_key: str | None,
        model: str,
        body: JSON,
        stream: bool,
        forward: tuple[tuple[str, str], ...],
        surface: str,
        auth: Auth | None = None,
    ) -> UpstreamCall:
        """The client's own body of wire ``surface`` (one of ``surfaces``) aimed at
        ``model``, with its ``forward`` headers."""
        ...

    def embeddings_request(
        self,
        *,
        base_url: str,
        api_key: str | None,
        model: str,
        body: JSON,
        auth: Auth | None = None,
    ) -> UpstreamCall:
        """An OpenAI embeddings ``body`` aimed at ``model`` (only where
        ``embeddings``)."""
        ...

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
        """A ``count_tokens`` request aimed at ``model`` (only where
        ``counts_tokens``): ``body`` is the client's Messages body when the dialect
        speaks ``messages``, else the canonical chat body; the 2xx answer holds the
        count under the call's ``count_field``."""
        ...

    def list_models_request(
        self, *, base_url: str, api_key: str | None, auth: Auth | None = None
    ) -> UpstreamCall:
        """The upstream's model list (``GET``), for discovery and Test connection
        (spec 10 §2)."""
        ...

    def parse_model_list(self, payload: Any) -> list[str]:
        """The model ids of a parsed 2xx model list; ``BadUpstreamResponse`` when it
        holds none."""
        ...

    def parse_embeddings(
        self, payload: Any, headers: Mapping[str, str] | None = None
    ) -> JSON:
        """A parsed 2xx embeddings body -> the OpenAI embeddings list object
        (``headers``: the reply's, where a kind reports the usage there, as
        Bedrock's ``X-Amzn-Bedrock-Input-Token-Count``).

        Raises ``BadUpstreamResponse`` when it holds no vectors."""
        ...

    def stream_translator(self, *, created: int, raw: bool = False) -> StreamTranslator:
        """Fresh per-attempt translator; ``created`` stamps chunks that lack one;
        ``raw``: every event also comes out as a ``RAW`` chunk (a passthrough)."""
        ...

    def parse_error(
        self, payload: Any, text: str, headers: Mapping[str, str] | None = None
    ) -> UpstreamError:
        """The upstream's error message/code/param from a non-2xx body (``headers``:
        the reply's, where a kind names the error there, as Bedrock's
        ``x-amzn-errortype``)."""
        ...


# --- operations a dialect does not serve ----------------------------------------------
#
# A dialect mixes in one of these per operation its upstream has no counterpart for:
# the declaration (``surfaces``, ``embeddings``, ``counts_tokens``) and the method the
# pipeline then never calls come together, so they cannot disagree.


class NoPassthrough:
    """No client wire is the upstream's own: every attempt translates (09 §2.5)."""

    label: str
    surfaces: frozenset[str] = frozenset()

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
        raise NotImplementedError(f"no client wire is {self.label}'s own")


class NoEmbeddings:
    """The upstream has no embeddings API (09 §5.2: a ``capability_mismatch``)."""

    label: str
    embeddings: bool = False
    embeddings_token_ids: bool = False

    def embeddings_request(
        self,
        *,
        base_url: str,
        api_key: str | None,
        model: str,
        body: JSON,
        auth: Auth | None = None,
    ) -> UpstreamCall:
        raise NotImplementedError(f"{self.label} has no embeddings API")

    def parse_embeddings(
        self, payload: Any, headers: Mapping[str, str] | None = None
    ) -> JSON:
        raise BadUpstreamResponse(f"{self.label} has no embeddings API")


class NoCountTokens:
    """The upstream counts no tokens (09 §4.5: the gateway estimates)."""

    label: str
    counts_tokens: bool = False

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
        raise NotImplementedError(f"{self.label} counts no tokens")
