"""Opening one upstream connection for ``providers.upstream_pool`` (spec 10 §4).

``dial(loop, origin, factory, context)`` returns ``(transport, protocol)``:
1. The TCP socket: to the origin, or to its proxy (``origin.proxy``).  A host name is
   resolved (``loop.getaddrinfo``; an IP literal is not) and, when it has several
   addresses, they are raced as RFC 8305 says ("happy eyeballs"): families
   interleaved, the next attempt started when the previous one fails or has not
   connected within ``happy_eyeballs_delay_s`` (250 ms), the first to connect wins and
   every other is closed.  This is done here rather than by
   ``loop.create_connection(happy_eyeballs_delay=...)`` because uvloop, the
   production loop, has no such parameter.
2. An ``https`` origin behind a proxy: ``CONNECT host:port`` (with the proxy's
   ``Proxy-Authorization``) on that socket; anything but a 2xx reply is an
   ``UpstreamConnectError`` naming the proxy's status (never its credentials).
3. ``loop.create_connection(factory, sock=..., ssl=context, server_hostname=...)``:
   TLS with the origin, through the tunnel when there is one.  An ``http`` origin
   behind a proxy is a plain connection to the proxy (the client then writes
   absolute-form request targets).

The caller bounds the whole by its connect timeout.  Errors are raised as they come
(``OSError``, ``socket.gaierror``, ``ssl.SSLError``, ``UpstreamConnectError``) for the
pool to word.  Racing is the only place a request starts tasks, one per address
tried; a cancelled attempt closes its own socket, and one that connects after the
race is decided is closed by a done callback.
"""

from __future__ import annotations

import asyncio
import ipaddress
import socket
import ssl
from collections.abc import Callable
from typing import Final

from providers.upstream_connection import Connection, Origin, UpstreamConnectError

HAPPY_EYEBALLS_DELAY_S: Final = 0.25
MAX_CONNECT_REPLY_BYTES: Final = 16 * 1024
_Address = tuple[str, int] | tuple[str, int, int, int] | tuple[int, bytes]
_AddrInfo = tuple[socket.AddressFamily, socket.SocketKind, int, str, _Address]
_TCP: Final = (socket.SOCK_STREAM, socket.IPPROTO_TCP, "")


async def dial(
    loop: asyncio.AbstractEventLoop,
    origin: Origin,
    factory: Callable[[], Connection],
    context: ssl.SSLContext | None,
    *,
    happy_eyeballs_delay_s: float = HAPPY_EYEBALLS_DELAY_S,
) -> tuple[asyncio.Transport, Connection]:
    """A connection to ``origin`` as its route says (see the module docstring)."""
    proxy = origin.proxy
    if proxy is None:
        sock = await open_tcp(loop, origin.host, origin.port, happy_eyeballs_delay_s)
    else:
        sock = await open_tcp(loop, proxy.host, proxy.port, happy_eyeballs_delay_s)
        if origin.is_tls:
            try:
                await _tunnel(loop, sock, origin)
            except BaseException:
                sock.close()
                raise
    # From here the loop owns the socket, and closes it on failure.
    transport, conn = await loop.create_connection(
        factory,
        sock=sock,
        ssl=context,
        server_hostname=origin.host if context is not None else None,
    )
    return transport, conn


async def open_tcp(
    loop: asyncio.AbstractEventLoop,
    host: str,
    port: int,
    delay_s: float = HAPPY_EYEBALLS_DELAY_S,
) -> socket.socket:
    """A connected, non-blocking TCP socket to ``host:port`` (addresses raced)."""
    infos = await _resolve(loop, host, port)
    if len(infos) == 1:
        return await _connect_one(loop, infos[0])
    return await _race(loop, _interleave(infos), delay_s)


async def _resolve(
    loop: asyncio.AbstractEventLoop, host: str, port: int
) -> list[_AddrInfo]:
    try:
        ip = ipaddress.ip_address(host)
    except ValueError:
        pass
    else:
        if isinstance(ip, ipaddress.IPv4Address):
            return [(socket.AF_INET, *_TCP, (host, port))]
        return [(socket.AF_INET6, *_TCP, (host, port, 0, 0))]
    infos: list[_AddrInfo] = list(
        await loop.getaddrinfo(
            host, port, type=socket.SOCK_STREAM, proto=socket.IPPROTO_TCP
        )
    )
    if not infos:
        raise OSError(f"getaddrinfo({host!r}) returned no address")
    return infos


def _interleave(infos: list[_AddrInfo]) -> list[_AddrInfo]:
    """Alternate address families, starting with the resolver's first (RFC 8305 §4)."""
    by_family: dict[int, list[_AddrInfo]] = {}
    for info in infos:
        by_family.setdefault(info[0], []).append(info)
    queues = list(by_family.values())
    ordered: list[_AddrInfo] = []
    while queues:
        for queue in queues:
            ordered.append(queue.pop(0))
        queues = [queue for queue in queues if queue]
    return ordered


async def _connect_one(
    loop: asyncio.AbstractEventLoop, info: _AddrInfo
) -> socket.socket:
    family, kind, proto, _, address = info
    sock = socket.socket(family, kind, proto)
    try:
        sock.setblocking(False)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        await loop.sock_connect(sock, address)
    except BaseException:
        sock.close()
        raise
    return sock


async def _race(
    loop: asyncio.AbstractEventLoop, infos: list[_AddrInfo], delay_s: float
) -> socket.socket:
    waiting = list(infos)
    running: set[asyncio.Task[socket.socket]] = set()
    errors: list[OSError] = []
    try:
        while waiting or running:
            if waiting:
                running.add(loop.create_task(_connect_one(loop, waiting.pop(0))))
            done, _ = await asyncio.wait(
                running,
                timeout=delay_s if waiting else None,
                return_when=asyncio.FIRST_COMPLETED,
            )
            winner: socket.socket | None = None
            for task in done:
                running.discard(task)
                error = task.exception()
                if error is None:
                    if winner is None:
                        winner = task.result()
                    else:
                        task.result().close()
                elif isinstance(error, OSError):
                    errors.append(error)
                else:
                    raise error
            if winner is not None:
                return winner
            # nothing connected: a failure starts the next attempt at once, an
            # elapsed delay starts it alongside the ones still trying
    finally:
        for task in running:
            task.cancel()
            task.add_done_callback(_close_late_winner)
    if len({str(error) for error in errors}) == 1:
        raise errors[0]
    raise OSError(f"all addresses failed: {'; '.join(str(e) for e in errors)}")


def _close_late_winner(task: asyncio.Task[socket.socket]) -> None:
    if not task.cancelled() and task.exception() is None:
        task.result().close()


async def _tunnel(
    loop: asyncio.AbstractEventLoop, sock: socket.socket, origin: Origin
) -> None:
    proxy = origin.proxy
    assert proxy is not None
    host = f"[{origin.host}]" if ":" in origin.host else origin.host
    authority = f"{host}:{origin.port}"
    lines = [f"CONNECT {authority} HTTP/1.1", f"Host: {authority}"]
    if proxy.authorization:
        lines.append(f"Proxy-Authorization: {proxy.authorization}")
    await loop.sock_sendall(sock, ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1"))
    reply = b""
    while b"\r\n\r\n" not in reply:
        chunk = await loop.sock_recv(sock, 4096)
        if not chunk:
            raise UpstreamConnectError(
                f"proxy {proxy.address} closed the connection during CONNECT to "
                f"{authority}"
            )
        reply += chunk
        if len(reply) > MAX_CONNECT_REPLY_BYTES:
            raise UpstreamConnectError(
                f"proxy {proxy.address}: CONNECT reply head too large"
            )
    head, _, rest = reply.partition(b"\r\n\r\n")
    status_line = head.split(b"\r\n", 1)[0].decode("latin-1", "replace")
    fields = status_line.split(" ", 2)
    status = int(fields[1]) if len(fields) > 1 and fields[1].isdigit() else 0
    if not (fields[0].startswith("HTTP/1.") and 200 <= status < 300):  # noqa: PLR2004
        raise UpstreamConnectError(
            f"proxy {proxy.address} refused CONNECT to {authority}: {status_line[:200]}"
        )
    if rest:
        raise UpstreamConnectError(
            f"proxy {proxy.address} sent data before the tunnel to {authority} was used"
        )
