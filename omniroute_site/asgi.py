"""ASGI entry point: Django first, then the routing of protocols and paths.

* ``lifespan``: start-up loads the routing table, starts the config watcher and
  imports spilled log rows; shutdown flushes the request log and closes clients.
* ``http``: the two chat paths go to the lean front door (``gateway.edge.asgi``);
  everything else (admin, REST API, ops endpoints, ``/v1/models``) to Django.
* ``websocket``: Channels: ``/ws/routing/`` (the live routing feed, staff only);
  every other path is closed with 4404 (``omniroute_site.websocket``).
"""

from __future__ import annotations

import os
from typing import Any

from django.conf import settings
from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "omniroute_site.settings")
django_app = get_asgi_application()

from gateway import drain  # noqa: E402  (needs the app registry)
from gateway.edge import lifecycle  # noqa: E402
from gateway.edge.asgi import (  # noqa: E402
    PATHS,
    BodyTimeout,
    BodyTooLarge,
    ClientGone,
    chat_app,
    declared_length,
    header_refusal,
    read_body,
    refusal_reply,
    send_json,
    shutting_down_reply,
    timed_out,
    too_large,
)
from omniroute_site.websocket import build_websocket_app  # noqa: E402

websocket_app = build_websocket_app()
#: answered while draining: /healthz (200 while up), /readyz (503 draining), /metrics
OPS_PATHS = frozenset({"/healthz", "/readyz", "/metrics"})


async def _django(scope: dict[str, Any], receive: Any, send: Any) -> None:
    """Django's paths read their body here first, under the chat paths' limits:
    ``OMNIROUTE_MAX_BODY_BYTES`` (413, also from ``Content-Length``) and the body
    timeout (408), so no path reads an unbounded or endless body (issue #16)."""
    try:
        body = await read_body(
            receive,
            settings.OMNIROUTE_MAX_BODY_BYTES,
            declared_length(scope),
            settings.OMNIROUTE_BODY_TIMEOUT_S,
        )
    except BodyTooLarge:
        limit = settings.OMNIROUTE_MAX_BODY_BYTES
        await send_json(
            send,
            refusal_reply(
                scope,
                too_large(f"Request body exceeds {limit} bytes"),
            ),
        )
        return
    except BodyTimeout:
        await send_json(send, refusal_reply(scope, timed_out()))
        return
    except ClientGone:
        return
    await django_app(scope, _replay(body, receive), send)


def _replay(body: bytes, receive: Any) -> Any:
    """A ``receive`` that hands Django the body already read, then the real one
    (a disconnect)."""
    sent = False

    async def replay() -> dict[str, Any]:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()  # type: ignore[no-any-return]

    return replay


async def _lifespan(receive: Any, send: Any) -> None:
    while True:
        message = await receive()
        if message["type"] == "lifespan.startup":
            try:
                await lifecycle.startup()
            except Exception as exc:  # noqa: BLE001 - reported; the server exits
                await send({"type": "lifespan.startup.failed", "message": str(exc)})
                return
            await send({"type": "lifespan.startup.complete"})
        elif message["type"] == "lifespan.shutdown":
            await lifecycle.shutdown()
            await send({"type": "lifespan.shutdown.complete"})
            return


async def application(scope: dict[str, Any], receive: Any, send: Any) -> None:
    kind = scope["type"]
    if kind == "http":
        refused = header_refusal(scope)
        if refused is not None:  # 431 / 400 before anything is read (issue #16)
            await send_json(send, refusal_reply(scope, refused))
            return
        path = scope["path"]
        if path in PATHS:
            await chat_app(scope, receive, send)
        elif drain.is_draining() and path.rstrip("/") not in OPS_PATHS:
            # spec 08 §4 step 2: every new request but the probes and the scrape
            await send_json(send, shutting_down_reply())
        else:
            await _django(scope, receive, send)
    elif kind == "lifespan":
        await _lifespan(receive, send)
    elif kind == "websocket":
        await websocket_app(scope, receive, send)
