"""Websocket routes (the live routing feed arrives with the telemetry work)."""

from __future__ import annotations

from typing import Any


async def websocket_app(scope: dict[str, Any], receive: Any, send: Any) -> None:
    """Refuse every websocket until a consumer is routed here."""
    message = await receive()
    if message["type"] == "websocket.connect":
        await send({"type": "websocket.close", "code": 4404})
