"""The mock's Google Vertex AI wire and its OAuth2 token endpoint.

* ``POST /token``: the JWT-bearer grant of a service account
  (``grant_type=urn:ietf:params:oauth:grant-type:jwt-bearer&assertion=<JWT>``).
  The JWT's ``iss`` must be a service account registered with
  ``authority(state).register(client_email, public_key_pem)``, its RS256 signature
  must verify against that key, its ``scope`` must name ``cloud-platform`` and it
  must not have expired; then ``{"access_token": "ya29.mock-<n>", "expires_in":
  token_lifetime_s}``.  Otherwise Google's ``400 {"error": "invalid_grant"}``.
  ``token_status`` answers every grant with that status instead (a failing
  endpoint).
* ``/v1/projects/{project}/locations/{region}/publishers/{publisher}/models/
  {model}:{method}`` needs ``Authorization: Bearer <a token issued here, unexpired,
  not revoked>``, else ``401 UNAUTHENTICATED``.  Publisher ``google``:
  ``:generateContent``, ``:streamGenerateContent?alt=sse`` (the Gemini wire) and
  ``:predict`` (text embeddings: a vector per instance, with
  ``statistics.token_count``), ``:countTokens`` (``{"totalTokens": n}``, as the
  Gemini wire counts).  Publisher ``anthropic``: ``:rawPredict``,
  ``:streamRawPredict`` (the Messages wire; the body must carry ``anthropic_version:
  vertex-2023-10-16`` and no ``model``, else 400) and ``count-tokens:rawPredict``.
  Scripted errors come in Google's envelope (``RESOURCE_EXHAUSTED`` …), a Claude
  model's 500/529 and 400 in Anthropic's, as Vertex sends them.
* ``GET /v1beta1/publishers/{publisher}/models``: the model list
  (``publisherModels``), bearer checked too.

Every request is recorded (the token endpoint's with ``grant_type`` and ``iss`` as
its body), so a test counts mints by ``path == "/token"``.
"""

from __future__ import annotations

import base64
import itertools
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qs, unquote

import orjson

from providers.mock_upstream.core import MockBehaviour, MockState
from providers.mock_upstream.reply import Reply, _Call, _Frames, _whole
from providers.mock_upstream.wire import (
    _WIRES,
    EMBEDDING_DIMENSIONS,
    _vector,
    _Wire,
)
from providers.mock_upstream.wire_gemini import COUNT as GOOGLE_COUNT
from providers.mock_upstream.wire_gemini import GENERATE
from providers.mock_upstream.wire_gemini import error_body as google_error
from providers.mock_upstream.wire_legacy import COUNT_TOKENS

TOKEN_PATH = "/token"
LIST_PREFIX = "/v1beta1/publishers/"
PROJECTS = "/projects/"
JWT_BEARER = "urn:ietf:params:oauth:grant-type:jwt-bearer"
CLOUD_PLATFORM = "https://www.googleapis.com/auth/cloud-platform"
ANTHROPIC_VERSION = "vertex-2023-10-16"
DEFAULT_TOKEN_LIFETIME_S = 3600
#: statuses Vertex answers itself for a Claude model (Google's envelope)
_GOOGLE_STATUSES = frozenset({401, 403, 404, 429})

#: the dispatcher's one-call handler: (state, wire, path, headers, body, model,
#: is_stream) -> Reply
Completion = Callable[..., Reply]


@dataclass(slots=True)
class Authority:
    """The mock's OAuth2 side: registered service accounts and issued tokens."""

    #: client_email -> PEM public key
    keys: dict[str, bytes] = field(default_factory=dict)
    #: token -> expiry (unix seconds)
    tokens: dict[str, float] = field(default_factory=dict)
    token_lifetime_s: int = DEFAULT_TOKEN_LIFETIME_S
    #: answer every grant with this status (None: grant normally)
    token_status: int | None = None
    _ids: Any = field(default_factory=lambda: itertools.count(1))

    def register(self, client_email: str, public_key_pem: bytes) -> None:
        self.keys[client_email] = public_key_pem

    def revoke(self) -> None:
        """Every issued token stops working (a rotated key, a disabled account)."""
        self.tokens.clear()

    def issue(self, now: float) -> dict[str, Any]:
        token = f"ya29.mock-{next(self._ids)}"
        self.tokens[token] = now + self.token_lifetime_s
        return {
            "access_token": token,
            "expires_in": self.token_lifetime_s,
            "token_type": "Bearer",
        }

    def accepts(self, authorization: str | None, now: float) -> bool:
        scheme, _, token = (authorization or "").partition(" ")
        expiry = self.tokens.get(token) if scheme.lower() == "bearer" else None
        return expiry is not None and now < expiry


def authority(state: MockState) -> Authority:
    """The state's authority (made on first use; ``reset`` keeps it: tokens the
    gateway cached stay good across tests)."""
    found = state.extras.get("vertex")
    if not isinstance(found, Authority):
        found = Authority()
        state.extras["vertex"] = found
    return found


# --- the token endpoint ---------------------------------------------------------------


def _b64(part: str) -> bytes:
    return base64.urlsafe_b64decode(part + "=" * (-len(part) % 4))


def _decode(assertion: str) -> tuple[str, dict[str, Any], bytes] | None:
    """(the signed text, the claims, the signature) of an RS256 JWT, else None."""
    try:
        head, payload, signature = assertion.split(".")
        header = orjson.loads(_b64(head))
        claims = orjson.loads(_b64(payload))
        signed = _b64(signature)
    except ValueError:
        return None
    if not isinstance(header, dict) or header.get("alg") != "RS256":
        return None
    if not isinstance(claims, dict):
        return None
    return f"{head}.{payload}", claims, signed


def _verifies(pem: bytes, text: str, signature: bytes) -> bool:
    from cryptography.exceptions import InvalidSignature
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import padding, rsa

    key = serialization.load_pem_public_key(pem)
    if not isinstance(key, rsa.RSAPublicKey):
        return False
    try:
        key.verify(signature, text.encode(), padding.PKCS1v15(), hashes.SHA256())
    except InvalidSignature:
        return False
    return True


def _grant_problem(auth: Authority, assertion: str, now: float) -> str | None:
    """Why a JWT-bearer assertion is refused (None: it is good)."""
    decoded = _decode(assertion)
    if decoded is None:
        return "Invalid JWT: malformed or not RS256."
    text, claims, signature = decoded
    pem = auth.keys.get(str(claims.get("iss")))
    if pem is None:
        return "Invalid grant: account not found"
    if not _verifies(pem, text, signature):
        return "Invalid JWT Signature."
    exp = claims.get("exp")
    if (
        CLOUD_PLATFORM not in str(claims.get("scope") or "").split()
        or not isinstance(exp, int | float)
        or exp < now
        or not str(claims.get("aud") or "").endswith(TOKEN_PATH)
    ):
        return "Invalid JWT: scope, expiry or audience."
    return None


def _token(state: MockState, path: str, headers: dict[str, str], body: bytes) -> Reply:
    form = {k: v[0] for k, v in parse_qs(body.decode("utf-8", "replace")).items()}
    assertion = form.get("assertion", "")
    try:
        iss = orjson.loads(_b64(assertion.split(".")[1])).get("iss")
    except (ValueError, IndexError, AttributeError):
        iss = None
    record = state.log.start(
        path=path,
        model=None,
        headers=headers,
        body={"grant_type": form.get("grant_type"), "iss": iss},
        is_stream=False,
    )
    auth = authority(state)
    now = time.time()
    if auth.token_status is not None:
        error = {"error": "internal_failure", "error_description": "mock failure"}
        return _whole(auth.token_status, orjson.dumps(error), record=record)
    if form.get("grant_type") != JWT_BEARER:
        error = {"error": "unsupported_grant_type", "error_description": "grant_type"}
        return _whole(400, orjson.dumps(error), record=record)
    problem = _grant_problem(auth, assertion, now)
    if problem is not None:
        error = {"error": "invalid_grant", "error_description": problem}
        return _whole(400, orjson.dumps(error), record=record)
    return _whole(200, orjson.dumps(auth.issue(now)), record=record)


# --- the model wires ------------------------------------------------------------------


class _PredictWire:
    """Text-embedding ``:predict``: a vector per instance, in order."""

    def error_body(self, status: int, message: str) -> dict[str, Any]:
        return google_error(status, message)

    def message(
        self, call: _Call, behaviour: MockBehaviour, tokens: Sequence[str]
    ) -> dict[str, Any]:
        parameters = call.request.get("parameters")
        size = (
            parameters.get("outputDimensionality")
            if isinstance(parameters, dict)
            else None
        )
        predictions = []
        for item in call.request.get("instances") or ():
            text = str(item.get("content") or "") if isinstance(item, dict) else ""
            embeddings: dict[str, Any] = {
                "values": _vector(
                    text, size if isinstance(size, int) else EMBEDDING_DIMENSIONS
                )
            }
            if behaviour.usage:
                embeddings["statistics"] = {
                    "token_count": max(1, len(text) // 4),
                    "truncated": False,
                }
            predictions.append({"embeddings": embeddings})
        return {"predictions": predictions}

    def stream(
        self, call: _Call, behaviour: MockBehaviour, tokens: Sequence[str]
    ) -> _Frames:
        return _Frames(orjson.dumps(self.message(call, behaviour, tokens)), [], b"")

    def stream_error(self, error: Mapping[str, Any]) -> bytes:
        return b""


class _ClaudeWire:
    """A Claude model on Vertex: Anthropic's Messages wire; the errors Vertex
    answers itself (auth, quota, a model not enabled) in Google's envelope."""

    def __init__(self, inner: _Wire) -> None:
        self.inner = inner

    def error_body(self, status: int, message: str) -> dict[str, Any]:
        if status in _GOOGLE_STATUSES:
            return google_error(status, message)
        return self.inner.error_body(status, message)

    def message(
        self, call: _Call, behaviour: MockBehaviour, tokens: Sequence[str]
    ) -> dict[str, Any]:
        return self.inner.message(call, behaviour, tokens)

    def stream(
        self, call: _Call, behaviour: MockBehaviour, tokens: Sequence[str]
    ) -> _Frames:
        return self.inner.stream(call, behaviour, tokens)

    def stream_error(self, error: Mapping[str, Any]) -> bytes:
        return self.inner.stream_error(error)


PREDICT = _PredictWire()
CLAUDE = _ClaudeWire(_WIRES["/messages"])
CLAUDE_COUNT = _ClaudeWire(COUNT_TOKENS)

#: (publisher, method) -> (wire, streams)
_METHODS: dict[tuple[str, str], tuple[_Wire, bool]] = {
    ("google", "generateContent"): (GENERATE, False),
    ("google", "streamGenerateContent"): (GENERATE, True),
    ("google", "predict"): (PREDICT, False),
    ("google", "countTokens"): (GOOGLE_COUNT, False),
    ("anthropic", "rawPredict"): (CLAUDE, False),
    ("anthropic", "streamRawPredict"): (CLAUDE, True),
}


def is_vertex(route: str) -> bool:
    """True for the paths this wire serves (``route``: the path without ``/v1`` and
    query)."""
    return route == TOKEN_PATH or route.startswith((PROJECTS, LIST_PREFIX))


def route_model(route: str) -> tuple[str, str, str] | None:
    """``(publisher, model, method)`` of a model path, else None."""
    parts = route.split("/")
    # ['', 'projects', p, 'locations', r, 'publishers', pub, 'models', 'model:method']
    if len(parts) != 9 or parts[3] != "locations" or parts[5] != "publishers":  # noqa: PLR2004
        return None
    if parts[7] != "models":
        return None
    name, colon, method = parts[8].rpartition(":")
    return (parts[6], unquote(name), method) if colon and name else None


def _claude_problem(body: bytes, *, counting: bool) -> str | None:
    try:
        request = orjson.loads(body)
    except orjson.JSONDecodeError:
        return "The request body is not JSON."
    if not isinstance(request, dict):
        return "The request body must be a JSON object."
    if request.get("anthropic_version") != ANTHROPIC_VERSION:
        return f"anthropic_version: must be {ANTHROPIC_VERSION}"
    if ("model" in request) is not counting:  # count-tokens names it, others never
        return "model: Extra inputs are not permitted" if not counting else "model"
    return None


def answer(
    state: MockState,
    method: str,
    route: str,
    path: str,
    headers: dict[str, str],
    body: bytes,
    completion: Completion,
) -> Reply:
    """One Vertex request; ``completion`` is the dispatcher's call handler."""
    if route == TOKEN_PATH and method == "POST":
        return _token(state, path, headers, body)
    found = route_model(route)
    if not authority(state).accepts(headers.get("authorization"), time.time()):
        record = state.log.start(
            path=path,
            model=found[1] if found else None,
            headers=headers,
            body=None,
            is_stream=False,
        )
        message = "Request had invalid authentication credentials."
        return _whole(401, orjson.dumps(google_error(401, message)), record=record)
    if route.startswith(LIST_PREFIX) and method == "GET":
        return _list(state, route, path, headers)
    if found is None or method != "POST":
        status = 405 if found is not None else 404
        message = f"{method} {path} is not served by the mock upstream."
        return _whole(status, orjson.dumps(google_error(status, message)))
    return _model_call(state, path, headers, body, found, completion)


def _model_call(
    state: MockState,
    path: str,
    headers: dict[str, str],
    body: bytes,
    found: tuple[str, str, str],
    completion: Completion,
) -> Reply:
    publisher, model, verb = found
    counting = (publisher, model, verb) == ("anthropic", "count-tokens", "rawPredict")
    wire = _METHODS.get((publisher, verb))
    if wire is None and not counting:
        message = f"POST {path} is not served by the mock upstream."
        return _whole(404, orjson.dumps(google_error(404, message)))
    if publisher == "anthropic":
        problem = _claude_problem(body, counting=counting)
        if problem is not None:
            record = state.log.start(
                path=path, model=model, headers=headers, body=None, is_stream=False
            )
            error = CLAUDE.inner.error_body(400, problem)
            return _whole(400, orjson.dumps(error), record=record)
    if counting or wire is None:
        counted = orjson.loads(body).get("model") or model
        return completion(
            state, CLAUDE_COUNT, path, headers, body, model=counted, is_stream=False
        )
    return completion(
        state, wire[0], path, headers, body, model=model, is_stream=wire[1]
    )


def _list(state: MockState, route: str, path: str, headers: dict[str, str]) -> Reply:
    publisher = route[len(LIST_PREFIX) :].partition("/")[0]
    record = state.log.start(
        path=path, model=None, headers=headers, body=None, is_stream=False
    )
    ids = dict.fromkeys([*state.model_ids, *state.script.model_ids()])
    return _whole(200, orjson.dumps(models(publisher, ids)), record=record)


def models(publisher: str, ids: Iterable[str]) -> dict[str, Any]:
    """``GET /v1beta1/publishers/{publisher}/models``."""
    return {
        "publisherModels": [
            {
                "name": f"publishers/{publisher}/models/{model_id}",
                "versionId": "001",
                "openSourceCategory": "PROPRIETARY",
            }
            for model_id in ids
        ]
    }
