"""Runner 1: the mock as an ASGI3 app, for in-process use via ``httpx.ASGITransport``.

A TCP reset cannot happen in process, so it raises ``MockConnectionReset`` instead.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

from providers.mock_upstream.core import MockConnectionReset, MockState
from providers.mock_upstream.dispatch import answer, play
from providers.mock_upstream.reply import Reply

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]


def _asgi_headers(reply: Reply) -> list[tuple[bytes, bytes]]:
    headers = [
        (name.encode("latin-1"), value.encode("latin-1"))
        for name, value in reply.headers
    ]
    if reply.content_length is not None:
        headers.append((b"content-length", b"%d" % reply.content_length))
    return headers


class _AsgiSink:
    __slots__ = ("_send",)

    def __init__(self, send: Send) -> None:
        self._send = send

    async def head(self, reply: Reply) -> None:
        await self._send(
            {
                "type": "http.response.start",
                "status": reply.status,
                "headers": _asgi_headers(reply),
            }
        )

    async def part(self, data: bytes) -> None:
        await self._send(
            {"type": "http.response.body", "body": data, "more_body": True}
        )

    async def finish(self) -> None:
        await self._send(
            {"type": "http.response.body", "body": b"", "more_body": False}
        )

    def reset(self) -> None:
        raise MockConnectionReset("mock upstream reset the connection")


async def _read_asgi_body(receive: Receive) -> bytes | None:
    chunks: list[bytes] = []
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            return None
        chunks.append(message.get("body", b""))
        if not message.get("more_body", False):
            return b"".join(chunks)


async def _wait_for_disconnect(receive: Receive) -> None:
    while (await receive())["type"] != "http.disconnect":
        pass


async def _serve_lifespan(receive: Receive, send: Send) -> None:
    while True:
        message = await receive()
        if message["type"] == "lifespan.startup":
            await send({"type": "lifespan.startup.complete"})
        elif message["type"] == "lifespan.shutdown":
            await send({"type": "lifespan.shutdown.complete"})
            return


class MockApp:
    """The mock as an ASGI3 application (``httpx.ASGITransport(app=MockApp())``)."""

    def __init__(self, state: MockState | None = None) -> None:
        self.state = state if state is not None else MockState()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await _serve_lifespan(receive, send)
            return
        if scope["type"] != "http":
            return
        body = await _read_asgi_body(receive)
        if body is None:
            return
        headers = {
            name.decode("latin-1").lower(): value.decode("latin-1")
            for name, value in scope.get("headers", ())
        }
        reply = answer(self.state, scope["method"], scope["path"], headers, body)
        if reply.is_immediate:
            self.state.log.finish(reply.record, reply.outcome)
            await _AsgiSink(send).head(reply)
            payload = b"".join(data for _, data in reply.parts)
            await send({"type": "http.response.body", "body": payload})
            return
        await self._play_watching(reply, receive, send)

    async def _play_watching(self, reply: Reply, receive: Receive, send: Send) -> None:
        player = asyncio.ensure_future(play(reply, _AsgiSink(send), self.state.log))
        watcher = asyncio.ensure_future(_wait_for_disconnect(receive))
        try:
            await asyncio.wait({player, watcher}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for task in (player, watcher):
                task.cancel()  # no-op when finished; a cancelled player records it
            await asyncio.wait({player, watcher})
        if not player.cancelled():
            player.result()  # surfaces MockConnectionReset


def build_app(state: MockState | None = None) -> MockApp:
    """A fresh ASGI mock with its own state (or the given one)."""
    return MockApp(state)


app = build_app()
