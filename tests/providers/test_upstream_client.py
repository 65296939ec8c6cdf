"""UpstreamClient over loopback: the mock provider, small scripted servers where the
exact bytes, timing or connection handling matter, and the parser fed directly."""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import ipaddress
import socket
import ssl
import struct
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson
import pytest
import uvloop
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from providers.mock_upstream import RunningMock, start_in_thread
from providers.upstream_client import (
    Headers,
    UpstreamClient,
    UpstreamConnectError,
    UpstreamPoolTimeout,
    UpstreamReadError,
    UpstreamReadTimeout,
    UpstreamResponse,
)
from providers.upstream_connection import HIGH_WATER_BYTES, Connection, Origin

MESSAGES = [{"role": "user", "content": "hi"}]
OK = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"

# --- a scripted HTTP/1.x server -------------------------------------------------------


@dataclass
class Request:
    method: str
    target: str
    headers: dict[str, str]  # names lower-cased
    body: bytes
    connection: int  # 1-based number of the connection it came on


class Peer:
    """One accepted connection, driven by a handler coroutine."""

    def __init__(
        self,
        server: ScriptedServer,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
    ) -> None:
        self.server = server
        self.reader = reader
        self.writer = writer
        self.number = server.connections

    async def request(self) -> Request | None:
        """The next request, or None once the client has closed the connection."""
        try:
            head = await self.reader.readuntil(b"\r\n\r\n")
        except (asyncio.IncompleteReadError, ConnectionError):
            self.server.eofs += 1
            return None
        lines = head.decode("latin-1").split("\r\n")
        method, target, _ = lines[0].split(" ")
        headers = {}
        for line in lines[1:]:
            if line:
                name, _, value = line.partition(":")
                headers[name.strip().lower()] = value.strip()
        body = await self.reader.readexactly(int(headers.get("content-length", "0")))
        request = Request(method, target, headers, body, self.number)
        self.server.requests.append(request)
        return request

    def send(self, data: bytes) -> None:
        self.writer.write(data)

    def reset(self) -> None:
        sock = self.writer.get_extra_info("socket")
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        self.writer.transport.abort()


Handler = Callable[[Peer], Awaitable[None]]


class ScriptedServer:
    """An asyncio server on 127.0.0.1 that counts connections, requests and EOFs."""

    def __init__(self, handler: Handler, *, tls: ssl.SSLContext | None = None) -> None:
        self.handler = handler
        self.tls = tls
        self.connections = 0
        self.eofs = 0
        self.requests: list[Request] = []
        self.url = ""
        self._tasks: set[asyncio.Task[Any]] = set()
        self._errors: list[BaseException] = []
        self._server: asyncio.Server | None = None

    async def __aenter__(self) -> ScriptedServer:
        self._server = await asyncio.start_server(
            self._serve, "127.0.0.1", 0, ssl=self.tls
        )
        port = self._server.sockets[0].getsockname()[1]
        self.url = f"{'https' if self.tls else 'http'}://127.0.0.1:{port}"
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        assert self._server is not None
        self._server.close()
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        await self._server.wait_closed()
        assert not self._errors, self._errors

    async def _serve(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._tasks.add(task)
        self.connections += 1
        try:
            await self.handler(Peer(self, reader, writer))
        except (ConnectionError, asyncio.IncompleteReadError, ssl.SSLError):
            pass
        except Exception as exc:
            self._errors.append(exc)
        finally:
            writer.close()


async def keep_alive(peer: Peer) -> None:
    """Answer every request with ``OK`` on a kept-alive connection."""
    while await peer.request() is not None:
        peer.send(OK)


async def stream_forever(peer: Peer) -> None:
    """A chunked body that never ends: one chunk every 10 ms until the client leaves."""
    if await peer.request() is None:
        return
    peer.send(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n")
    while not peer.reader.at_eof():
        peer.send(b"5\r\ntoken\r\n")
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(peer.reader.read(1), 0.01)
    peer.server.eofs += 1


# --- fixtures and helpers -------------------------------------------------------------


@pytest.fixture
async def client() -> AsyncIterator[UpstreamClient]:
    upstream = UpstreamClient(connect_timeout_s=1.0, read_timeout_s=2.0)
    yield upstream
    await upstream.aclose()


@pytest.fixture
def mock() -> Iterator[RunningMock]:
    with start_in_thread() as running:
        yield running


def chat(model: str = "m1", *, stream: bool = False) -> bytes:
    return orjson.dumps({"model": model, "messages": MESSAGES, "stream": stream})


async def get(client: UpstreamClient, url: str, method: str = "GET") -> bytes:
    async with client.stream(method, url) as response:
        return await response.aread()


async def drain(response: UpstreamResponse, into: list[bytes]) -> None:
    async for part in response.aiter_raw():
        into.append(part)


def assert_pool_empty(client: UpstreamClient) -> None:
    assert client.pool.slots == 0
    assert client.pool.open_count == 0


async def wait_until(predicate: Callable[[], bool], timeout_s: float = 1.0) -> None:
    async with asyncio.timeout(timeout_s):
        while not predicate():  # noqa: ASYNC110 - pool and server counters have no event
            await asyncio.sleep(0.002)


@pytest.fixture(scope="module")
def tls_files(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """A self-signed certificate for 127.0.0.1 (its own CA) and its key."""
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "upstream-test")])
    now = dt.datetime.now(dt.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5))
        .not_valid_after(now + dt.timedelta(days=1))
        .add_extension(
            x509.SubjectAlternativeName(
                [x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]
            ),
            critical=False,
        )
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    folder = tmp_path_factory.mktemp("tls")
    cert_path, key_path = folder / "cert.pem", folder / "key.pem"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    return cert_path, key_path


def server_tls(files: tuple[Path, Path], alpn: str = "http/1.1") -> ssl.SSLContext:
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(*files)
    context.set_alpn_protocols([alpn])
    return context


def trusting(files: tuple[Path, Path]) -> ssl.SSLContext:
    return ssl.create_default_context(cadata=files[0].read_text())


# --- requests on the wire -------------------------------------------------------------


@pytest.mark.asyncio
async def test_sequential_requests_reuse_one_connection(
    client: UpstreamClient,
) -> None:
    async with ScriptedServer(keep_alive) as server:
        bodies = [await get(client, f"{server.url}/n/{i}") for i in range(20)]

    assert bodies == [b"ok"] * 20
    assert server.connections == 1
    assert len(server.requests) == 20


@pytest.mark.asyncio
async def test_request_line_host_and_default_headers(client: UpstreamClient) -> None:
    async with ScriptedServer(keep_alive) as server:
        port = server.url.rsplit(":", 1)[1]
        async with client.stream(
            "post",
            f"{server.url}/v1/x?a=1&b=%20",
            content=b"{}",
            headers={"Authorization": "Bearer k", "Content-Length": "999"},
        ) as response:
            await response.aread()
        await get(client, server.url)
        async with client.stream(
            "GET", server.url + "/y", headers={"accept-encoding": "gzip", "Host": "h"}
        ) as response:
            await response.aread()

    first, second, third = server.requests
    assert (first.method, first.target, first.body) == (
        "POST",
        "/v1/x?a=1&b=%20",
        b"{}",
    )
    assert first.headers == {
        "authorization": "Bearer k",
        "host": f"127.0.0.1:{port}",
        "accept-encoding": "identity",
        "content-length": "2",
    }
    assert (second.target, "content-length" in second.headers) == ("/", False)
    assert third.headers["accept-encoding"] == "gzip"
    assert third.headers["host"] == "h"


@pytest.mark.asyncio
async def test_header_with_crlf_is_refused_before_anything_is_sent(
    client: UpstreamClient,
) -> None:
    async with ScriptedServer(keep_alive) as server:
        with pytest.raises(ValueError, match="CR or LF"):
            async with client.stream("GET", server.url, headers={"x": "a\r\nb: c"}):
                pass

    assert server.connections == 0


@pytest.mark.asyncio
@pytest.mark.parametrize("url", ["ftp://127.0.0.1/x", "http:///no-host", "http://h:x/"])
async def test_unusable_url_raises_connect_error(
    client: UpstreamClient, url: str
) -> None:
    with pytest.raises(UpstreamConnectError):
        await get(client, url)


@pytest.mark.asyncio
async def test_redirect_is_returned_not_followed(client: UpstreamClient) -> None:
    async def redirect(peer: Peer) -> None:
        await peer.request()
        peer.send(
            b"HTTP/1.1 302 Found\r\nLocation: /elsewhere\r\nContent-Length: 0\r\n\r\n"
        )

    async with (
        ScriptedServer(redirect) as server,
        client.stream("GET", server.url) as response,
    ):
        assert response.status_code == 302
        assert response.headers["location"] == "/elsewhere"
        assert await response.aread() == b""

    assert len(server.requests) == 1


@pytest.mark.asyncio
async def test_headers_are_case_insensitive_and_join_repeated_names(
    client: UpstreamClient,
) -> None:
    async def headers(peer: Peer) -> None:
        await peer.request()
        peer.send(
            b"HTTP/1.1 429 Too Many\r\nX-Multi: a\r\nRetry-After: 7\r\n"
            b"x-multi: b\r\nContent-Length: 0\r\n\r\n"
        )

    async with (
        ScriptedServer(headers) as server,
        client.stream("GET", server.url) as response,
    ):
        pass

    assert response.status_code == 429
    assert response.headers.get("retry-after") == "7"
    assert response.headers["RETRY-AFTER"] == "7"
    assert response.headers["x-multi"] == "a, b"
    assert response.headers.get_list("X-MULTI") == ["a", "b"]
    assert "X-Multi" in response.headers
    assert response.headers.get("missing", "-") == "-"
    assert list(response.headers) == ["x-multi", "retry-after", "content-length"]
    assert Headers({"Retry-After": "1"}).get("retry-after") == "1"


# --- body framing ---------------------------------------------------------------------


CHUNKED = (
    b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nX-A: 1\r\n\r\n"
    b"5\r\nhello\r\n1;ext=1\r\n \r\nA\r\n0123456789\r\n0\r\nTrailer: t\r\n\r\n"
)


@pytest.mark.asyncio
async def test_chunked_body_split_into_tiny_writes_is_decoded(
    client: UpstreamClient,
) -> None:
    async def trickle(peer: Peer) -> None:
        while await peer.request() is not None:
            for start in range(0, len(CHUNKED), 3):
                peer.send(CHUNKED[start : start + 3])
                await asyncio.sleep(0)

    async with ScriptedServer(trickle) as server:
        async with client.stream("GET", server.url) as response:
            parts = [part async for part in response.aiter_raw()]
        again = await get(client, server.url)

    assert b"".join(parts) == b"hello 0123456789" == again
    assert "trailer" not in response.headers
    assert server.connections == 1


GET = b"GET / HTTP/1.1\r\n\r\n"


class FakeTransport:
    def __init__(self) -> None:
        self.closing = False
        self.paused = False

    def write(self, data: bytes) -> None:
        pass

    def is_closing(self) -> bool:
        return self.closing

    def abort(self) -> None:
        self.closing = True

    def pause_reading(self) -> None:
        self.paused = True

    def resume_reading(self) -> None:
        self.paused = False


def fed_connection(loop: asyncio.AbstractEventLoop) -> Connection:
    conn = Connection(loop, Origin("http", "h", 80), 5.0, lambda _: None)
    conn.connection_made(FakeTransport())  # type: ignore[arg-type]
    return conn


@pytest.mark.asyncio
async def test_chunked_body_decodes_at_every_split_point() -> None:
    loop = asyncio.get_running_loop()
    for split in range(1, len(CHUNKED)):
        conn = fed_connection(loop)
        for _ in range(2):  # the second exchange proves the parser state is clean
            conn.send_request(GET, b"", is_head=False, wants_close=False)
            conn.data_received(CHUNKED[:split])
            conn.data_received(CHUNKED[split:])
            assert (conn.status, conn.complete, conn.is_reusable()) == (200, True, True)
            assert conn.next_body() == b"hello 0123456789"
            assert conn.take_headers() == [
                (b"Transfer-Encoding", b"chunked"),
                (b"X-A", b"1"),
            ]


@pytest.mark.asyncio
async def test_content_length_body_then_connection_is_reused(
    client: UpstreamClient,
) -> None:
    async def two_writes(peer: Peer) -> None:
        while await peer.request() is not None:
            peer.send(b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\n01234")
            await asyncio.sleep(0.01)
            peer.send(b"56789")

    async with ScriptedServer(two_writes) as server:
        assert await get(client, server.url) == b"0123456789"
        assert await get(client, server.url) == b"0123456789"

    assert server.connections == 1


@pytest.mark.asyncio
async def test_body_until_close_is_read_and_connection_not_reused(
    client: UpstreamClient,
) -> None:
    async def until_close(peer: Peer) -> None:
        await peer.request()
        peer.send(b"HTTP/1.1 200 OK\r\n\r\nabc")
        await asyncio.sleep(0.01)
        peer.send(b"def")

    async with ScriptedServer(until_close) as server:
        assert await get(client, server.url) == b"abcdef"
        assert await get(client, server.url) == b"abcdef"

    assert server.connections == 2
    assert client.pool.idle_count == 0


@pytest.mark.asyncio
@pytest.mark.parametrize(
    ("head", "connections"),
    [
        (b"HTTP/1.0 200 OK\r\nContent-Length: 2\r\n\r\n", 2),
        (b"HTTP/1.0 200 OK\r\nConnection: keep-alive\r\nContent-Length: 2\r\n\r\n", 1),
        (b"HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 2\r\n\r\n", 2),
    ],
)
async def test_keep_alive_follows_version_and_connection_header(
    client: UpstreamClient, head: bytes, connections: int
) -> None:
    async def answer(peer: Peer) -> None:  # never closes first: the client decides
        while await peer.request() is not None:
            peer.send(head + b"ok")

    async with ScriptedServer(answer) as server:
        assert await get(client, server.url) == b"ok"
        assert await get(client, server.url) == b"ok"

    assert server.connections == connections


@pytest.mark.asyncio
async def test_caller_connection_close_is_honoured(client: UpstreamClient) -> None:
    async with ScriptedServer(keep_alive) as server:
        for _ in range(2):
            async with client.stream(
                "GET", server.url, headers={"Connection": "close"}
            ) as response:
                assert await response.aread() == b"ok"

    assert server.connections == 2
    assert server.requests[0].headers["connection"] == "close"


@pytest.mark.asyncio
async def test_head_1xx_204_and_304_have_no_body_and_keep_the_connection(
    client: UpstreamClient,
) -> None:
    replies = {
        "/head": b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\n",
        "/204": b"HTTP/1.1 204 No Content\r\n\r\n",
        "/304": b"HTTP/1.1 304 Not Modified\r\nContent-Length: 5\r\n\r\n",
        "/103": b"HTTP/1.1 103 Early Hints\r\nLink: </a>\r\n\r\n" + OK,
        "/ok": OK,
    }

    async def answer(peer: Peer) -> None:
        while (request := await peer.request()) is not None:
            peer.send(replies[request.target])

    async with ScriptedServer(answer) as server:
        assert await get(client, f"{server.url}/head", method="HEAD") == b""
        assert await get(client, f"{server.url}/204") == b""
        assert await get(client, f"{server.url}/304") == b""
        async with client.stream("GET", f"{server.url}/103") as response:
            assert (response.status_code, await response.aread()) == (200, b"ok")
            assert "link" not in response.headers
        assert await get(client, f"{server.url}/ok") == b"ok"

    assert server.connections == 1


# --- keep-alive, stale connections, pool limits ---------------------------------------


@pytest.mark.asyncio
@pytest.mark.parametrize("how", ["close", "reset"])
async def test_reused_connection_closed_as_the_request_arrives_is_not_resent(
    client: UpstreamClient, how: str
) -> None:
    # spec 02 §5: a target is called at most once per request, so a request the
    # server received is never sent again, even unanswered
    async def dies_on_second_request(peer: Peer) -> None:
        served = 0
        while await peer.request() is not None:
            if peer.number == 1 and served == 1:
                if how == "reset":
                    peer.reset()
                return  # closed as the request arrived: nothing was answered
            peer.send(OK)
            served += 1

    async with ScriptedServer(dies_on_second_request) as server:
        assert await get(client, server.url) == b"ok"
        with pytest.raises(UpstreamReadError):
            await get(client, server.url)
        assert await get(client, server.url) == b"ok"  # on a new connection

    assert server.connections == 2
    assert [r.connection for r in server.requests] == [1, 1, 2]


@pytest.mark.asyncio
async def test_new_connection_closed_before_reply_is_not_retried(
    client: UpstreamClient,
) -> None:
    async def hang_up(peer: Peer) -> None:
        await peer.request()

    async with ScriptedServer(hang_up) as server:
        with pytest.raises(UpstreamReadError, match="closed before the complete"):
            await get(client, server.url)

    assert (server.connections, len(server.requests)) == (1, 1)
    assert_pool_empty(client)


@pytest.mark.asyncio
async def test_reused_connection_closed_after_first_reply_byte_is_not_retried(
    client: UpstreamClient,
) -> None:
    async def partial(peer: Peer) -> None:
        await peer.request()
        peer.send(OK)
        await peer.request()
        peer.send(b"HTTP/1.1 200")

    async with ScriptedServer(partial) as server:
        assert await get(client, server.url) == b"ok"
        with pytest.raises(UpstreamReadError):
            await get(client, server.url)

    assert (server.connections, len(server.requests)) == (1, 2)


@pytest.mark.asyncio
async def test_idle_connection_closed_by_server_leaves_pool_without_a_retry(
    client: UpstreamClient,
) -> None:
    async def one_per_connection(peer: Peer) -> None:  # says keep-alive, then closes
        if await peer.request() is not None:
            peer.send(OK)

    async with ScriptedServer(one_per_connection) as server:
        assert await get(client, server.url) == b"ok"
        await wait_until(lambda: client.pool.open_count == 0)
        assert await get(client, server.url) == b"ok"

    assert (server.connections, len(server.requests)) == (2, 2)


@pytest.mark.asyncio
async def test_idle_connection_older_than_expiry_is_closed_not_reused() -> None:
    client = UpstreamClient(keepalive_expiry_s=0.03)
    async with ScriptedServer(keep_alive) as server:
        await get(client, server.url)
        await asyncio.sleep(0.05)
        await get(client, server.url)
        await wait_until(lambda: server.eofs == 1)
        await client.aclose()

    assert server.connections == 2


@pytest.mark.asyncio
async def test_pool_limit_waits_then_times_out_and_slot_is_reused() -> None:
    client = UpstreamClient(max_connections=1, connect_timeout_s=0.05)
    async with ScriptedServer(stream_forever) as server:
        async with client.stream("GET", server.url) as held:
            await anext(held.aiter_raw())
            with pytest.raises(UpstreamPoolTimeout):
                await get(client, server.url)
        async with client.stream("GET", server.url) as second:
            assert await anext(second.aiter_raw())
        await client.aclose()

    assert server.connections == 2
    assert client.pool.slots == 0


@pytest.mark.asyncio
async def test_concurrent_requests_beyond_limit_share_the_connections() -> None:
    client = UpstreamClient(max_connections=2, max_keepalive=1)

    async def slow(peer: Peer) -> None:
        while await peer.request() is not None:
            await asyncio.sleep(0.005)
            peer.send(OK)

    async with ScriptedServer(slow) as server:
        bodies = await asyncio.gather(*(get(client, server.url) for _ in range(12)))
        assert client.pool.idle_count == 1  # max_keepalive
        await client.aclose()

    assert bodies == [b"ok"] * 12
    assert server.connections <= 3  # 2 at a time; 1 may be re-opened after eviction
    assert client.pool.slots == 0


@pytest.mark.asyncio
async def test_cancelled_pool_waiter_gives_nothing_away() -> None:
    client = UpstreamClient(max_connections=1, connect_timeout_s=5.0)
    async with ScriptedServer(stream_forever) as server:
        async with client.stream("GET", server.url) as held:
            await anext(held.aiter_raw())
            waiter = asyncio.create_task(get(client, server.url))
            await asyncio.sleep(0.01)
            waiter.cancel()
            with pytest.raises(asyncio.CancelledError):
                await waiter
            assert client.pool.slots == 1
        async with client.stream("GET", server.url) as again:
            assert await anext(again.aiter_raw())
        await client.aclose()

    assert client.pool.slots == 0


# --- failures -------------------------------------------------------------------------


@pytest.mark.asyncio
async def test_refused_connection_raises_connect_error(client: UpstreamClient) -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]

    with pytest.raises(UpstreamConnectError, match="failed"):
        await get(client, f"http://127.0.0.1:{port}/")
    assert_pool_empty(client)


async def silent(peer: Peer) -> None:
    await peer.reader.read()  # accepts TCP, never answers (not even a TLS hello)


@pytest.mark.asyncio
async def test_tls_handshake_that_never_ends_is_a_connect_timeout() -> None:
    client = UpstreamClient(connect_timeout_s=0.05)
    async with ScriptedServer(silent) as server:
        url = server.url.replace("http://", "https://")
        with pytest.raises(UpstreamConnectError, match="timed out"):
            await get(client, url)
        task = asyncio.create_task(get(client, url))
        await asyncio.sleep(0.02)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
    assert_pool_empty(client)


@pytest.mark.asyncio
async def test_malformed_response_raises_read_error(client: UpstreamClient) -> None:
    async def garbage(peer: Peer) -> None:
        await peer.request()
        peer.send(b"SPDY/9 what\r\n\r\n")
        await peer.reader.read()

    async with ScriptedServer(garbage) as server:
        with pytest.raises(UpstreamReadError, match="malformed"):
            await get(client, server.url)
    assert_pool_empty(client)


@pytest.mark.asyncio
async def test_body_shorter_than_content_length_raises_read_error(
    client: UpstreamClient,
) -> None:
    async def short(peer: Peer) -> None:
        await peer.request()
        peer.send(b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabc")

    async with (
        ScriptedServer(short) as server,
        client.stream("GET", server.url) as response,
    ):
        with pytest.raises(UpstreamReadError, match="closed before the complete"):
            await response.aread()
    assert_pool_empty(client)


@pytest.mark.asyncio
async def test_mock_reset_before_headers_raises_read_error(
    client: UpstreamClient, mock: RunningMock
) -> None:
    mock.add("m1", reset="before_headers")

    with pytest.raises(UpstreamReadError):
        async with client.stream(
            "POST", mock.url + "/chat/completions", content=chat()
        ):
            pass

    assert [r["outcome"] for r in mock.requests()] == ["reset"]
    assert_pool_empty(client)


@pytest.mark.asyncio
async def test_mock_reset_mid_body_raises_read_error_after_the_first_bytes(
    client: UpstreamClient, mock: RunningMock
) -> None:
    mock.add("m1", drop_after_tokens=2, token_delay_ms=5)
    received: list[bytes] = []

    async with client.stream(
        "POST", mock.url + "/chat/completions", content=chat(stream=True)
    ) as response:
        with pytest.raises(UpstreamReadError):
            await drain(response, received)

    assert response.status_code == 200
    assert b"data: " in b"".join(received)
    assert_pool_empty(client)


@pytest.mark.asyncio
async def test_no_headers_within_read_timeout_raises_read_timeout(
    mock: RunningMock,
) -> None:
    client = UpstreamClient(read_timeout_s=0.05)
    mock.add("m1", hang=True)

    with pytest.raises(UpstreamReadTimeout):
        await get_post(client, mock.url)

    await asyncio.to_thread(mock.wait_for, "cancelled")
    assert_pool_empty(client)


async def get_post(client: UpstreamClient, base: str) -> bytes:
    async with client.stream(
        "POST", base + "/chat/completions", content=chat()
    ) as response:
        return await response.aread()


HEAD_IN_PIECES = (
    b"HTTP/1.1 200 OK\r\n",
    b"A: 1\r\n",
    b"B: 2\r\n",
    b"C: 3\r\n",
    b"Transfer-Encoding: chunked\r\n\r\n",
)


@pytest.mark.asyncio
async def test_read_timeout_is_silence_between_bytes_not_total_time() -> None:
    client = UpstreamClient(read_timeout_s=0.08)

    async def trickle_then_stall(peer: Peer) -> None:
        await peer.request()
        # 0.24 s in all, never silent for 0.08 s; the head's pieces wake no reader
        for piece in HEAD_IN_PIECES:
            peer.send(piece)
            await asyncio.sleep(0.03)
        for _ in range(3):
            await asyncio.sleep(0.03)
            peer.send(b"1\r\nx\r\n")
        await peer.reader.read()

    received: list[bytes] = []
    async with (
        ScriptedServer(trickle_then_stall) as server,
        client.stream("GET", server.url) as response,
    ):
        with pytest.raises(UpstreamReadTimeout):
            await drain(response, received)

    assert b"".join(received) == b"xxx"
    assert_pool_empty(client)


@pytest.mark.asyncio
async def test_slow_consumer_is_not_a_read_timeout() -> None:
    client = UpstreamClient(read_timeout_s=0.03)
    async with ScriptedServer(keep_alive) as server:
        async with client.stream("GET", server.url) as response:
            await asyncio.sleep(0.08)  # the reader, not the upstream, is slow
            assert await response.aread() == b"ok"
        await client.aclose()


# --- early close, cancellation, aclose ------------------------------------------------


@pytest.mark.asyncio
async def test_early_close_aborts_connection_and_mock_sees_cancel(
    client: UpstreamClient, mock: RunningMock
) -> None:
    mock.add("m1", tokens=40, token_delay_ms=20)

    async with client.stream(
        "POST", mock.url + "/chat/completions", content=chat(stream=True)
    ) as response:
        first = await anext(response.aiter_raw())

    assert first.startswith(b"data: ")
    assert_pool_empty(client)
    cancelled = await asyncio.to_thread(mock.wait_for, "cancelled")
    assert len(cancelled) == 1


@pytest.mark.asyncio
async def test_cancelled_reader_propagates_and_leaks_nothing(
    client: UpstreamClient, mock: RunningMock
) -> None:
    mock.add("m1", tokens=40, token_delay_ms=20)
    received: list[bytes] = []
    tasks_before = asyncio.all_tasks()

    async def consume() -> None:
        async with client.stream(
            "POST", mock.url + "/chat/completions", content=chat(stream=True)
        ) as response:
            async for part in response.aiter_raw():
                received.append(part)

    task = asyncio.create_task(consume())
    await wait_until(lambda: bool(received))
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task

    assert_pool_empty(client)
    assert asyncio.all_tasks() == tasks_before
    await asyncio.to_thread(mock.wait_for, "cancelled")


@pytest.mark.asyncio
async def test_asyncio_timeout_around_an_attempt_cancels_cleanly(
    client: UpstreamClient, mock: RunningMock
) -> None:
    mock.add("m1", hang=True)

    with pytest.raises(TimeoutError):
        async with asyncio.timeout(0.05):
            await get_post(client, mock.url)

    assert_pool_empty(client)
    await asyncio.to_thread(mock.wait_for, "cancelled")


@pytest.mark.asyncio
async def test_concurrent_streams_from_the_mock_all_complete(
    client: UpstreamClient, mock: RunningMock
) -> None:
    mock.add("m1", tokens=5, token_delay_ms=1)

    async def one() -> bytes:
        async with client.stream(
            "POST", mock.url + "/chat/completions", content=chat(stream=True)
        ) as response:
            assert response.headers["content-type"] == "text/event-stream"
            return b"".join([part async for part in response.aiter_raw()])

    bodies = await asyncio.gather(*(one() for _ in range(20)))

    assert all(body.endswith(b"data: [DONE]\n\n") for body in bodies)
    assert [r["outcome"] for r in mock.requests()] == ["completed"] * 20
    assert client.pool.idle_count == client.pool.open_count <= 20


@pytest.mark.asyncio
async def test_aclose_closes_idle_and_active_connections() -> None:
    client = UpstreamClient()
    async with (
        ScriptedServer(stream_forever) as streaming,
        ScriptedServer(keep_alive) as idle,
    ):
        await get(client, idle.url)
        async with client.stream("GET", streaming.url) as response:
            await anext(response.aiter_raw())
            await client.aclose()
            with pytest.raises(UpstreamReadError):
                await response.aread()
        await wait_until(lambda: idle.eofs == 1 and streaming.eofs == 1)

    assert client.is_closed
    assert_pool_empty(client)
    with pytest.raises(RuntimeError, match="closed"):
        await get(client, idle.url)


@pytest.mark.asyncio
async def test_unread_body_over_high_water_pauses_reading(
    client: UpstreamClient,
) -> None:
    size = 4 * 1024 * 1024

    async def big(peer: Peer) -> None:
        await peer.request()
        peer.send(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n" % size)
        peer.send(b"x" * size)
        await peer.writer.drain()

    async with (
        ScriptedServer(big) as server,
        client.stream("GET", server.url) as response,
    ):
        conn = response._conn
        assert conn is not None
        await wait_until(lambda: conn.is_paused)
        await asyncio.sleep(0.02)
        assert conn.buffered <= HIGH_WATER_BYTES + 256 * 1024
        assert len(await response.aread()) == size


# --- TLS -----------------------------------------------------------------------------


@pytest.mark.asyncio
async def test_https_with_a_trusted_self_signed_certificate(
    tls_files: tuple[Path, Path],
) -> None:
    client = UpstreamClient(ssl_context=trusting(tls_files))
    async with ScriptedServer(keep_alive, tls=server_tls(tls_files)) as server:
        assert await get(client, server.url) == b"ok"
        assert await get(client, server.url) == b"ok"
        await client.aclose()

    assert server.connections == 1
    assert server.requests[0].headers["host"] == server.url.removeprefix("https://")


@pytest.mark.asyncio
async def test_https_with_an_untrusted_certificate_is_a_connect_error(
    tls_files: tuple[Path, Path],
) -> None:
    client = UpstreamClient()  # the system CA store does not know this certificate
    async with ScriptedServer(keep_alive, tls=server_tls(tls_files)) as server:
        with pytest.raises(UpstreamConnectError, match="TLS handshake"):
            await get(client, server.url)
    assert_pool_empty(client)


@pytest.mark.asyncio
async def test_https_server_choosing_h2_is_a_connect_error(
    tls_files: tuple[Path, Path],
) -> None:
    context = trusting(tls_files)
    context.set_alpn_protocols(["h2", "http/1.1"])
    client = UpstreamClient(ssl_context=context)
    async with ScriptedServer(keep_alive, tls=server_tls(tls_files, "h2")) as server:
        with pytest.raises(UpstreamConnectError, match="negotiated 'h2'"):
            await get(client, server.url)
    assert_pool_empty(client)


# --- the same core paths on uvloop ----------------------------------------------------


async def uvloop_scenarios(tls: tuple[ssl.SSLContext, ssl.SSLContext]) -> None:
    client = UpstreamClient(ssl_context=tls[1])
    async with (
        ScriptedServer(keep_alive) as plain,
        ScriptedServer(keep_alive, tls=tls[0]) as secure,
        ScriptedServer(stream_forever) as streaming,
    ):
        for url in (plain.url, plain.url, secure.url, secure.url):
            assert await get(client, url) == b"ok"
        async with client.stream("GET", streaming.url) as response:
            await anext(response.aiter_raw())
        await wait_until(lambda: streaming.eofs == 1)
        task = asyncio.create_task(get(client, streaming.url))
        await wait_until(lambda: streaming.connections == 2)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        await wait_until(lambda: streaming.eofs == 2)
        assert client.pool.open_count == 2  # plain + secure, idle
        await client.aclose()
        await wait_until(lambda: plain.eofs == 1 and secure.eofs == 1)
    assert (plain.connections, secure.connections) == (1, 1)
    assert_pool_empty(client)


def test_core_paths_on_uvloop(tls_files: tuple[Path, Path]) -> None:
    with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
        runner.run(uvloop_scenarios((server_tls(tls_files), trusting(tls_files))))
