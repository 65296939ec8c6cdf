"""A lean HTTP/1.1 client for the upstream hot path, shaped like the bit of httpx used.

``UpstreamClient.stream(method, url, content=..., headers=...)`` is an async context
manager yielding an ``UpstreamResponse`` (``status_code``, ``headers``, ``aread()``,
``aiter_raw()``, ``aclose()``), so calling code reads as it did with
``httpx.AsyncClient``.  Only stdlib and httptools; one client per process and loop;
``for_provider(outbound)`` is the same client and pool routed by a provider's values.
``providers.upstream_pool`` decides which socket a request uses and
``providers.upstream_connection`` speaks HTTP/1.1 on it.

One request:
1. The URL is split once and cached per URL string (http/https only, else
   ``UpstreamConnectError``); its origin (scheme, host, port) is interned.
   With a policy (``providers.outbound_policy``) the route decides, once per URL, the
   proxy (none, the environment's, or the provider's) and the TLS identity; both are
   part of the interned origin, so they are part of every pool key.
2. The head is built in one string: request line (path + query; absolute-form
   ``http://host/path`` when an http URL goes through a proxy), the caller's headers as
   given, the route's default headers (a provider's fixed headers, ``User-Agent:
   omniroute/<version>``) whose names the caller did not set, then ``Host`` (with the
   port when not the default), ``Proxy-Authorization`` (absolute-form only) and
   ``Accept-Encoding: identity`` unless the caller set them, and ``Content-Length``
   (for a body, or any POST/PUT/PATCH).  The caller's ``Content-Length``/
   ``Transfer-Encoding`` are dropped: framing is set here.  Head and a body up to
   64 KiB go out in one write.
3. The pool hands out the most recently idle connection of the origin (no syscall) or a
   new one (``providers.upstream_dial``: addresses raced, ``CONNECT`` through a proxy
   for https, then TLS); then the status line and headers are awaited.  Redirects are
   not followed.
4. Stale keep-alive: an idle connection the server has closed is never taken from the
   pool.  A request once sent is never sent again, even when the server closes or
   resets without answering (spec 02 §5: no same-target retries).
5. The body is read through ``aread()`` or ``aiter_raw()`` (de-chunked, never decoded).
   When it has been fully received the connection goes back to the pool if the response
   allows keep-alive; closing the response or its context manager before then, an
   error, or a cancellation aborts the connection instead.

Invariants:
* An OpenAI-compatible upstream keeps generating while the connection is open; closing
  it is the only "stop" it understands, so a response left before its end is never
  pooled, and its socket is closed at once.
* ``CancelledError`` is never caught to be swallowed: every ``except BaseException``
  here releases what it holds and re-raises.  No request starts a task, except the
  racing of a new connection's addresses when a host has several (``upstream_dial``).
* Every error is an ``UpstreamError``: ``UpstreamConnectError`` (no connection),
  ``UpstreamReadError`` (closed, reset or malformed), ``UpstreamReadTimeout`` (silence
  longer than ``read_timeout_s``) or ``UpstreamPoolTimeout`` (no slot within
  ``connect_timeout_s``).  Misuse raises ``RuntimeError`` (a closed client, a body
  read twice) or ``ValueError`` (CR/LF in the head, a non-Latin-1 header value).
* Request bodies are written without waiting for the socket to drain; they are bounded
  by the gateway's request size limit.
"""

from __future__ import annotations

import re
import ssl
from collections.abc import Coroutine, Iterable, Iterator, Mapping
from contextlib import AbstractAsyncContextManager
from types import TracebackType
from typing import Final, Self, TypeVar, overload
from urllib.parse import quote, urlsplit

from providers.outbound_policy import OutboundPolicy, ProviderOutbound, Proxy, Route
from providers.upstream_connection import (
    Connection,
    Origin,
    UpstreamConnectError,
    UpstreamError,
    UpstreamPoolTimeout,
    UpstreamReadError,
    UpstreamReadTimeout,
)
from providers.upstream_pool import ConnectionPool

__all__ = [
    "Headers",
    "RoutedClient",
    "UpstreamClient",
    "UpstreamConnectError",
    "UpstreamError",
    "UpstreamPoolTimeout",
    "UpstreamReadError",
    "UpstreamReadTimeout",
    "UpstreamResponse",
]

_T = TypeVar("_T")
_DEFAULT_PORTS: Final = {"http": 80, "https": 443}
_FRAMING_HEADERS: Final = frozenset({"content-length", "transfer-encoding"})
_SET_HERE: Final = frozenset({"host", "accept-encoding", "connection"})
_BODY_METHODS: Final = frozenset({"POST", "PUT", "PATCH"})
_MAX_CACHED_URLS: Final = 1024  # per route
_MAX_ROUTES: Final = 256
_UNSAFE_IN_TARGET: Final = re.compile(r"[^\x21-\x7e]")
_TARGET_SAFE: Final = "!$&'()*+,;=:@/?%-._~"


class Headers(Mapping[str, str]):
    """Case-insensitive, read-only response headers; repeated names are joined by
    ``", "``.  Keys iterate lower-cased, as in httpx."""

    __slots__ = ("_map", "_raw")

    def __init__(
        self,
        raw: Iterable[tuple[bytes | str, bytes | str]] | Mapping[str, str] = (),
    ) -> None:
        pairs = raw.items() if isinstance(raw, Mapping) else raw
        self._raw: list[tuple[bytes, bytes]] = [
            (_latin1(name), _latin1(value)) for name, value in pairs
        ]
        self._map: dict[str, str] | None = None

    @classmethod
    def _from_wire(cls, raw: list[tuple[bytes, bytes]]) -> Headers:
        headers = cls.__new__(cls)
        headers._raw = raw
        headers._map = None
        return headers

    def _mapping(self) -> dict[str, str]:
        mapping = self._map
        if mapping is None:
            mapping = {}
            for name, value in self._raw:
                key = name.decode("latin-1").lower()
                text = value.decode("latin-1")
                earlier = mapping.get(key)
                mapping[key] = text if earlier is None else f"{earlier}, {text}"
            self._map = mapping
        return mapping

    def __getitem__(self, key: str) -> str:
        return self._mapping()[key.lower()]

    @overload
    def get(self, key: str, /) -> str | None: ...
    @overload
    def get(self, key: str, /, default: str | _T) -> str | _T: ...
    def get(self, key: str, /, default: object = None) -> object:
        return self._mapping().get(key.lower(), default)

    def __contains__(self, key: object) -> bool:
        return isinstance(key, str) and key.lower() in self._mapping()

    def __iter__(self) -> Iterator[str]:
        return iter(self._mapping())

    def __len__(self) -> int:
        return len(self._mapping())

    def get_list(self, key: str) -> list[str]:
        """Each value of ``key`` separately, in the order received."""
        wanted = key.lower().encode("latin-1")
        return [v.decode("latin-1") for n, v in self._raw if n.lower() == wanted]

    def multi_items(self) -> list[tuple[str, str]]:
        return [
            (n.decode("latin-1").lower(), v.decode("latin-1")) for n, v in self._raw
        ]

    @property
    def raw(self) -> list[tuple[bytes, bytes]]:
        """The header pairs as received (original case and order)."""
        return list(self._raw)

    def __repr__(self) -> str:
        return f"Headers({self.multi_items()!r})"


def _latin1(text: bytes | str) -> bytes:
    return text if isinstance(text, bytes) else text.encode("latin-1")


class UpstreamResponse:
    """Status and headers of one response; its body is read at most once."""

    __slots__ = ("_conn", "_content", "_is_done", "_pool", "headers", "status_code")

    def __init__(self, conn: Connection, pool: ConnectionPool) -> None:
        self.status_code: int = conn.status
        self.headers = Headers._from_wire(conn.take_headers())
        self._conn: Connection | None = conn
        self._pool = pool
        self._content: bytes | None = None
        self._is_done = False

    def __repr__(self) -> str:
        return f"<UpstreamResponse [{self.status_code}]>"

    @property
    def is_closed(self) -> bool:
        """True once the connection is released or aborted."""
        return self._conn is None

    async def aread(self) -> bytes:
        """The whole body (de-chunked, not decoded); cached after the first call."""
        content = self._content
        if content is not None:
            return content
        conn = self._live_connection()
        parts: list[bytes] = []
        try:
            while True:
                chunk = conn.next_body()
                if chunk is None:
                    await conn.wait()
                elif chunk:
                    parts.append(chunk)
                else:
                    break
        except BaseException:
            self._abort()
            raise
        self._release()
        content = self._content = b"".join(parts)
        return content

    def aiter_raw(self) -> _RawStream:
        """The body as it arrives (de-chunked, not decoded)."""
        return _RawStream(self)

    def aiter_bytes(self) -> _RawStream:
        """The same as ``aiter_raw``: this client asks for no content encoding."""
        return _RawStream(self)

    async def aclose(self) -> None:
        self.close()

    def close(self) -> None:
        """Release the connection if the whole response has arrived, else abort it."""
        conn = self._conn
        if conn is not None:
            if conn.complete:
                self._release()
            else:
                self._abort()

    def _live_connection(self) -> Connection:
        conn = self._conn
        if conn is None:
            state = "consumed" if self._is_done else "closed"
            raise RuntimeError(f"the response body was already {state}")
        return conn

    def _release(self) -> None:
        conn = self._conn
        if conn is not None:
            self._conn = None
            self._is_done = True
            self._pool.release(conn)

    def _abort(self) -> None:
        conn = self._conn
        if conn is not None:
            self._conn = None
            self._pool.drop(conn)


class _RawStream:
    """``async for`` over a response body; no async generator, nothing to finalize."""

    __slots__ = ("_pending", "_response")

    def __init__(self, response: UpstreamResponse) -> None:
        self._response = response
        self._pending = response._content  # already read: replay it once

    def __aiter__(self) -> Self:
        return self

    async def __anext__(self) -> bytes:
        pending = self._pending
        if pending is not None:
            self._pending = None
            if pending:
                return pending
            raise StopAsyncIteration
        response = self._response
        if response._is_done:
            raise StopAsyncIteration
        conn = response._live_connection()
        try:
            chunk = conn.next_body()
            while chunk is None:
                await conn.wait()
                chunk = conn.next_body()
        except BaseException:
            response._abort()
            raise
        if chunk:
            return chunk
        response._release()
        raise StopAsyncIteration


class _Target:
    """One parsed URL: its interned origin and the constant parts of the head."""

    __slots__ = ("host_line", "origin", "proxy_lines", "target_line")

    def __init__(
        self,
        origin: Origin,
        target_line: str,
        host_line: str,
        proxy_lines: tuple[str, ...] = (),
    ) -> None:
        self.origin = origin
        self.target_line = target_line  # " /path?query HTTP/1.1\r\n" (absolute-form
        # " http://host/path HTTP/1.1\r\n" through a proxy)
        self.host_line = host_line  # "Host: host[:port]\r\n"
        self.proxy_lines = proxy_lines  # ("Proxy-Authorization: ...\r\n",) or ()


class _ClientRoute:
    """A policy route as this client uses it: its URL cache and default header lines."""

    __slots__ = ("extra", "route", "targets")

    def __init__(self, route: Route | None) -> None:
        self.route = route
        self.targets: dict[str, _Target] = {}
        #: (lower-case name, "Name: value\r\n"): added unless the call sets the name
        self.extra: tuple[tuple[str, str], ...] = tuple(
            (name.lower(), f"{name}: {value}\r\n")
            for name, value in (route.headers if route is not None else ())
        )


class RoutedClient:
    """The client as one provider's outbound values route it (``UpstreamClient.
    for_provider``): the same pool, that provider's proxy, TLS identity and headers."""

    __slots__ = ("_client", "_route")

    def __init__(self, client: UpstreamClient, route: _ClientRoute) -> None:
        self._client = client
        self._route = route

    @property
    def is_closed(self) -> bool:
        return self._client.is_closed

    def stream(
        self,
        method: str,
        url: str,
        *,
        content: bytes = b"",
        headers: Mapping[str, str] | None = None,
    ) -> AbstractAsyncContextManager[UpstreamResponse]:
        return _StreamContext(self._client, method, url, content, headers, self._route)

    async def aclose(self) -> None:
        """Closes the shared client (as ``UpstreamClient.aclose``)."""
        await self._client.aclose()


class _StreamContext:
    __slots__ = ("_client", "content", "headers", "method", "response", "route", "url")

    def __init__(
        self,
        client: UpstreamClient,
        method: str,
        url: str,
        content: bytes,
        headers: Mapping[str, str] | None,
        route: _ClientRoute,
    ) -> None:
        self._client = client
        self.route = route
        self.method = method
        self.url = url
        self.content = content
        self.headers = headers
        self.response: UpstreamResponse | None = None

    def __aenter__(self) -> Coroutine[None, None, UpstreamResponse]:
        # The request coroutine itself, not one wrapping it: a frame less per await.
        return self._client._send(self)

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        response = self.response
        if response is not None:
            response.close()


class UpstreamClient:
    """Pooled HTTP/1.1 client; create and use it on one event loop.

    ``policy`` (``providers.outbound_policy``) routes every request: proxies, the
    trust store, default headers; ``for_provider(outbound)`` gives a provider's own
    route on the same pool.  Without a policy: direct connections, ``ssl_context``
    (else the system store), no default headers.
    """

    def __init__(
        self,
        *,
        connect_timeout_s: float = 10.0,
        read_timeout_s: float = 300.0,
        max_connections: int = 200,
        max_keepalive: int = 50,
        keepalive_expiry_s: float = 30.0,
        ssl_context: ssl.SSLContext | None = None,
        policy: OutboundPolicy | None = None,
    ) -> None:
        if policy is not None and ssl_context is not None:
            raise ValueError("pass ssl_context or policy, not both")
        if min(connect_timeout_s, read_timeout_s, keepalive_expiry_s) <= 0:
            raise ValueError("timeouts and keepalive_expiry_s must be > 0")
        if max_connections < 1 or max_keepalive < 0:
            raise ValueError("max_connections must be >= 1 and max_keepalive >= 0")
        self._pool = ConnectionPool(
            connect_timeout_s=connect_timeout_s,
            read_timeout_s=read_timeout_s,
            max_connections=max_connections,
            max_keepalive=max_keepalive,
            keepalive_expiry_s=keepalive_expiry_s,
            ssl_context=ssl_context,
        )
        self._policy = policy
        self._default = _ClientRoute(policy.route() if policy is not None else None)
        self._routed: dict[ProviderOutbound, RoutedClient] = {}
        self._origins: dict[
            tuple[str, str, int, Proxy | None, object | None], Origin
        ] = {}

    @property
    def is_closed(self) -> bool:
        return self._pool.is_closed

    @property
    def pool(self) -> ConnectionPool:
        """The connection pool (read-only use: counts for tests and metrics)."""
        return self._pool

    def stream(
        self,
        method: str,
        url: str,
        *,
        content: bytes = b"",
        headers: Mapping[str, str] | None = None,
    ) -> AbstractAsyncContextManager[UpstreamResponse]:
        """Send one request; the context manager yields the response at its headers."""
        return _StreamContext(self, method, url, content, headers, self._default)

    def for_provider(
        self, outbound: ProviderOutbound | None
    ) -> UpstreamClient | RoutedClient:
        """This client as ``outbound`` routes it (None: the policy's defaults, i.e.
        the client itself); one view per distinct value, cached."""
        if outbound is None:
            return self
        routed = self._routed.get(outbound)
        if routed is None:
            policy = self._policy
            if policy is None:
                raise ValueError("a client without a policy has no provider routes")
            if len(self._routed) >= _MAX_ROUTES:
                self._routed.clear()
            routed = self._routed[outbound] = RoutedClient(
                self, _ClientRoute(policy.route(outbound))
            )
        return routed

    async def aclose(self) -> None:
        """Abort every connection, idle or in use; later requests raise RuntimeError."""
        await self._pool.aclose()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    async def _send(self, context: _StreamContext) -> UpstreamResponse:
        pool = self._pool
        url = context.url
        content = context.content
        if pool.is_closed:
            raise RuntimeError("cannot send a request: the client has been closed")
        route = context.route
        target = route.targets.get(url)
        if target is None:
            target = self._parse(url, route)
        method = context.method.upper()
        head, wants_close = _request_head(
            method, target, content, context.headers, route.extra
        )
        is_head = method == "HEAD"
        origin = target.origin
        # An idle connection the server has closed is never taken (``take_idle``
        # skips it); once the request is sent it is never sent again, even when the
        # server closes without answering (spec 02 §5: no same-target retries).
        conn = pool.take_idle(origin)
        if conn is None:
            conn = await pool.acquire_new(origin)
        try:
            conn.send_request(head, content, is_head=is_head, wants_close=wants_close)
            while not conn.headers_ready():
                await conn.wait()
        except BaseException:
            pool.drop(conn)
            raise
        response = context.response = UpstreamResponse(conn, pool)
        return response

    def _origin(self, scheme: str, host: str, port: int, route: _ClientRoute) -> Origin:
        """The interned origin: the URL's, and the proxy and TLS identity to it."""
        policy_route = route.route
        proxy = tls = None
        if policy_route is not None:
            proxy = policy_route.proxy_for(scheme, host, port)
            tls = policy_route.tls if scheme == "https" else None
        key = (scheme, host, port, proxy, tls)
        origin = self._origins.get(key)
        if origin is None:
            origin = self._origins[key] = Origin(scheme, host, port, proxy, tls)
        return origin

    def _parse(self, url: str, route: _ClientRoute) -> _Target:
        try:
            parts = urlsplit(url)
            port = parts.port
        except ValueError as exc:
            raise UpstreamConnectError(f"invalid URL {url!r}: {exc}") from None
        scheme = parts.scheme.lower()
        default_port = _DEFAULT_PORTS.get(scheme)
        if default_port is None:
            raise UpstreamConnectError(
                f"unsupported URL scheme {scheme!r} in {url!r}: only http and https"
            )
        host = parts.hostname
        if not host:
            raise UpstreamConnectError(f"no host in URL {url!r}")
        if not host.isascii():
            try:
                host = host.encode("idna").decode("ascii")
            except UnicodeError as exc:
                raise UpstreamConnectError(f"invalid host in {url!r}: {exc}") from None
        port = default_port if port is None else port
        path = parts.path or "/"
        if parts.query:
            path = f"{path}?{parts.query}"
        if _UNSAFE_IN_TARGET.search(path):
            path = quote(path, safe=_TARGET_SAFE)
        shown = f"[{host}]" if ":" in host else host
        if port != default_port:
            shown = f"{shown}:{port}"
        origin = self._origin(scheme, host, port, route)
        proxy = origin.proxy
        target_line = f" {path} HTTP/1.1\r\n"
        proxy_lines: tuple[str, ...] = ()
        if proxy is not None and scheme == "http":  # absolute-form to the proxy
            target_line = f" http://{shown}{path} HTTP/1.1\r\n"
            if proxy.authorization:
                proxy_lines = (f"Proxy-Authorization: {proxy.authorization}\r\n",)
        target = _Target(origin, target_line, f"Host: {shown}\r\n", proxy_lines)
        targets = route.targets
        if len(targets) >= _MAX_CACHED_URLS:
            targets.clear()
        targets[url] = target
        return target


def _request_head(
    method: str,
    target: _Target,
    content: bytes,
    headers: Mapping[str, str] | None,
    extra: tuple[tuple[str, str], ...] = (),
) -> tuple[bytes, bool]:
    """The request head as bytes, and whether the caller asked for Connection: close.

    ``extra`` (the route's default headers) follow the caller's, each unless the
    caller set the same name."""
    parts = [method, target.target_line]
    has_host = has_encoding = wants_close = False
    if headers:
        for name, value in headers.items():
            lower = name.lower()
            if lower in _FRAMING_HEADERS:
                continue
            if lower in _SET_HERE:
                if lower == "host":
                    has_host = True
                elif lower == "accept-encoding":
                    has_encoding = True
                else:
                    wants_close = "close" in value.lower()
            parts.append(f"{name}: {value}\r\n")
    if extra:
        parts.extend(_defaults(extra, headers))
    if not has_host:
        parts.append(target.host_line)
    parts.extend(target.proxy_lines)
    if not has_encoding:
        parts.append("Accept-Encoding: identity\r\n")
    if content or method in _BODY_METHODS:
        parts.append(f"Content-Length: {len(content)}\r\n")
    parts.append("\r\n")
    head = "".join(parts)
    lines = len(parts) - 1  # every part but the method ends with the only CRLF
    if head.count("\n") != lines or head.count("\r") != lines:
        raise ValueError("CR or LF in the request method, a header name or a value")
    return head.encode("latin-1"), wants_close


def _defaults(
    extra: tuple[tuple[str, str], ...], headers: Mapping[str, str] | None
) -> list[str]:
    """The default header lines whose names the caller did not set."""
    if not headers:
        return [line for _, line in extra]
    given = {name.lower() for name in headers}
    return [line for lower, line in extra if lower not in given]
