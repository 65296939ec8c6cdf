"""The mock's Azure OpenAI wire (spec 10 §1, §3): OpenAI's bodies at Azure's paths,
behind Azure's credentials.

* ``/openai/v1/chat/completions``, ``/openai/v1/responses``, ``/openai/v1/embeddings``
  (the v1 API: the deployment is the body's ``model``);
  ``/openai/deployments/{deployment}/chat/completions?api-version=…`` and
  ``…/embeddings`` (the deployment form: the deployment is in the path), and
  ``/openai/responses?api-version=…``.  Answers are the OpenAI wires' own, with the
  scripted behaviour of the deployment (every knob applies: a 429 with
  ``retry-after``, a content-filter ``error_body``, tool calls, streams); chat
  answers carry Azure's ``prompt_filter_results`` (a stream opens with a chunk of
  no choices holding them, as Azure's do).
* ``GET /openai/deployments?api-version=…`` (and ``GET /openai/v1/models``): the
  deployments, for discovery.
* ``POST /{tenant}/oauth2/v2.0/token``: a Microsoft Entra token endpoint (client
  credentials grant, scope ``https://cognitiveservices.azure.com/.default``).  The
  client secret ``CLIENT_SECRET`` is accepted for any tenant and client; any other
  is refused as Entra refuses it (400 ``invalid_client``).  Tokens are signed, so the
  wire checks them without remembering them; each one records its mint in the
  request log (``model`` None, path of the token endpoint).

Every Azure call needs ``api-key: API_KEY`` or ``Authorization: Bearer <a token this
mock minted>``; anything else is Azure's 401.  Errors are Azure's shape:
``{"error": {"code": "<status or name>", "message": …}}``.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Final
from urllib.parse import parse_qs, unquote

import orjson

from providers.mock_upstream.core import MockBehaviour, MockState
from providers.mock_upstream.reply import Reply, _Call, _Frames, _whole
from providers.mock_upstream.wire import _OPENAI, _WIRES, _Wire

PREFIX: Final = "/openai"
API_KEY: Final = "azure-mock-api-key-0123456789"
CLIENT_SECRET: Final = "azure-mock-client-secret-0123456789"
SCOPE: Final = "https://cognitiveservices.azure.com/.default"
TOKEN_LIFETIME_S: Final = 3600
_SIGNING_KEY: Final = b"omniroute-mock-entra"
_TOKEN_PATH = re.compile(r"/(?P<tenant>[^/]+)/oauth2/v2\.0/token")
_DEPLOYMENT_PATH = re.compile(
    r"/openai/deployments/(?P<deployment>[^/]+)/(?P<operation>chat/completions|embeddings)"
)
_V1_OPERATIONS = {
    "/openai/v1/chat/completions": "/chat/completions",
    "/openai/v1/responses": "/responses",
    "/openai/v1/embeddings": "/embeddings",
}
_STATUS_NAMES = {401: "401", 404: "DeploymentNotFound", 429: "429"}

#: Azure's annotation of a prompt its content filter let through
_PROMPT_FILTER = [
    {
        "prompt_index": 0,
        "content_filter_results": {
            name: {"filtered": False, "severity": "safe"}
            for name in ("hate", "self_harm", "sexual", "violence")
        },
    }
]


class _AzureChatWire:
    """Chat Completions as Azure sends them: the reply carries
    ``prompt_filter_results``, and a stream opens with a chunk of no choices that
    carries them (before the role chunk)."""

    def error_body(self, status: int, message: str) -> dict[str, Any]:
        return _OPENAI.error_body(status, message)

    def message(
        self, call: _Call, behaviour: MockBehaviour, tokens: Sequence[str]
    ) -> dict[str, Any]:
        return {
            **_OPENAI.message(call, behaviour, tokens),
            "prompt_filter_results": _PROMPT_FILTER,
        }

    def stream(
        self, call: _Call, behaviour: MockBehaviour, tokens: Sequence[str]
    ) -> _Frames:
        frames = _OPENAI.stream(call, behaviour, tokens)
        first = {
            "id": "",
            "object": "",
            "created": 0,
            "model": "",
            "choices": [],
            "prompt_filter_results": _PROMPT_FILTER,
        }
        head = b"data: " + orjson.dumps(first) + b"\n\n" + frames.head
        return _Frames(head, frames.pieces, frames.tail)

    def stream_error(self, error: Mapping[str, Any]) -> bytes:
        return _OPENAI.stream_error(error)


_AZURE_CHAT = _AzureChatWire()

#: dispatch's ``_completion``: (state, wire, path, headers, body, model=...) -> Reply
Completion = Callable[..., Reply]


def is_azure(route: str) -> bool:
    """True for the paths this wire answers (the route: path without query)."""
    return route.startswith(PREFIX + "/") or bool(_TOKEN_PATH.fullmatch(route))


def error_body(status: int, message: str) -> dict[str, Any]:
    return {
        "error": {"code": _STATUS_NAMES.get(status, str(status)), "message": message}
    }


def _error(status: int, message: str, record: Any = None) -> Reply:
    return _whole(status, orjson.dumps(error_body(status, message)), record=record)


# --- tokens ---------------------------------------------------------------------------


def _signature(claims: bytes) -> str:
    digest = hmac.new(_SIGNING_KEY, claims, hashlib.sha256).digest()
    return base64.urlsafe_b64encode(digest).decode().rstrip("=")


def issue_token(tenant: str, client_id: str, serial: int) -> str:
    claims = orjson.dumps({"tid": tenant, "appid": client_id, "n": serial})
    body = base64.urlsafe_b64encode(claims).decode().rstrip("=")
    return f"mock-entra.{body}.{_signature(claims)}"


def token_valid(token: str) -> bool:
    """True for a token this mock issued (by its signature)."""
    parts = token.split(".")
    if len(parts) != 3 or parts[0] != "mock-entra":  # noqa: PLR2004
        return False
    try:
        claims = base64.urlsafe_b64decode(parts[1] + "=" * (-len(parts[1]) % 4))
    except ValueError:
        return False
    return hmac.compare_digest(_signature(claims), parts[2])


def authorized(headers: dict[str, str]) -> bool:
    if hmac.compare_digest(headers.get("api-key", ""), API_KEY):
        return True
    scheme, _, token = headers.get("authorization", "").partition(" ")
    return scheme.lower() == "bearer" and token_valid(token.strip())


def _token(
    state: MockState, tenant: str, path: str, headers: dict[str, str], body: bytes
) -> Reply:
    form = {k: v[0] for k, v in parse_qs(body.decode("utf-8", "replace")).items()}
    shown = {k: ("***" if k == "client_secret" else v) for k, v in form.items()}
    record = state.log.start(
        path=path, model=None, headers=headers, body=shown, is_stream=False
    )
    if form.get("grant_type") != "client_credentials" or form.get("scope") != SCOPE:
        payload: dict[str, Any] = {
            "error": "invalid_request",
            "error_description": "AADSTS900144: grant_type client_credentials and "
            "the Cognitive Services scope are required.",
            "error_codes": [900144],
        }
        return _whole(400, orjson.dumps(payload), record=record)
    secret = form.get("client_secret", "")
    if not hmac.compare_digest(secret, CLIENT_SECRET):
        payload = {
            "error": "invalid_client",
            "error_description": "AADSTS7000215: Invalid client secret provided.",
            "error_codes": [7000215],
        }
        return _whole(401, orjson.dumps(payload), record=record)
    token = issue_token(unquote(tenant), form.get("client_id", ""), state.next_id())
    payload = {
        "token_type": "Bearer",
        "expires_in": TOKEN_LIFETIME_S,
        "ext_expires_in": TOKEN_LIFETIME_S,
        "access_token": token,
    }
    return _whole(200, orjson.dumps(payload), record=record)


# --- the API --------------------------------------------------------------------------


def _deployments(state: MockState, path: str, headers: dict[str, str]) -> Reply:
    record = state.log.start(
        path=path, model=None, headers=headers, body=None, is_stream=False
    )
    ids = dict.fromkeys([*state.model_ids, *state.script.model_ids()])
    payload = {
        "object": "list",
        "data": [
            {
                "id": name,
                "object": "deployment",
                "model": name,
                "status": "succeeded",
                "owner": "organization-owner",
                "scale_settings": {"scale_type": "standard"},
            }
            for name in ids
        ],
    }
    return _whole(200, orjson.dumps(payload), record=record)


def _operation(route: str, query: str) -> tuple[_Wire, str | None] | None:
    """The wire of a completion path and the deployment its path names."""
    if route == PREFIX + "/v1/chat/completions":
        return _AZURE_CHAT, None
    if route in _V1_OPERATIONS:
        return _WIRES[_V1_OPERATIONS[route]], None
    if "api-version=" not in query:
        return None  # the deployment form always names its API version
    if route == PREFIX + "/responses":
        return _WIRES["/responses"], None
    found = _DEPLOYMENT_PATH.fullmatch(route)
    if found is None:
        return None
    chat = found["operation"] == "chat/completions"
    wire = _AZURE_CHAT if chat else _WIRES["/embeddings"]
    return wire, unquote(found["deployment"])


def answer(
    state: MockState,
    method: str,
    route: str,
    path: str,
    headers: dict[str, str],
    body: bytes,
    completion: Completion,
) -> Reply:
    """One request to an Azure path (``is_azure``)."""
    token_path = _TOKEN_PATH.fullmatch(route)
    if token_path is not None:
        if method != "POST":
            return _error(405, f"{method} is not allowed on the token endpoint.")
        return _token(state, token_path["tenant"], path, headers, body)
    if not authorized(headers):
        record = state.log.start(
            path=path, model=None, headers=headers, body=None, is_stream=False
        )
        return _error(
            401,
            "Access denied due to invalid subscription key or wrong API endpoint. "
            "Make sure to provide a valid key for an active subscription and use a "
            "correct regional API endpoint for your resource.",
            record,
        )
    return _api(state, method, route, path, headers, body, completion)


def _api(
    state: MockState,
    method: str,
    route: str,
    path: str,
    headers: dict[str, str],
    body: bytes,
    completion: Completion,
) -> Reply:
    query = path.partition("?")[2]
    listing = route == PREFIX + "/deployments" and "api-version=" in query
    operation = None if listing else _operation(route, query)
    expected = "GET" if listing or route == PREFIX + "/v1/models" else "POST"
    if operation is None and expected == "POST":
        return _error(404, "Resource not found")
    if method != expected:
        return _error(405, f"{method} {path} is not allowed.")
    if operation is None:
        return _deployments(state, path, headers)
    wire, deployment = operation
    return completion(state, wire, path, headers, body, model=deployment)
