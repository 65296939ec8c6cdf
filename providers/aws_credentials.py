"""AWS's default credential chain for ``bedrock`` connections with
``use_default_credentials: true`` (spec 10 §3): the environment, the shared files,
SSO, web identity, the container and instance metadata endpoints, as botocore
resolves them (imported on first use).

The chain is resolved off the event loop (a thread: botocore's providers block),
cached by ``credential_sources`` until 5 minutes before its expiry (temporary keys
from a role or the metadata endpoint) or for good (static keys), and handed to the
pure dialect as the ``Auth``'s secrets, which it signs with.  The connection's
``region`` stays its own: the chain's region is not read.  The metadata endpoints
are reached directly, not through the provider's proxy.
"""

from __future__ import annotations

import asyncio
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

from gateway.kernel.types import Auth

if TYPE_CHECKING:
    from providers.credential_sources import Minted


def _resolve() -> tuple[str, str, str | None, float | None] | None:
    """(key id, secret, session token, expiry) from botocore's chain, or None."""
    from botocore.session import get_session  # first use: off the import path

    found = get_session().get_credentials()
    if found is None:
        return None
    frozen = found.get_frozen_credentials()
    expiry = getattr(found, "_expiry_time", None)  # set on refreshable credentials
    return (
        frozen.access_key,
        frozen.secret_key,
        frozen.token,
        expiry.timestamp() if expiry is not None else None,
    )


class AwsDefaultChain:
    """The ``bedrock`` kind's ``Minter``."""

    def wants(self, auth: Auth) -> bool:
        return auth.setting("use_default_credentials") is True

    async def mint(self, auth: Auth, outbound: Any) -> Minted:
        from providers.credential_sources import (
            CredentialUnavailable,
            Minted,
        )

        try:
            found = await asyncio.to_thread(_resolve)
        except Exception as exc:  # noqa: BLE001 - botocore's many provider errors
            raise CredentialUnavailable(
                "auth", f"the AWS default credential chain failed: {type(exc).__name__}"
            ) from None
        if found is None:
            raise CredentialUnavailable(
                "auth", "the AWS default credential chain found no credentials"
            )
        key_id, secret, token, expires_at = found
        secrets = {"aws_access_key_id": key_id, "aws_secret_access_key": secret}
        if token:
            secrets["aws_session_token"] = token
        resolved = Auth(
            kind=auth.kind,
            secrets=MappingProxyType(secrets),
            settings=auth.settings,
        )
        return Minted(resolved, expires_at)
