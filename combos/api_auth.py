"""REST API authentication by admin token (spec 08 §5.1): ``omr-adm-`` keys, hashed."""

from __future__ import annotations

import base64
import hashlib
import hmac
import secrets
from typing import Any

from django.contrib.auth.models import User
from rest_framework import authentication, exceptions

ADMIN_TOKEN_PREFIX = "omr-adm-"


def generate_admin_token() -> str:
    raw = base64.urlsafe_b64encode(secrets.token_bytes(32)).decode("ascii").rstrip("=")
    return ADMIN_TOKEN_PREFIX + raw


def issue_admin_token(user: User, name: str = "") -> str:
    from combos.models import AdminToken

    token = generate_admin_token()
    AdminToken.objects.create(
        user=user,
        name=name,
        key_hash=hashlib.sha256(token.encode()).hexdigest(),
        prefix=token[:12],
    )
    return token


class AdminTokenAuthentication(authentication.BaseAuthentication):
    keyword = "Bearer"

    def authenticate(self, request: Any) -> tuple[User, Any] | None:
        from combos.models import AdminToken

        header = request.META.get("HTTP_AUTHORIZATION", "")
        scheme, _, token = header.partition(" ")
        token = token.strip()  # "Bearer  <token>" as on /v1
        if scheme.lower() != "bearer" or not token.startswith(ADMIN_TOKEN_PREFIX):
            return None
        digest = hashlib.sha256(token.encode()).hexdigest()
        row = AdminToken.objects.select_related("user").filter(key_hash=digest).first()
        # found by digest; the final equality test is constant-time (spec 08 §5.1)
        if (
            row is None
            or not hmac.compare_digest(row.key_hash, digest)
            or not row.user.is_active
            or not row.user.is_staff
        ):
            raise exceptions.AuthenticationFailed("invalid admin token")
        return row.user, row

    def authenticate_header(self, request: Any) -> str:
        return self.keyword
