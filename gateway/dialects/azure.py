"""Azure OpenAI (spec 10 §1, §3): OpenAI's wire at Azure's addresses, with Azure's
credentials.

The bodies, replies and streams are OpenAI's, so this module only changes where a
request goes and how it is authenticated; the translation is the ``openai`` kind's
(``AzureDialect``, Chat Completions) and its Responses wire's
(``AzureResponsesDialect``, ``wire: responses``).

* **Where.** The origin is the provider's ``base_url`` when given (a custom domain,
  an API gateway in front of Azure, the mock), else
  ``https://{resource}.openai.azure.com``; a connection may name its own
  ``resource``.  Without ``api_version`` the v1 API is used:
  ``{origin}/openai/v1/chat/completions`` (``/responses``, ``/embeddings``) with the
  deployment as the body's ``model``.  With ``api_version`` the deployment form:
  ``{origin}/openai/deployments/{deployment}/chat/completions?api-version=…`` (and
  ``/embeddings``); Azure serves Responses at
  ``{origin}/openai/responses?api-version=…`` with the deployment as ``model``.
  The ``model`` a dialect is handed is the model's deployment
  (``ModelInfo.upstream_id``: its ``deployment``, else its id).
* **Auth.** A connection holds an ``api_key`` (sent as ``api-key``) or a Microsoft
  Entra client credential (``tenant_id``, ``client_id``, ``client_secret``) whose
  token ``providers.entra`` mints before the request is built (``Auth.token``, sent
  as ``Authorization: Bearer``).  The token request itself is described here
  (``token_url``, ``token_form``), pure; the minter only sends it.
* **Streams** are OpenAI's chunks; the chunk of no choices that opens an Azure
  stream with the prompt's ``prompt_filter_results`` is dropped, so clients see
  OpenAI's shape (replies keep the field: an extra key harms no client).
* **Discovery** lists the resource's deployments
  (``GET {origin}/openai/deployments?api-version=2023-03-15-preview``, the
  data-plane listing); Test connection uses the same call.
* **Errors** are OpenAI-shaped; Azure's content filter refusing a prompt (a 400
  whose ``code`` or ``innererror.code`` is ``content_filter`` /
  ``ResponsibleAIPolicyViolation``) comes back with code ``content_filter`` and is the
  client's request (``invalid_request``: never failed over, never cools the
  connection); 401/403 are the connection's credential, 429 a rate limit (its
  ``retry-after`` / ``retry-after-ms`` read by the pipeline), 404
  ``DeploymentNotFound`` a missing model.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import replace
from typing import Any, Final
from urllib.parse import quote, urlencode, urlsplit

from gateway.dialects.base import (
    JSON,
    CredentialProblem,
    CredentialShape,
    StreamTranslator,
    UpstreamCall,
)
from gateway.dialects.openai import (
    OpenAIDialect,
    OpenAIStreamTranslator,
    error_from_payload,
    model_ids,
)
from gateway.dialects.openai_responses import OpenAIResponsesDialect
from gateway.kernel.errors import UpstreamError
from gateway.kernel.types import Auth

#: the Entra client-credential fields (spec 10 §3), all three or none
ENTRA_FIELDS: Final = ("tenant_id", "client_id", "client_secret")
#: Microsoft's public-cloud authority (a sovereign cloud or a test names its own)
DEFAULT_AUTHORITY: Final = "https://login.microsoftonline.com"
#: the scope of an Azure OpenAI token (spec 10 §3)
ENTRA_SCOPE: Final = "https://cognitiveservices.azure.com/.default"
#: the last API version with the data-plane deployments listing
DEPLOYMENTS_API_VERSION: Final = "2023-03-15-preview"
#: an error code of Azure's content filter
CONTENT_FILTER: Final = "content_filter"

#: a resource name is the custom subdomain: 2-64 letters, digits and hyphens
_RESOURCE = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9-]{0,62}[A-Za-z0-9])?")
_API_VERSION = re.compile(r"\d{4}-(0[1-9]|1[0-2])-(0[1-9]|[12]\d|3[01])(-preview)?")
#: a deployment name as Azure accepts it: letters, digits, ``-``, ``_``, ``.``
DEPLOYMENT = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9._-]{0,63})")
#: a tenant is a GUID or a domain name
_TENANT = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9.-]{0,252})")
_FILTER_CODES = frozenset({"content_filter", "responsibleaipolicyviolation"})
_SECRET_MASK = "***"


# --- settings and their checks -------------------------------------------------------


def _is_reference(value: Any) -> bool:
    """A secret given as ``env:NAME`` or kept as ``***``: its value is not known."""
    return isinstance(value, str) and (
        value.startswith("env:") or value == _SECRET_MASK
    )


def _check_settings(given: Mapping[str, Any]) -> list[CredentialProblem]:
    problems: list[CredentialProblem] = []
    resource = given.get("resource")
    if resource is not None and not (
        isinstance(resource, str) and _RESOURCE.fullmatch(resource)
    ):
        problems.append(
            ("resource", "must be the resource name (letters, digits and hyphens)")
        )
    version = given.get("api_version")
    if version is not None and not (
        isinstance(version, str) and _API_VERSION.fullmatch(version)
    ):
        problems.append(
            ("api_version", "must look like 2024-10-21 or 2025-04-01-preview")
        )
    authority = given.get("authority_host")
    if authority is not None and not (
        isinstance(authority, str)
        and urlsplit(authority).scheme in ("http", "https")
        and urlsplit(authority).netloc
    ):
        problems.append(("authority_host", "must be an http or https URL"))
    return problems


def _check_connection(
    given: Mapping[str, Any], provider: Mapping[str, Any]
) -> list[CredentialProblem]:
    problems = _check_settings(given)
    if not given.get("resource") and not provider.get("resource"):
        problems.append(
            ("resource", "is required for kind 'azure' (on the provider or here)")
        )
    entra = [name for name in ENTRA_FIELDS if given.get(name)]
    if entra and len(entra) < len(ENTRA_FIELDS):
        problems += [
            (name, "is required with " + " and ".join(entra) + " (Entra credential)")
            for name in ENTRA_FIELDS
            if name not in entra
        ]
    if entra and given.get("api_key"):
        problems.append(
            (
                "api_key",
                "give api_key or an Entra credential (tenant_id, ...), not both",
            )
        )
    tenant = given.get("tenant_id")
    if tenant and not _is_reference(tenant) and not _TENANT.fullmatch(str(tenant)):
        problems.append(("tenant_id", "must be a tenant id (a GUID) or domain name"))
    return problems


#: ``api_key``, or the Entra fields; ``resource``, ``api_version`` and
#: ``authority_host`` on the provider, a connection's own winning (spec 10 §3, §5)
AZURE_CREDENTIALS = CredentialShape(
    secrets=ENTRA_FIELDS,
    settings=("resource", "api_version", "authority_host"),
    provider_settings=("resource", "api_version", "authority_host"),
    check_provider=_check_settings,
    check_connection=_check_connection,
)


# --- addresses ----------------------------------------------------------------------


def origin(base_url: str, auth: Auth | None) -> str:
    """Where the resource is: ``base_url`` (without a trailing ``/openai`` or
    ``/openai/v1``), else the resource's own host."""
    base = base_url.rstrip("/")
    for suffix in ("/openai/v1", "/openai"):
        if base.endswith(suffix):
            base = base[: -len(suffix)]
    if base:
        return base
    resource = auth.setting("resource") if auth is not None else None
    return f"https://{resource}.openai.azure.com" if resource else ""


def endpoint(base_url: str, auth: Auth | None, operation: str, deployment: str) -> str:
    """The URL of ``operation`` (``chat/completions``, ``responses``,
    ``embeddings``) for ``deployment``: the v1 form, or the deployment form when
    the credential's settings carry an ``api_version``."""
    root = origin(base_url, auth) + "/openai"
    version = auth.setting("api_version") if auth is not None else None
    if not version:
        return f"{root}/v1/{operation}"
    query = urlencode({"api-version": version})
    if operation == "responses":  # Azure's Responses API names the deployment as model
        return f"{root}/responses?{query}"
    return f"{root}/deployments/{quote(deployment, safe='')}/{operation}?{query}"


def uses_entra(auth: Auth | None) -> bool:
    """True when the connection authenticates with an Entra client credential."""
    return auth is not None and all(auth.secrets.get(n) for n in ENTRA_FIELDS)


def token_url(auth: Auth) -> str:
    """The tenant's token endpoint (spec 10 §3), on ``authority_host`` when set."""
    authority = str(auth.setting("authority_host", DEFAULT_AUTHORITY)).rstrip("/")
    tenant = quote(auth.secrets.get("tenant_id", ""), safe="")
    return f"{authority}/{tenant}/oauth2/v2.0/token"


def token_form(auth: Auth) -> bytes:
    """The client-credentials grant's form body."""
    return urlencode(
        {
            "grant_type": "client_credentials",
            "client_id": auth.secrets.get("client_id", ""),
            "client_secret": auth.secrets.get("client_secret", ""),
            "scope": ENTRA_SCOPE,
        }
    ).encode()


def azure_headers(api_key: str | None, auth: Auth | None = None) -> dict[str, str]:
    """JSON, and the minted Entra token as ``Authorization: Bearer``, else the key
    as ``api-key``."""
    headers = {"content-type": "application/json"}
    if auth is not None and auth.token:
        headers["authorization"] = f"Bearer {auth.token}"
    elif api_key:
        headers["api-key"] = api_key
    return headers


def parse_azure_error(payload: Any, text: str) -> UpstreamError:
    """OpenAI's error shape; a content-filter refusal gets the code
    ``content_filter`` whichever of Azure's spellings carried it."""
    error = error_from_payload(payload, text)
    body = payload.get("error") if isinstance(payload, dict) else None
    inner = body.get("innererror") if isinstance(body, dict) else None
    codes = {
        str(error.code or "").lower(),
        str(inner.get("code") or "").lower() if isinstance(inner, dict) else "",
    }
    if codes & _FILTER_CODES:
        message = error.message or "blocked by the content filter"
        return UpstreamError(
            message=f"Azure content filter: {message}",
            code=CONTENT_FILTER,
            type="invalid_request_error",
            param=error.param,
        )
    return error


# --- the dialects ---------------------------------------------------------------------


class _Azure:
    """What both Azure wires share; mixed in before the OpenAI dialect it adapts."""

    kind = "azure"
    needs_base_url = False
    credentials = AZURE_CREDENTIALS
    #: the path of this wire's completions (``chat/completions`` or ``responses``)
    operation = "chat/completions"

    headers = staticmethod(azure_headers)

    def _relocated(
        self, call: UpstreamCall, base_url: str, auth: Auth | None, model: str
    ) -> UpstreamCall:
        return replace(call, url=endpoint(base_url, auth, self.operation, model))

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
        call = super().build_request(  # type: ignore[misc]
            base_url=base_url,
            api_key=api_key,
            model=model,
            body=body,
            stream=stream,
            auth=auth,
        )
        return self._relocated(call, base_url, auth, model)

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
        call = super().passthrough_request(  # type: ignore[misc]
            base_url=base_url,
            api_key=api_key,
            model=model,
            body=body,
            stream=stream,
            forward=forward,
            surface=surface,
            auth=auth,
        )
        return self._relocated(call, base_url, auth, model)

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
            url=endpoint(base_url, auth, "embeddings", model),
            headers=azure_headers(api_key, auth),
            body={**body, "model": model},
            operation="embeddings",
        )

    def list_models_request(
        self, *, base_url: str, api_key: str | None, auth: Auth | None = None
    ) -> UpstreamCall:
        headers = azure_headers(api_key, auth)
        headers.pop("content-type", None)
        query = urlencode({"api-version": DEPLOYMENTS_API_VERSION})
        return UpstreamCall(
            url=f"{origin(base_url, auth)}/openai/deployments?{query}",
            headers=headers,
            body={},
            method="GET",
            operation="models",
        )

    def parse_model_list(self, payload: Any) -> list[str]:
        """The deployment names (each ``data[].id``)."""
        return model_ids(payload)

    def connection_base_url(self, base_url: str, auth: Auth | None) -> str | None:
        """A connection's own resource host, when the provider gives no
        ``base_url``."""
        if base_url:
            return None
        return origin("", auth) or None

    def parse_error(
        self, payload: Any, text: str, headers: Mapping[str, str] | None = None
    ) -> UpstreamError:
        return parse_azure_error(payload, text)


class AzureStreamTranslator(OpenAIStreamTranslator):
    """OpenAI's chunks, less Azure's annotation-only chunk (no choices, no usage,
    ``prompt_filter_results``) that opens its streams: clients get OpenAI's shape."""

    __slots__ = ()

    def translate(self, event: str | None, data: Any) -> list[JSON]:
        if (
            isinstance(data, dict)
            and not data.get("choices")
            and data.get("usage") is None
            and "prompt_filter_results" in data
        ):
            return []
        return super().translate(event, data)


class AzureDialect(_Azure, OpenAIDialect):
    """``kind: azure``: Chat Completions, and embeddings."""

    label = "Azure OpenAI"
    surfaces = frozenset({"chat"})

    def stream_translator(self, *, created: int, raw: bool = False) -> StreamTranslator:
        return AzureStreamTranslator()


class AzureResponsesDialect(_Azure, OpenAIResponsesDialect):
    """``kind: azure`` with ``wire: responses``: the Responses API."""

    label = "Azure OpenAI Responses"
    operation = "responses"
