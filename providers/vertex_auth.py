"""The ``vertex`` kind's credential I/O (spec 10 §1, §3): an OAuth2 access token for
Google Cloud, minted from the connection's service-account JSON or, with
``use_default_credentials: true``, from the runtime's default credentials (Google's
Application Default Credentials: ``GOOGLE_APPLICATION_CREDENTIALS``, gcloud's user
credentials, the metadata server).

Google's own library (google-auth, imported on the first mint) builds and signs the
JWT-bearer grant and reads the token endpoint's answer; its HTTP goes through
``_PolicyRequest``, a ``google.auth.transport.Request`` over the gateway's outbound
client (``providers.http.job_client``), so the token endpoint is reached through the
provider's proxy and trust store like every other call (spec 10 §4).  google-auth is
blocking, so a mint runs on a worker thread (``asyncio.to_thread``) with its own
short-lived event loop for the HTTP call; the request path never waits on it except
for the very first token of a credential (``credential_sources`` caches it and
refreshes it in the background 5 minutes before it expires).

A refused grant (a wrong key, a deleted account: the endpoint's 4xx) or an unusable
JSON is ``CredentialUnavailable("auth")``; an unreachable or failing endpoint
``connection_error``.  Neither message holds the key.
"""

from __future__ import annotations

import asyncio
import json
import logging
from dataclasses import replace
from datetime import UTC
from types import MappingProxyType
from typing import Any, Final, cast

from gateway.dialects.vertex_credential import is_true
from gateway.kernel.types import Auth
from providers.credential_sources import CredentialUnavailable, Minted

logger = logging.getLogger(__name__)

#: the scope every Vertex AI call needs
SCOPES: Final = ("https://www.googleapis.com/auth/cloud-platform",)
#: a token endpoint gets this long per request
TOKEN_TIMEOUT_S: Final = 15.0
#: at most this much of a token endpoint's answer is read
MAX_TOKEN_REPLY_BYTES: Final = 256 * 1024


class _Reply:
    """A ``google.auth.transport.Response``."""

    def __init__(self, status: int, headers: dict[str, str], data: bytes) -> None:
        self.status = status
        self.headers = headers
        self.data = data


async def _send(
    outbound: Any,
    url: str,
    method: str,
    body: bytes | None,
    headers: dict[str, str],
    timeout_s: float,
) -> _Reply:
    from providers.http import job_client

    client = job_client(timeout_s=timeout_s, outbound=outbound)
    try:
        async with client.stream(
            method, url, content=body or b"", headers=headers
        ) as response:
            data = b""
            async for chunk in response.aiter_bytes():
                data += chunk
                if len(data) > MAX_TOKEN_REPLY_BYTES:
                    break
            found = {
                k.decode("latin-1").lower(): v.decode("latin-1")
                for k, v in response.headers.raw
            }
            return _Reply(response.status_code, found, data)
    finally:
        await client.aclose()


class _PolicyRequest:
    """google-auth's HTTP callable over the outbound policy (blocking: call it from
    a worker thread, never from an event loop)."""

    def __init__(self, outbound: Any) -> None:
        self.outbound = outbound

    def __call__(
        self,
        url: str,
        method: str = "GET",
        body: bytes | None = None,
        headers: dict[str, str] | None = None,
        timeout: float | None = None,
        **kwargs: Any,
    ) -> _Reply:
        from google.auth import exceptions

        data = body.encode() if isinstance(body, str) else body
        try:
            return asyncio.run(
                _send(
                    self.outbound,
                    url,
                    method,
                    data,
                    dict(headers or {}),
                    timeout or TOKEN_TIMEOUT_S,
                )
            )
        except OSError as exc:  # the transport's errors are OSErrors or wrap them
            raise exceptions.TransportError(type(exc).__name__) from None
        except Exception as exc:  # noqa: BLE001 - httpx's errors, not importable here
            raise exceptions.TransportError(type(exc).__name__) from None


def _credentials(auth: Auth, request: _PolicyRequest) -> Any:
    """google-auth credentials for ``auth``; raises ``CredentialUnavailable``."""
    from google import auth as google_auth
    from google.auth import exceptions
    from google.oauth2 import service_account

    text = auth.secrets.get("service_account_json")
    if text:
        try:
            info = json.loads(text)
            quota = info.get("quota_project_id") if isinstance(info, dict) else None
            return service_account.Credentials.from_service_account_info(
                info, scopes=list(SCOPES), quota_project_id=quota or None
            )
        except (ValueError, TypeError, KeyError, AttributeError) as exc:
            raise CredentialUnavailable(
                "auth", f"the service account JSON is unusable ({type(exc).__name__})"
            ) from None
    if not is_true(auth.settings.get("use_default_credentials")):
        raise CredentialUnavailable(
            "auth",
            "the connection has no service_account_json "
            "(or use_default_credentials: true)",
        )
    try:
        found, _ = google_auth.default(scopes=list(SCOPES), request=cast(Any, request))
    except exceptions.DefaultCredentialsError:
        raise CredentialUnavailable(
            "auth", "no Google default credentials were found"
        ) from None
    return found


def _mint_blocking(auth: Auth, outbound: Any) -> Minted:
    from google.auth import exceptions

    request = _PolicyRequest(outbound)
    credentials = _credentials(auth, request)
    try:
        credentials.refresh(request)
    except exceptions.RefreshError as exc:
        reason = "connection_error" if getattr(exc, "retryable", False) else "auth"
        raise CredentialUnavailable(
            reason, f"the token endpoint refused the credential: {_short(exc)}"
        ) from None
    except exceptions.TransportError as exc:
        raise CredentialUnavailable(
            "connection_error", f"the token endpoint is unreachable: {_short(exc)}"
        ) from None
    token = credentials.token
    if not isinstance(token, str) or not token:
        raise CredentialUnavailable("connection_error", "the token endpoint sent none")
    expiry = credentials.expiry
    expires_at = expiry.replace(tzinfo=UTC).timestamp() if expiry else None
    settings = dict(auth.settings)
    quota_project = getattr(credentials, "quota_project_id", None)
    if isinstance(quota_project, str) and quota_project:
        settings["quota_project_id"] = quota_project
    minted = replace(auth, token=token, settings=MappingProxyType(settings))
    return Minted(minted, expires_at)


def _short(exc: Exception) -> str:
    """The first line of google-auth's message, cut short (it holds the endpoint's
    error code and description, never the key)."""
    text = str(exc.args[0]) if exc.args else type(exc).__name__
    return text.splitlines()[0][:200] if text else type(exc).__name__


class VertexMinter:
    """``credential_sources.Minter`` of the ``vertex`` kind: every connection of it
    needs a token."""

    def wants(self, auth: Auth) -> bool:
        return True

    async def mint(self, auth: Auth, outbound: Any) -> Minted:
        return await asyncio.to_thread(_mint_blocking, auth, outbound)


MINTER: Final = VertexMinter()
