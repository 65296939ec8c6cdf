"""Microsoft Entra tokens for ``kind: azure`` connections (spec 10 §3): the minter
``providers.credential_sources`` calls, registered in ``MINTERS`` at app start.

A connection with ``tenant_id``, ``client_id`` and ``client_secret`` gets a token
from ``{authority_host}/{tenant}/oauth2/v2.0/token`` (client credentials grant,
scope ``https://cognitiveservices.azure.com/.default``; the request itself is
described by ``gateway.dialects.azure``).  ``credential_sources`` caches it until 5
minutes before ``expires_in`` runs out and refreshes it off the request path, so a
connection mints about once an hour whatever its traffic.

The token POST goes through the outbound policy like every other call (the
provider's proxy, CA bundle, client certificate and fixed headers apply), on a
client of its own that is closed after the call: mints are rare, and a probe mints
on an event loop of its own.  Entra's refusal of the credential (400/401
``invalid_client``, ``unauthorized_client``, an unknown tenant) fails the attempt as
``auth``; anything else (unreachable, a 5xx, a reply without a token) as
``connection_error``.  Messages name Entra's error code, never a secret.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import replace
from typing import Any, Final

import orjson

from gateway.dialects.azure import token_form, token_url, uses_entra
from gateway.kernel.types import Auth
from providers import credential_sources
from providers.credential_sources import CredentialUnavailable, Minted
from providers.http import new_upstream_client

#: a token request's bound; the attempt waits for it on a cold cache
TOKEN_TIMEOUT_S: Final = 10.0
_MAX_REPLY_BYTES: Final = 64 * 1024
#: Entra's status codes for a refused credential (its error names the cause)
_REFUSALS: Final = frozenset({400, 401, 403})
_OK: Final = 200
#: a token whose reply gives no ``expires_in`` is kept as long as Entra's usual one
DEFAULT_LIFETIME_S: Final = 3600.0
_FORM = "application/x-www-form-urlencoded"


class EntraMinter:
    """Mints an Entra access token for an Azure connection's client credential."""

    def __init__(self, clock: Callable[[], float] = time.time) -> None:
        self._clock = clock

    def wants(self, auth: Auth) -> bool:
        return uses_entra(auth)

    async def mint(self, auth: Auth, outbound: Any) -> Minted:
        started = self._clock()
        status, body = await _post(auth, outbound)
        payload = _json(body)
        if status in _REFUSALS:
            code = payload.get("error") if isinstance(payload, dict) else None
            raise CredentialUnavailable(
                "auth",
                f"Entra refused the azure client credential (HTTP {status}"
                + (f", {code})" if isinstance(code, str) else ")"),
            )
        token = payload.get("access_token") if isinstance(payload, dict) else None
        life = payload.get("expires_in") if isinstance(payload, dict) else None
        if status != _OK or not isinstance(token, str) or not token:
            raise CredentialUnavailable(
                "connection_error",
                f"the Entra token endpoint answered HTTP {status} without a token",
            )
        try:
            seconds = float(life) if life is not None else DEFAULT_LIFETIME_S
        except (TypeError, ValueError):
            seconds = DEFAULT_LIFETIME_S
        return Minted(replace(auth, token=token), started + seconds)


async def _post(auth: Auth, outbound: Any) -> tuple[int, bytes]:
    client = new_upstream_client()
    try:
        routed = client.for_provider(outbound)
        async with asyncio.timeout(TOKEN_TIMEOUT_S):
            async with routed.stream(
                "POST",
                token_url(auth),
                content=token_form(auth),
                headers={"content-type": _FORM, "accept": "application/json"},
            ) as response:
                body = b""
                async for chunk in response.aiter_bytes():
                    body += chunk
                    if len(body) > _MAX_REPLY_BYTES:
                        break
                return response.status_code, body
    finally:
        await client.aclose()


def _json(body: bytes) -> Any:
    try:
        return orjson.loads(body)
    except orjson.JSONDecodeError:
        return None


def register() -> None:
    """Put the minter in ``credential_sources.MINTERS`` (app start)."""
    credential_sources.MINTERS.setdefault("azure", EntraMinter())
