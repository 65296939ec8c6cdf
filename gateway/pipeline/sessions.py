"""The request's session (spec 05 §1) from the settings, and its scoped key ``S``."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from django.conf import settings

from gateway.kernel.exchange import ChatRequest
from gateway.kernel.session import Session, derive, scoped_key
from gateway.kernel.types import KeyPolicy


def request_session(
    headers: Mapping[str, str], request: ChatRequest, key: KeyPolicy
) -> Session | None:
    """None when session keeping is off or no source gives an id."""
    if not settings.OMNIROUTE_SESSION_KEEPING:
        return None
    body: Mapping[str, Any] = request.body
    if request.session_fields:
        body = {**request.body, **request.session_fields}
    return derive(
        headers,
        body,
        key_id=key.id,
        model=request.entries[0].model if request.entries else request.model,
        extra_headers=settings.OMNIROUTE_SESSION_EXTRA_HEADERS,
        auto_detect=settings.OMNIROUTE_SESSION_AUTO_DETECT,
    )


def session_key(key: KeyPolicy, session: Session | None) -> str | None:
    return None if session is None else scoped_key(key.id, session.id)
