"""Websocket routes: ``/ws/routing/`` is the live routing feed; any other path is
closed with ``4404``.

The feed socket authenticates with the Django session cookie
(``AuthMiddlewareStack``) and, because a cookie rides along on any page's
websocket, checks the ``Origin`` header against ``ALLOWED_HOSTS`` first: a
cross-site page cannot open the feed with an admin's session.  Both close codes
are sent after the handshake is accepted, so a client reads them (a close before
the accept would reach it as a bare HTTP 403).
"""

from __future__ import annotations

from typing import Any, cast

from channels.auth import AuthMiddlewareStack
from channels.routing import URLRouter
from channels.security.websocket import AllowedHostsOriginValidator
from django.urls import path, re_path

from telemetry.consumers import RoutingFeedConsumer

NOT_FOUND_CLOSE_CODE = 4404


async def not_found_app(scope: dict[str, Any], receive: Any, send: Any) -> None:
    """Close every socket on an unknown path with ``4404``."""
    message = await receive()
    if message["type"] == "websocket.connect":
        await send({"type": "websocket.accept"})
        await send({"type": "websocket.close", "code": NOT_FOUND_CLOSE_CODE})


def build_websocket_app() -> Any:
    """The websocket application; reads ``ALLOWED_HOSTS``, so build it after setup."""
    feed = AllowedHostsOriginValidator(
        AuthMiddlewareStack(RoutingFeedConsumer.as_asgi())
    )
    return URLRouter(
        [
            path("ws/routing/", feed),
            re_path(r"", cast(Any, not_found_app)),  # an ASGI app, not a view
        ]
    )
