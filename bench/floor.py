"""The floor for a Python gateway: a bare ASGI callable that forwards with httpx.

It authenticates nothing, parses nothing and logs nothing; it reads the body, posts it
to the upstream with one pooled ``httpx.AsyncClient`` and relays the reply (streams
chunk by chunk).  The request's path below ``/v1`` picks the upstream's
(``/v1/chat/completions``, ``/v1/messages``, ``/v1/responses``, ...), and a Messages
request's ``anthropic-version`` is forwarded, a query string too (the Gemini wire's
``?alt=sse``); it translates nothing.  Run:
``uvicorn bench.floor:app`` with ``FLOOR_UPSTREAM`` set.
"""

from __future__ import annotations

import os
from typing import Any

import httpx

UPSTREAM = os.environ.get("FLOOR_UPSTREAM", "http://127.0.0.1:9100/v1")
_client: httpx.AsyncClient | None = None


def _get_client() -> httpx.AsyncClient:
    global _client
    if _client is None:
        _client = httpx.AsyncClient(
            timeout=30,
            limits=httpx.Limits(max_connections=200, max_keepalive_connections=50),
        )
    return _client


async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
    if scope["type"] != "http":
        return
    body = b""
    while True:
        message = await receive()
        body += message.get("body", b"")
        if not message.get("more_body"):
            break
    client = _get_client()
    path: str = scope["path"]
    headers = {"content-type": "application/json", "authorization": "Bearer x"}
    if path.startswith("/v1/messages"):
        for name, value in scope["headers"]:
            if name == b"anthropic-version":
                headers["anthropic-version"] = value.decode("latin-1")
    query = scope.get("query_string", b"").decode("latin-1")
    request = client.build_request(
        "POST",
        UPSTREAM
        + (path[3:] if path.startswith("/v1/") else path)
        + (f"?{query}" if query else ""),
        content=body,
        headers=headers,
    )
    response = await client.send(request, stream=True)
    try:
        await send(
            {
                "type": "http.response.start",
                "status": response.status_code,
                "headers": [
                    (b"content-type", response.headers.get("content-type", "").encode())
                ],
            }
        )
        async for chunk in response.aiter_raw():
            await send({"type": "http.response.body", "body": chunk, "more_body": True})
        await send({"type": "http.response.body", "body": b""})
    finally:
        await response.aclose()
