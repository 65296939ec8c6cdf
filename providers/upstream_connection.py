"""One upstream HTTP/1.1 connection: an asyncio ``Protocol`` fed to httptools.

This is the wire half of ``providers.upstream_client`` (the public API) and
``providers.upstream_pool`` (who may use which connection).  It also defines the error
vocabulary, because every layer raises it.

Algorithm.  ``send_request()`` resets the per-exchange state and writes the request
(head and a body up to ``SINGLE_WRITE_BYTES`` in one ``transport.write``).
``data_received()`` feeds the bytes to an ``httptools.HttpResponseParser`` whose
callbacks fill that state: raw header pairs, ``status``, ``keep_alive``, the body
chunks (de-chunked, undecoded) and ``complete``.
The reader never touches the parser: it calls the synchronous ``next_body()`` and only
when that says "nothing yet" awaits ``wait()``, a fresh future that the next parser
event, the end of the connection or the read timer resolves.  Framing is left to the
parser (Content-Length, chunked, 1xx interim responses, 204/304 without a body), except
for the two cases httptools cannot express: the body of a HEAD response is skipped here
(and the parser replaced before the next request), and a body delimited by the end of
the connection is completed in ``connection_lost()`` because httptools has no
``finish()``.

Read timeout.  One lazily re-armed timer per connection, not one per wait: ``wait()``
and ``data_received()`` move ``last_read_at`` forward, and when the timer fires it
either re-arms itself at ``last_read_at + read_timeout_s`` or, if that moment has
passed while a reader waits, fails the exchange with ``UpstreamReadTimeout``.  With no
reader waiting it disarms itself, so a slow consumer is never blamed on the upstream.

Backpressure.  Once more than ``HIGH_WATER_BYTES`` of body are buffered and unread,
reading from the socket pauses; ``next_body()`` hands out everything buffered and
resumes it.

Invariants:
* A connection carries at most one exchange at a time; bytes that arrive while no
  response is expected make it unusable (it is aborted, never parsed into a response).
* ``error`` is set at most once per exchange, and never after ``complete``: buffered
  body bytes are always delivered before the error is raised.
* No callback raises into httptools or the event loop, and ``CancelledError`` is never
  caught here: a cancelled reader simply stops waiting, and its owner aborts the
  connection.
* Nothing here makes a syscall to look at the socket; a closed connection is known from
  ``connection_lost()`` (``is_lost``) or ``transport.is_closing()``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import TYPE_CHECKING, cast

import httptools

if TYPE_CHECKING:
    from providers.outbound_policy import Proxy, TLSConfig

HIGH_WATER_BYTES = 256 * 1024  # unread body bytes buffered before reading pauses
MAX_HEAD_BYTES = 256 * 1024  # a status line plus headers longer than this is refused
SINGLE_WRITE_BYTES = 64 * 1024  # a request body up to this size shares the head's write
FINAL_STATUS_MIN = 200  # 1xx responses are interim


class UpstreamError(Exception):
    """Base class of every error this client raises for an upstream exchange."""


class UpstreamConnectError(UpstreamError):
    """No usable connection: bad URL, DNS failure, refused, connect/TLS timeout or
    TLS failure."""


class UpstreamReadError(UpstreamError):
    """The connection was closed or reset before the complete response, or the
    response was malformed."""


class UpstreamReadTimeout(UpstreamError):
    """No byte arrived for ``read_timeout_s`` while waiting for headers or body."""


class UpstreamPoolTimeout(UpstreamError):
    """No connection slot became free within ``connect_timeout_s``."""


class Origin:
    """scheme + host + port, and the route to it: the proxy (None: direct) and the
    TLS identity (``tls``, for https; None: the pool's own context).  Interned by the
    client per (scheme, host, port, proxy, tls), so identity is equality and
    connections through different proxies or TLS identities are never mixed."""

    __slots__ = ("host", "is_tls", "label", "port", "proxy", "tls")

    def __init__(
        self,
        scheme: str,
        host: str,
        port: int,
        proxy: Proxy | None = None,
        tls: TLSConfig | None = None,
    ) -> None:
        self.host = host
        self.port = port
        self.is_tls = scheme == "https"
        self.proxy = proxy
        self.tls = tls if self.is_tls else None
        shown = f"[{host}]" if ":" in host else host
        via = f" via proxy {proxy.address}" if proxy is not None else ""
        self.label = f"{scheme}://{shown}:{port}{via}"

    def __repr__(self) -> str:
        return f"Origin({self.label})"


# Connection states as the pool sees them.
ACTIVE = 0  # checked out by one request/response
IDLE = 1  # parked in the pool, reusable
CLOSED = 2  # aborted; its slot has been given back


class Connection(asyncio.Protocol):
    """The protocol object of one TCP (or TLS) connection to one origin."""

    __slots__ = (
        "buffered",
        "chunks",
        "complete",
        "error",
        "exchanges",
        "expecting",
        "header_count",
        "headers_done",
        "idle_since",
        "is_head",
        "is_interim",
        "is_lost",
        "is_paused",
        "keep_alive",
        "label",
        "last_read_at",
        "loop",
        "on_lost",
        "origin",
        "parser",
        "parser_spent",
        "pool_state",
        "raw_headers",
        "read_timeout_s",
        "received",
        "status",
        "timer",
        "transport",
        "until_close",
        "waiter",
        "wants_close",
    )

    def __init__(
        self,
        loop: asyncio.AbstractEventLoop,
        origin: Origin,
        read_timeout_s: float,
        on_lost: Callable[[Connection], None],
    ) -> None:
        self.loop = loop
        self.origin = origin
        self.label = origin.label  # for error messages
        self.read_timeout_s = read_timeout_s
        self.on_lost = on_lost
        # Set by connection_made(), which runs before the pool ever sees this object.
        self.transport = cast(asyncio.Transport, None)
        self.parser = httptools.HttpResponseParser(self)
        self.parser_spent = False
        self.is_lost = False
        self.pool_state = ACTIVE
        self.idle_since = 0.0
        self.exchanges = 0
        self.timer: asyncio.TimerHandle | None = None
        self.waiter: asyncio.Future[None] | None = None
        self.last_read_at = 0.0
        self.is_paused = False
        self.raw_headers: list[tuple[bytes, bytes]] = []
        self._reset_exchange(is_head=False, wants_close=False)

    def _reset_exchange(self, *, is_head: bool, wants_close: bool) -> None:
        self.expecting = False
        self.is_head = is_head
        self.wants_close = wants_close
        self.is_interim = False
        self.headers_done = False
        self.header_count = 0
        self.complete = False
        self.keep_alive = False
        self.until_close = False
        self.status = 0
        if self.raw_headers:  # normally the fresh list left by take_headers()
            self.raw_headers = []
        self.chunks: list[bytes] = []
        self.buffered = 0
        if self.is_paused:  # a body left unread in the buffer of the last exchange
            self.is_paused = False
            self.transport.resume_reading()
        self.received = 0
        self.error: UpstreamError | None = None

    # --- used by the pool and the response ------------------------------------------

    def is_reusable(self) -> bool:
        """True if the last response was complete and both sides allow keep-alive."""
        return (
            self.complete
            and self.keep_alive
            and not self.wants_close
            and not self.is_lost
            and not self.transport.is_closing()
        )

    def abort(self) -> None:
        """Close the socket now, unsent data and all: the only "stop" an upstream
        understands."""
        if not self.is_lost:
            self.transport.abort()

    def take_headers(self) -> list[tuple[bytes, bytes]]:
        """Hand the raw header pairs to the response, without any trailers."""
        raw = self.raw_headers
        self.raw_headers = []
        if len(raw) > self.header_count:  # trailers that came with the head
            del raw[self.header_count :]
        return raw

    def send_request(
        self, head: bytes, content: bytes, *, is_head: bool, wants_close: bool
    ) -> None:
        """Start one exchange: reset its state and write the request."""
        if self.parser_spent:  # after a HEAD the parser still expects its body
            self.parser = httptools.HttpResponseParser(self)
            self.parser_spent = False
        self._reset_exchange(is_head=is_head, wants_close=wants_close)
        self.expecting = True
        self.exchanges += 1
        if len(content) <= SINGLE_WRITE_BYTES:
            self.transport.write(head + content)
        else:  # not worth copying into one buffer
            self.transport.write(head)
            self.transport.write(content)

    def headers_ready(self) -> bool:
        """True once the final status line and headers are in; raises the error of a
        failed exchange."""
        if self.headers_done:
            return True
        if self.error is not None:
            raise self.error
        return False

    def next_body(self) -> bytes | None:
        """Everything buffered; ``b""`` at the end of the body; None: wait first.

        Raises the exchange's error once the buffered bytes are gone.
        """
        chunks = self.chunks
        if chunks:
            data = chunks[0] if len(chunks) == 1 else b"".join(chunks)
            chunks.clear()
            self.buffered = 0
            if self.is_paused:
                self.is_paused = False
                if not self.transport.is_closing():
                    self.transport.resume_reading()
            if data:
                return data
        if self.complete:
            return b""
        if self.error is not None:
            raise self.error
        return None

    def wait(self) -> asyncio.Future[None]:
        """A future for the next parser event, the end of the connection or a timeout.

        A plain function, not a coroutine: one frame less on every resumption.
        """
        loop = self.loop
        waiter: asyncio.Future[None] = loop.create_future()
        self.waiter = waiter
        now = loop.time()
        self.last_read_at = now  # the silence being timed starts now
        if self.timer is None:
            self.timer = loop.call_at(now + self.read_timeout_s, self._on_timer)
        return waiter

    # --- asyncio.Protocol ------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # uvloop's transports do not subclass asyncio.Transport, hence a cast.
        self.transport = cast(asyncio.Transport, transport)

    def data_received(self, data: bytes) -> None:
        if not self.expecting:
            # Bytes nobody asked for (often a 408 before an idle close): the framing of
            # anything after them is unknowable, so the connection is finished.
            self.transport.abort()
            return
        self.received += len(data)
        self.last_read_at = self.loop.time()
        try:
            self.parser.feed_data(data)
        except (httptools.HttpParserError, httptools.HttpParserUpgrade) as exc:
            self._fail(
                UpstreamReadError(f"malformed response from {self.label}: {exc}")
            )
            self.transport.abort()
            return
        if not self.headers_done and self.received > MAX_HEAD_BYTES:
            self._fail(UpstreamReadError(f"response head from {self.label} too large"))
            self.transport.abort()
        elif self.buffered > HIGH_WATER_BYTES and not self.is_paused:
            self.is_paused = True
            self.transport.pause_reading()

    def eof_received(self) -> bool:
        return False  # close; an EOF-delimited body is completed in connection_lost

    def connection_lost(self, exc: Exception | None) -> None:
        self.is_lost = True
        timer = self.timer
        if timer is not None:
            self.timer = None
            timer.cancel()
        if self.expecting:
            if self.headers_done and self.until_close:
                self._finish()
            else:
                reason = f": {exc}" if exc is not None else ""
                self._fail(
                    UpstreamReadError(
                        f"connection to {self.label} closed before the complete "
                        f"response{reason}"
                    )
                )
        self.on_lost(self)

    # --- httptools callbacks ---------------------------------------------------------

    def on_header(self, name: bytes, value: bytes) -> None:
        self.raw_headers.append((name, value))

    def on_headers_complete(self) -> None:
        if not self.expecting:
            # A second message in the same segment, which nobody asked for: the
            # connection is unusable.
            self.wants_close = True
            return
        parser = self.parser
        status = parser.get_status_code()
        if status < FINAL_STATUS_MIN:
            # Interim (100, 103, ...): skipped, the final response follows.
            self.is_interim = True
            self.raw_headers = []
            return
        self.status = status
        keep_alive = self.keep_alive = parser.should_keep_alive()
        self.until_close = not keep_alive and self._is_body_until_close()
        self.header_count = len(self.raw_headers)
        self.headers_done = True
        if self.is_head:  # no body, whatever Content-Length says
            self.parser_spent = True
            self._finish()
        else:
            self._wake()

    def on_body(self, body: bytes) -> None:
        if not self.expecting:  # after a HEAD reply, a failure or an unasked message
            return
        self.chunks.append(body)
        self.buffered += len(body)
        self._wake()

    def on_message_complete(self) -> None:
        if self.is_interim:
            self.is_interim = False
        elif not self.complete:
            self._finish()

    # --- internals -------------------------------------------------------------------

    def _finish(self) -> None:
        self.complete = True
        self.expecting = False
        self._wake()

    def _fail(self, error: UpstreamError) -> None:
        if self.error is None and not self.complete:
            self.error = error
            self.expecting = False
            self._wake()

    def _wake(self) -> None:
        waiter = self.waiter
        if waiter is not None:
            self.waiter = None
            if not waiter.done():
                waiter.set_result(None)

    def _on_timer(self) -> None:
        self.timer = None
        waiter = self.waiter
        if waiter is None or waiter.done():
            return  # nobody waits: disarmed until the next wait()
        deadline = self.last_read_at + self.read_timeout_s
        if self.loop.time() < deadline:
            self.timer = self.loop.call_at(deadline, self._on_timer)
            return
        self._fail(
            UpstreamReadTimeout(
                f"no data from {self.label} for {self.read_timeout_s:g} s"
            )
        )

    def _is_body_until_close(self) -> bool:
        """True if the response has neither Content-Length nor chunked framing."""
        for name, value in self.raw_headers:
            lower = name.lower()
            if lower == b"content-length":
                return False
            if lower == b"transfer-encoding" and value.lower().rstrip().endswith(
                b"chunked"
            ):
                return False
        return True
