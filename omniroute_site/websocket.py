"""Websocket routes: ``/ws/routing/`` is the live routing feed; any other path is
closed with ``4404``.

The feed socket authenticates with the Django session cookie
(``AuthMiddlewareStack``) and, because a cookie rides along on any page's
websocket, checks the ``Origin`` header against ``ALLOWED_HOSTS`` first: a
cross-site page cannot open the feed with an admin's session (closed ``4403``).
A socket without ``Origin`` passes that check: browsers always send one, so only
non-browser clients omit it, and they still need a staff session.  Every close
code is sent after the handshake is accepted, so a client reads it (a close
before the accept would reach it as a bare HTTP 403).
"""

from __future__ import annotations

from typing import Any, cast
from urllib.parse import urlparse

from channels.auth import AuthMiddlewareStack
from channels.routing import URLRouter
from channels.security.websocket import OriginValidator
from django.conf import settings
from django.urls import path, re_path

from telemetry.consumers import RoutingFeedConsumer

NOT_FOUND_CLOSE_CODE = 4404
FORBIDDEN_CLOSE_CODE = 4403  # spec 01: the feed's refusal


async def _accept_then_close(receive: Any, send: Any, code: int) -> None:
    message = await receive()
    if message["type"] == "websocket.connect":
        await send({"type": "websocket.accept"})
        await send({"type": "websocket.close", "code": code})


class FeedOriginValidator(OriginValidator):
    """``ALLOWED_HOSTS`` origins only, a missing ``Origin`` allowed (see above);
    a foreign origin is closed with ``4403``."""

    def valid_origin(self, parsed_origin: Any) -> bool:
        return parsed_origin is None or bool(super().valid_origin(parsed_origin))

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        origin = next(
            (value for name, value in scope.get("headers", []) if name == b"origin"),
            None,
        )
        try:
            parsed = None if origin is None else urlparse(origin.decode("latin1"))
        except ValueError:
            parsed = urlparse("invalid://")
        if self.valid_origin(parsed):
            await self.application(scope, receive, send)
            return
        await _accept_then_close(receive, send, FORBIDDEN_CLOSE_CODE)


async def not_found_app(scope: dict[str, Any], receive: Any, send: Any) -> None:
    """Close every socket on an unknown path with ``4404``."""
    await _accept_then_close(receive, send, NOT_FOUND_CLOSE_CODE)


def build_websocket_app() -> Any:
    """The websocket application; reads ``ALLOWED_HOSTS``, so build it after setup."""
    allowed = list(settings.ALLOWED_HOSTS)
    if settings.DEBUG and not allowed:
        allowed = ["localhost", "127.0.0.1", "[::1]"]
    feed = FeedOriginValidator(
        AuthMiddlewareStack(RoutingFeedConsumer.as_asgi()), allowed
    )
    return URLRouter(
        [
            path("ws/routing/", feed),
            re_path(r"", cast(Any, not_found_app)),  # an ASGI app, not a view
        ]
    )
