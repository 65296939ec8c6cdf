"""The connection pool behind ``providers.upstream_client``: who may use which socket.

State: one LIFO stack of idle connections per origin (the most recently used socket is
the one most likely still open), a global insertion-ordered dict of every idle
connection (oldest first, for expiry and eviction), the number of slots in use (open
connections plus those being opened) and a FIFO queue of requests waiting for a slot.

Getting a connection:
1. ``take_idle()`` (synchronous, the hot path): drop expired idle connections from the
   old end, then pop this origin's stack until a connection is still usable: not lost,
   transport not closing, idle for at most ``keepalive_expiry_s``.  No syscall.
2. Else ``acquire_new()``: open a new connection if a slot is free, or evict the oldest
   idle connection of any origin and reuse its slot.
3. Else wait, at most ``connect_timeout_s`` (then ``UpstreamPoolTimeout``), for a
   connection of this origin or a slot handed over by ``release()``/``drop()``.

A new connection is opened by ``providers.upstream_dial`` (happy eyeballs, the proxy
tunnel, TLS with the origin's context, all within ``connect_timeout_s``); its failures
become ``UpstreamConnectError``.

``release(conn)`` returns a connection whose response was complete and allows
keep-alive: straight to a waiter for the same origin if there is one, else onto the
idle stack (evicting the oldest idle one beyond ``max_keepalive``).  Anything else goes
through ``drop(conn)``, which aborts the transport and hands its slot to the first
waiter (or frees it).

Invariants:
* ``slots`` == connections that are ACTIVE or IDLE + connects in progress + slots
  handed to waiters not yet resumed, and never exceeds ``max_connections``.
* Each connection is released or dropped exactly once per checkout; ``drop()`` is
  idempotent, and a CLOSED connection is never parked or handed out.
* While requests wait for a slot, no connection is idle (a freed connection goes to a
  waiter first), so waiting never coexists with an evictable connection.
* A waiter that is cancelled or times out after being handed a connection or a slot
  gives it back, so cancellation leaks nothing.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import ssl
from collections import deque
from collections.abc import Callable
from typing import Final

from providers.upstream_connection import (
    ACTIVE,
    CLOSED,
    IDLE,
    Connection,
    Origin,
    UpstreamConnectError,
    UpstreamPoolTimeout,
)
from providers.upstream_dial import dial

_ALPN_HTTP11: Final = "http/1.1"


# What a waiter may receive besides a connection or a slot (None).
_TIMED_OUT: Final = object()
_POOL_CLOSED: Final = object()
_Grant = Connection | None | object  # a connection, a slot (None) or a sentinel


class ConnectionPool:
    """Bounded keep-alive pool for HTTP/1.1 connections; one per client and loop."""

    def __init__(
        self,
        *,
        connect_timeout_s: float,
        read_timeout_s: float,
        max_connections: int,
        max_keepalive: int,
        keepalive_expiry_s: float,
        ssl_context: ssl.SSLContext | None,
    ) -> None:
        self.connect_timeout_s = connect_timeout_s
        self.read_timeout_s = read_timeout_s
        self.max_connections = max_connections
        self.max_keepalive = max_keepalive
        self.keepalive_expiry_s = keepalive_expiry_s
        self._ssl_context = ssl_context
        self._loop: asyncio.AbstractEventLoop | None = None
        self._idle: dict[Origin, list[Connection]] = {}
        self._idle_order: dict[Connection, None] = {}
        self._all: set[Connection] = set()
        self._waiters: deque[tuple[Origin, asyncio.Future[_Grant]]] = deque()
        self.slots = 0
        self.is_closed = False

    # --- introspection (tests, metrics) ----------------------------------------------

    @property
    def idle_count(self) -> int:
        return len(self._idle_order)

    @property
    def open_count(self) -> int:
        """Open connections, idle or in use (not counting connects in progress)."""
        return len(self._all)

    # --- acquire ---------------------------------------------------------------------

    def take_idle(self, origin: Origin) -> Connection | None:
        """A usable idle connection to ``origin``, or None; never waits."""
        if not self._idle_order:
            return None
        loop = self._loop
        assert loop is not None
        oldest_allowed = loop.time() - self.keepalive_expiry_s
        self._expire(oldest_allowed)
        stack = self._idle.get(origin)
        while stack:
            conn = stack.pop()
            del self._idle_order[conn]
            if conn.is_lost or conn.transport.is_closing():
                self._close(conn)
                continue
            conn.pool_state = ACTIVE
            return conn
        return None

    async def acquire_new(self, origin: Origin) -> Connection:
        """A connection to ``origin`` that is not idle: handed over or newly opened."""
        if self.is_closed:
            raise UpstreamConnectError("the upstream client is closed")
        if self._loop is None:
            self._loop = asyncio.get_running_loop()
        if self.slots < self.max_connections:
            self.slots += 1
        elif self._idle_order:
            self._evict(next(iter(self._idle_order)), keep_slot=True)
        else:
            grant = await self._wait_for_slot(origin)
            if isinstance(grant, Connection):
                return grant
        return await self._open(origin)

    async def _wait_for_slot(self, origin: Origin) -> Connection | None:
        loop = self._loop
        assert loop is not None
        waiter: asyncio.Future[_Grant] = loop.create_future()
        entry = (origin, waiter)
        self._waiters.append(entry)
        timer = loop.call_later(self.connect_timeout_s, _expire_waiter, waiter)
        try:
            grant = await waiter
        except BaseException:  # cancelled: give back whatever was handed over
            self._discard_waiter(entry)
            if not waiter.cancelled():
                self._give_back(waiter.result())
            raise
        finally:
            timer.cancel()
        if grant is _TIMED_OUT:
            self._discard_waiter(entry)
            raise UpstreamPoolTimeout(
                f"no connection slot to {origin.label} within "
                f"{self.connect_timeout_s:g} s ({self.max_connections} in use)"
            )
        if grant is _POOL_CLOSED:
            raise UpstreamConnectError("the upstream client is closed")
        assert grant is None or isinstance(grant, Connection)
        return grant

    def _discard_waiter(self, entry: tuple[Origin, asyncio.Future[_Grant]]) -> None:
        # Absent if a hand-over popped it just as the timeout fired.
        with contextlib.suppress(ValueError):
            self._waiters.remove(entry)

    def _give_back(self, grant: _Grant) -> None:
        if isinstance(grant, Connection):
            self.release(grant)
        elif grant is None:
            self._free_slot()

    async def _open(self, origin: Origin) -> Connection:
        """Connect with a slot already reserved; the slot is freed on failure."""
        try:
            conn = await self._connect(origin)
        except BaseException:
            self._free_slot()
            raise
        if self.is_closed:
            conn.pool_state = CLOSED
            conn.abort()
            self._free_slot()
            raise UpstreamConnectError("the upstream client is closed")
        self._all.add(conn)
        return conn

    async def _connect(self, origin: Origin) -> Connection:
        loop = self._loop
        assert loop is not None
        label = origin.label
        context = None
        if origin.is_tls:
            try:
                context = self._tls_context(origin)
            except (OSError, ValueError) as exc:  # ssl.SSLError is an OSError
                raise UpstreamConnectError(
                    f"TLS settings for {label} unusable: {exc}"
                ) from exc
        try:
            async with asyncio.timeout(self.connect_timeout_s):
                transport, conn = await dial(
                    loop, origin, self._factory(origin), context
                )
        except TimeoutError:
            raise UpstreamConnectError(
                f"connect to {label} timed out after {self.connect_timeout_s:g} s"
            ) from None
        except socket.gaierror as exc:
            raise UpstreamConnectError(f"DNS lookup for {label} failed: {exc}") from exc
        except ssl.SSLError as exc:
            raise UpstreamConnectError(
                f"TLS handshake with {label} failed: {exc}"
            ) from exc
        except OSError as exc:
            raise UpstreamConnectError(f"connect to {label} failed: {exc}") from exc
        if context is not None:
            ssl_object = transport.get_extra_info("ssl_object")
            alpn = ssl_object.selected_alpn_protocol() if ssl_object else None
            if alpn not in (None, _ALPN_HTTP11):
                transport.abort()
                raise UpstreamConnectError(f"{label} negotiated {alpn!r}, not HTTP/1.1")
        return conn

    def _factory(self, origin: Origin) -> Callable[[], Connection]:
        loop = self._loop
        assert loop is not None
        return lambda: Connection(loop, origin, self.read_timeout_s, self._on_lost)

    def _tls_context(self, origin: Origin) -> ssl.SSLContext:
        if origin.tls is not None:  # the route's identity (built once, cached)
            return origin.tls.context()
        context = self._ssl_context
        if context is None:  # built on first use: loading the CA store takes ms
            context = ssl.create_default_context()
            context.set_alpn_protocols([_ALPN_HTTP11])
            self._ssl_context = context
        return context

    # --- release, drop, close --------------------------------------------------------

    def release(self, conn: Connection) -> None:
        """Return a connection after its exchange; parks it only if reusable."""
        if conn.pool_state != ACTIVE:
            return
        if self.is_closed or not conn.is_reusable():
            self.drop(conn)
            return
        if self._waiters and self._hand_over(conn):
            return
        if self._waiters or self.max_keepalive == 0:
            self.drop(conn)  # its slot serves a waiter for another origin
            return
        if len(self._idle_order) >= self.max_keepalive:
            self._evict(next(iter(self._idle_order)), keep_slot=False)
        loop = self._loop
        assert loop is not None
        conn.pool_state = IDLE
        conn.idle_since = loop.time()
        self._idle_order[conn] = None
        stack = self._idle.get(conn.origin)
        if stack is None:
            stack = self._idle[conn.origin] = []
        stack.append(conn)

    def drop(self, conn: Connection) -> None:
        """Abort a connection (if not already) and free its slot; idempotent."""
        state = conn.pool_state
        if state == CLOSED:
            return
        if state == IDLE:
            self._unpark(conn)
        self._close(conn)

    async def aclose(self) -> None:
        """Fail every waiter, abort every connection (idle or in use)."""
        self.is_closed = True
        waiters = list(self._waiters)
        self._waiters.clear()
        for _, waiter in waiters:
            if not waiter.done():
                waiter.set_result(_POOL_CLOSED)
        for conn in list(self._all):
            self.drop(conn)
        await asyncio.sleep(0)  # let the transports run connection_lost

    def _on_lost(self, conn: Connection) -> None:
        """Transport closed: an idle connection leaves the pool at once."""
        if conn.pool_state == IDLE:
            self._unpark(conn)
            self._close(conn)

    def _hand_over(self, conn: Connection) -> bool:
        origin = conn.origin
        for entry in self._waiters:
            wanted, waiter = entry
            if wanted is origin and not waiter.done():
                self._waiters.remove(entry)
                waiter.set_result(conn)
                return True
        return False

    def _expire(self, oldest_allowed: float) -> None:
        idle_order = self._idle_order
        while idle_order:
            conn = next(iter(idle_order))
            if conn.idle_since >= oldest_allowed:
                return
            self._evict(conn, keep_slot=False)

    def _evict(self, conn: Connection, *, keep_slot: bool) -> None:
        self._unpark(conn)
        if keep_slot:  # the caller takes over the slot
            conn.pool_state = CLOSED
            conn.abort()
            self._all.discard(conn)
        else:
            self._close(conn)

    def _unpark(self, conn: Connection) -> None:
        del self._idle_order[conn]
        stack = self._idle.get(conn.origin)
        if stack is not None:
            stack.remove(conn)

    def _close(self, conn: Connection) -> None:
        conn.pool_state = CLOSED
        conn.abort()
        self._all.discard(conn)
        self._free_slot()

    def _free_slot(self) -> None:
        waiters = self._waiters
        while waiters:
            _, waiter = waiters.popleft()
            if not waiter.done():
                waiter.set_result(None)  # the slot passes to this waiter
                return
        self.slots -= 1


def _expire_waiter(waiter: asyncio.Future[_Grant]) -> None:
    if not waiter.done():
        waiter.set_result(_TIMED_OUT)
