"""API-key authentication against the routing table (spec 01, 08 §5.1).

Keys are looked up by the SHA-256 digest of the presented key; the final equality
test uses ``hmac.compare_digest``.  No database query: the table holds every key.
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Mapping

from gateway.inbound.base import bearer_or_api_key
from gateway.kernel.exchange import RequestError
from gateway.kernel.types import KeyPolicy, RoutingTable


def key_digest(key: str) -> str:
    return hashlib.sha256(key.encode("utf-8")).hexdigest()


def authenticate(
    headers: Mapping[str, str], table: RoutingTable, now: float
) -> KeyPolicy:
    """The key a request presents the usual ways (``Authorization: Bearer`` or
    ``x-api-key``: the ops endpoints); raises ``RequestError`` 401."""
    return authenticate_key(bearer_or_api_key(headers), table, now)


def authenticate_key(key: str | None, table: RoutingTable, now: float) -> KeyPolicy:
    """The policy of a presented key (its wire says where it arrives:
    ``Wire.credential``); raises ``RequestError`` 401 for none, an unknown one, or a
    disabled or expired one."""
    if key is None:
        raise RequestError(
            401,
            "invalid_api_key",
            "Missing API key: put the key in the x-api-key header, or in the "
            "Authorization header after Bearer",
            error_type="authentication_error",
        )
    digest = key_digest(key)
    policy = table.keys_by_digest.get(digest)
    # the dict finds the candidate; the stored digest is then compared in constant
    # time (a table built without digests, in tests, has only the lookup)
    if policy is None or (
        policy.key_hash is not None and not hmac.compare_digest(digest, policy.key_hash)
    ):
        raise RequestError(
            401, "invalid_api_key", "Invalid API key", error_type="authentication_error"
        )
    if not policy.active or (
        policy.expires_at is not None and now >= policy.expires_at
    ):
        raise RequestError(
            401,
            "key_disabled",
            "This API key is disabled or expired",
            error_type="authentication_error",
        )
    return policy
