"""Runner 2, the protocol: raw asyncio HTTP/1.1 on a real socket.

Keep-alive, Content-Length request bodies and chunked streams; only a real socket can
send a TCP RST (``SO_LINGER`` 0, then abort) and see a client go away.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import struct
from collections.abc import Mapping
from functools import lru_cache
from typing import NamedTuple, cast

import orjson

from providers.mock_upstream.core import MAX_BODY_BYTES, MAX_HEAD_BYTES, MockState
from providers.mock_upstream.dispatch import answer, play
from providers.mock_upstream.reply import Reply, _phrase, _status_message, _whole
from providers.mock_upstream.wire import _OPENAI

_LINGER_RESET = struct.pack("ii", 1, 0)  # l_onoff=1, l_linger=0: close() sends an RST


class _BadRequestError(Exception):
    def __init__(self, status: int) -> None:
        super().__init__(status)
        self.status = status


class _Request(NamedTuple):
    method: str
    path: str
    headers: dict[str, str]
    body: bytes
    keep_alive: bool


def _content_length(headers: Mapping[str, str]) -> int:
    if "transfer-encoding" in headers:
        raise _BadRequestError(501)  # chunked request bodies are not needed here
    try:
        length = int(headers.get("content-length", "0"))
    except ValueError:
        raise _BadRequestError(400) from None
    if length < 0:
        raise _BadRequestError(400)
    if length > MAX_BODY_BYTES:
        raise _BadRequestError(413)
    return length


def _take_request(buffer: bytearray) -> _Request | None:
    """Cut one complete request off the front of ``buffer``, or return None."""
    end = buffer.find(b"\r\n\r\n")
    if end < 0:
        if len(buffer) > MAX_HEAD_BYTES:
            raise _BadRequestError(431)
        return None
    lines = buffer[:end].decode("latin-1").split("\r\n")
    request_line = lines[0].split(" ")
    if len(request_line) != len(("method", "target", "version")):
        raise _BadRequestError(400)
    method, target, version = request_line
    headers: dict[str, str] = {}
    for line in lines[1:]:
        name, colon, value = line.partition(":")
        if not colon:
            raise _BadRequestError(400)
        headers[name.strip().lower()] = value.strip()
    total = end + 4 + _content_length(headers)
    if len(buffer) < total:
        return None
    body = bytes(buffer[end + 4 : total])
    del buffer[:total]
    connection = headers.get("connection", "").lower()
    keep_alive = (
        connection != "close" if version == "HTTP/1.1" else connection == "keep-alive"
    )
    return _Request(method, target, headers, body, keep_alive)


@lru_cache(maxsize=64)
def _status_line(status: int) -> bytes:
    return f"HTTP/1.1 {status} {_phrase(status)}\r\n".encode()


def _head_bytes(reply: Reply, keep_alive: bool) -> bytes:
    lines = [_status_line(reply.status)]
    lines += [
        f"{name}: {value}\r\n".encode("latin-1", "replace")
        for name, value in reply.headers
    ]
    if reply.content_length is None:
        lines.append(b"transfer-encoding: chunked\r\n")
    else:
        lines.append(b"content-length: %d\r\n" % reply.content_length)
    if not keep_alive:
        lines.append(b"connection: close\r\n")
    lines.append(b"\r\n")
    return b"".join(lines)


def _chunk(data: bytes) -> bytes:
    return b"%x\r\n%s\r\n" % (len(data), data) if data else b""


_LAST_CHUNK = b"0\r\n\r\n"


def _immediate_bytes(reply: Reply, keep_alive: bool) -> bytes:
    head = _head_bytes(reply, keep_alive)
    if reply.content_length is not None:
        return head + b"".join(data for _, data in reply.parts)
    return head + b"".join(_chunk(data) for _, data in reply.parts) + _LAST_CHUNK


def _reset_transport(transport: asyncio.Transport) -> None:
    sock = transport.get_extra_info("socket")
    if sock is not None:
        with contextlib.suppress(OSError):
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, _LINGER_RESET)
    transport.abort()  # closes the socket: with linger 0 the peer gets ECONNRESET


class _SocketSink:
    __slots__ = ("_is_chunked", "_keep_alive", "_transport")

    def __init__(self, transport: asyncio.Transport, keep_alive: bool) -> None:
        self._transport = transport
        self._keep_alive = keep_alive
        self._is_chunked = False

    async def head(self, reply: Reply) -> None:
        self._is_chunked = reply.content_length is None
        self._transport.write(_head_bytes(reply, self._keep_alive))

    async def part(self, data: bytes) -> None:
        if data:
            self._transport.write(_chunk(data) if self._is_chunked else data)

    async def finish(self) -> None:
        if self._is_chunked:
            self._transport.write(_LAST_CHUNK)

    def reset(self) -> None:
        _reset_transport(self._transport)


class _Connection(asyncio.Protocol):
    """One client connection: requests are served in order, one at a time."""

    def __init__(self, state: MockState, connections: set[_Connection]) -> None:
        self._state = state
        self._connections = connections
        self._buffer = bytearray()
        self._transport: asyncio.Transport | None = None
        self._task: asyncio.Task[None] | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # uvloop's transports do not subclass asyncio.Transport, hence a cast.
        self._transport = cast(asyncio.Transport, transport)
        self._connections.add(self)

    def data_received(self, data: bytes) -> None:
        self._buffer += data
        if self._task is None:
            self._serve_buffered()

    def eof_received(self) -> bool:
        return False  # a client that stops sending has gone: close, cancel its request

    def connection_lost(self, exc: Exception | None) -> None:
        self._connections.discard(self)
        if self._task is not None:
            self._task.cancel()  # records "cancelled" unless the reply already ended

    def abort(self) -> None:
        if self._transport is not None:
            self._transport.abort()

    def _serve_buffered(self) -> None:
        transport = self._transport
        while (
            transport is not None and self._task is None and not transport.is_closing()
        ):
            try:
                request = _take_request(self._buffer)
            except _BadRequestError as exc:
                self._refuse(transport, exc.status)
                return
            if request is None:
                return
            reply = answer(
                self._state, request.method, request.path, request.headers, request.body
            )
            if not reply.is_immediate:
                self._task = asyncio.ensure_future(
                    self._play(reply, request.keep_alive)
                )
                return
            self._state.log.finish(reply.record, reply.outcome)
            transport.write(_immediate_bytes(reply, request.keep_alive))
            if not request.keep_alive:
                transport.close()

    async def _play(self, reply: Reply, keep_alive: bool) -> None:
        transport = self._transport
        assert transport is not None
        try:
            await play(reply, _SocketSink(transport, keep_alive), self._state.log)
        finally:
            self._task = None
        if transport.is_closing():
            return
        if keep_alive:
            self._serve_buffered()
        else:
            transport.close()

    @staticmethod
    def _refuse(transport: asyncio.Transport, status: int) -> None:
        message = _status_message(status)
        reply = _whole(status, orjson.dumps(_OPENAI.error_body(status, message)))
        transport.write(_immediate_bytes(reply, keep_alive=False))
        transport.close()
