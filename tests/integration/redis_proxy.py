"""A loopback TCP proxy in front of Redis that can be cut and restored.

The integration tests need Redis to become unreachable for the gateways without
stopping the real Redis (other tests and people use it).  The proxy runs an asyncio
loop on a daemon thread; ``cut()`` and ``restore()`` are synchronous for the test.

* **Cut** aborts every forwarded connection at once (both sides see a reset), then
  treats new connections by ``mode``:

  - ``"refuse"``: accepted and reset at once, as a stopped Redis answers;
  - ``"blackhole"``: accepted and held silent, as a network partition looks: the
    client waits for its own timeout.

* **Restore** forwards new connections again; held connections whose clients are
  still waiting are forwarded too, as a healed network would let them through.

Bytes are copied as they are, so the database number in the client's URL (its
``SELECT``) reaches Redis unchanged.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Coroutine
from typing import Any, Literal

Mode = Literal["refuse", "blackhole"]
CHUNK_BYTES = 65536


class RedisProxy:
    def __init__(
        self, target: tuple[str, int] = ("127.0.0.1", 6379), mode: Mode = "refuse"
    ) -> None:
        self.target = target
        self.mode: Mode = mode
        self.port = 0
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(
            target=self._loop.run_forever, name="redis-proxy", daemon=True
        )
        self._server: asyncio.Server | None = None
        self._up = asyncio.Event()
        self._closing = False
        self._links: set[asyncio.StreamWriter] = set()  # both ends of forwarded pairs
        self._handlers: set[asyncio.Task[None]] = set()

    # ------------------------------------------------------------- test API

    def url(self, db: int) -> str:
        return f"redis://127.0.0.1:{self.port}/{db}"

    def start(self) -> RedisProxy:
        self._thread.start()
        self._call(self._start())
        return self

    def cut(self) -> None:
        """Reset every live connection; new ones are refused or held (``mode``)."""
        self._call(self._cut())

    def restore(self) -> None:
        self._call(self._restore())

    def close(self) -> None:
        if not self._thread.is_alive():
            return
        self._call(self._close())
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(5)
        self._loop.close()

    def __enter__(self) -> RedisProxy:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    # ------------------------------------------------------------- the loop side

    def _call(self, work: Coroutine[Any, Any, None]) -> None:
        asyncio.run_coroutine_threadsafe(work, self._loop).result(timeout=5)

    async def _start(self) -> None:
        self._up.set()
        self._server = await asyncio.start_server(self._accepted, "127.0.0.1", 0)
        self.port = int(self._server.sockets[0].getsockname()[1])

    async def _cut(self) -> None:
        self._up.clear()
        for writer in list(self._links):
            writer.transport.abort()

    async def _restore(self) -> None:
        self._up.set()

    async def _close(self) -> None:
        self._closing = True
        if self._server is not None:
            self._server.close()
        await self._cut()
        self._up.set()  # wakes the held connections, which see _closing and go
        if self._handlers:
            await asyncio.wait(set(self._handlers))
        if self._server is not None:
            await self._server.wait_closed()

    async def _accepted(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._handlers.add(task)
        try:
            await self._serve(reader, writer)
        finally:
            writer.transport.abort()
            self._handlers.discard(task)

    async def _serve(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        while not self._up.is_set():
            if self.mode == "refuse":
                return
            await self._up.wait()
        if self._closing:
            return
        try:
            up_reader, up_writer = await asyncio.open_connection(*self.target)
        except OSError:
            return
        self._links.update((writer, up_writer))
        try:
            pumps = {
                asyncio.create_task(_pump(reader, up_writer)),
                asyncio.create_task(_pump(up_reader, writer)),
            }
            # one side ended or was reset: end the other at once
            _, pending = await asyncio.wait(pumps, return_when=asyncio.FIRST_COMPLETED)
            for pump in pending:
                pump.cancel()
            await asyncio.wait(pumps)
        finally:
            self._links.difference_update((writer, up_writer))
            up_writer.transport.abort()


async def _pump(source: asyncio.StreamReader, sink: asyncio.StreamWriter) -> None:
    with contextlib.suppress(OSError):
        while data := await source.read(CHUNK_BYTES):
            sink.write(data)
            await sink.drain()
