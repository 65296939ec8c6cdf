"""Loopback servers for the outbound policy tests (spec 10 §4), each on an event loop
of its own in a background thread, so async tests, sync helpers and a gateway
subprocess can all call them:

* ``PrivateCA``: a CA made with ``cryptography`` that issues server certificates for
  127.0.0.1 / localhost and client certificates, written as PEM files.
* ``EchoUpstream``: HTTP/1.1 (plain or TLS, optionally requiring a client certificate
  signed by a given CA) that answers every request with JSON describing it (method,
  target, headers, the client certificate's common name), or an OpenAI chat
  completion on ``.../chat/completions``; keep-alive unless asked to close.
* ``ConnectProxy``: an HTTP proxy that logs what it carries (``CONNECT host:port``
  tunnels, absolute-form requests, the ``Proxy-Authorization`` it got) and requires
  given credentials when told to (407 otherwise).
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import ipaddress
import json
import ssl
import threading
import time
from collections.abc import Coroutine, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import urlsplit

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

_T = TypeVar("_T")


# --- a private CA ---------------------------------------------------------------------


def _pem_key(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )


class PrivateCA:
    """A CA certificate and key; ``issue()`` signs leaf certificates with it."""

    def __init__(self, folder: Path, name: str = "OmniRoute Test CA") -> None:
        self.folder = folder
        folder.mkdir(parents=True, exist_ok=True)
        self._key = ec.generate_private_key(ec.SECP256R1())
        self._name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
        now = dt.datetime.now(dt.UTC)
        self._cert = (
            x509.CertificateBuilder()
            .subject_name(self._name)
            .issuer_name(self._name)
            .public_key(self._key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - dt.timedelta(minutes=5))
            .not_valid_after(now + dt.timedelta(days=1))
            .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
            .add_extension(
                x509.KeyUsage(
                    digital_signature=True,
                    content_commitment=False,
                    key_encipherment=False,
                    data_encipherment=False,
                    key_agreement=False,
                    key_cert_sign=True,
                    crl_sign=True,
                    encipher_only=False,
                    decipher_only=False,
                ),
                critical=True,
            )
            .add_extension(
                x509.SubjectKeyIdentifier.from_public_key(self._key.public_key()),
                critical=False,
            )
            .sign(self._key, hashes.SHA256())
        )
        self.cert_pem = self._cert.public_bytes(serialization.Encoding.PEM)
        slug = name.lower().replace(" ", "-")
        self.path = folder / f"{slug}.pem"
        self.path.write_bytes(self.cert_pem)

    def issue(self, common_name: str, *, client: bool = False) -> tuple[Path, Path]:
        """A leaf certificate (server: for 127.0.0.1 and localhost) and its key."""
        key = ec.generate_private_key(ec.SECP256R1())
        now = dt.datetime.now(dt.UTC)
        usage = (
            ExtendedKeyUsageOID.CLIENT_AUTH
            if client
            else ExtendedKeyUsageOID.SERVER_AUTH
        )
        builder = (
            x509.CertificateBuilder()
            .subject_name(
                x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])
            )
            .issuer_name(self._name)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - dt.timedelta(minutes=5))
            .not_valid_after(now + dt.timedelta(days=1))
            .add_extension(
                x509.BasicConstraints(ca=False, path_length=None), critical=True
            )
            .add_extension(x509.ExtendedKeyUsage([usage]), critical=False)
            .add_extension(
                x509.AuthorityKeyIdentifier.from_issuer_public_key(
                    self._key.public_key()
                ),
                critical=False,
            )
        )
        if not client:
            builder = builder.add_extension(
                x509.SubjectAlternativeName(
                    [
                        x509.IPAddress(ipaddress.ip_address("127.0.0.1")),
                        x509.DNSName("localhost"),
                    ]
                ),
                critical=False,
            )
        cert = builder.sign(self._key, hashes.SHA256())
        cert_path = self.folder / f"{common_name}.crt"
        key_path = self.folder / f"{common_name}.key"
        cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
        key_path.write_bytes(_pem_key(key))
        return cert_path, key_path

    def server_context(
        self, common_name: str = "upstream", *, client_ca: PrivateCA | None = None
    ) -> ssl.SSLContext:
        """A server context with a certificate from this CA; ``client_ca``: require a
        client certificate signed by that CA."""
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(*self.issue(common_name))
        context.set_alpn_protocols(["http/1.1"])
        if client_ca is not None:
            context.verify_mode = ssl.CERT_REQUIRED
            context.load_verify_locations(cafile=str(client_ca.path))
        return context


# --- a loop in a thread ---------------------------------------------------------------


class LoopThread:
    """An event loop running in a daemon thread; ``run(coro)`` waits for a result."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, daemon=True)

    def __enter__(self) -> LoopThread:
        self._thread.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(5)
        self.loop.close()

    def run(self, coro: Coroutine[Any, Any, _T]) -> _T:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(10)


async def _read_request(
    reader: asyncio.StreamReader,
) -> tuple[str, str, list[tuple[str, str]], bytes] | None:
    """method, target, header pairs, body; None at EOF."""
    try:
        head = await reader.readuntil(b"\r\n\r\n")
    except (asyncio.IncompleteReadError, ConnectionError, ssl.SSLError):
        return None
    lines = head.decode("latin-1").split("\r\n")
    method, target, _ = lines[0].split(" ", 2)
    headers = []
    for line in lines[1:]:
        if line:
            name, _, value = line.partition(":")
            headers.append((name.strip(), value.strip()))
    length = next((int(v) for k, v in headers if k.lower() == "content-length"), 0)
    body = await reader.readexactly(length) if length else b""
    return method, target, headers, body


class _Servers:
    """The servers' common part: start on the thread's loop, stop, track tasks."""

    def __init__(self, thread: LoopThread) -> None:
        self.thread = thread
        self.port = 0
        self._server: asyncio.Server | None = None
        self._tasks: set[asyncio.Task[Any]] = set()

    def _start(self, ssl_context: ssl.SSLContext | None = None) -> None:
        async def start() -> None:
            self._server = await asyncio.start_server(
                self._serve, "127.0.0.1", 0, ssl=ssl_context
            )
            self.port = self._server.sockets[0].getsockname()[1]

        self.thread.run(start())

    def close(self) -> None:
        async def stop() -> None:
            assert self._server is not None
            self._server.close()
            for task in list(self._tasks):
                task.cancel()
            await asyncio.gather(*self._tasks, return_exceptions=True)

        self.thread.run(stop())

    async def _serve(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._tasks.add(task)
        try:
            await self.handle(reader, writer)
        except (ConnectionError, asyncio.IncompleteReadError, ssl.SSLError, OSError):
            pass
        finally:
            self._tasks.discard(task)
            writer.close()

    async def handle(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        raise NotImplementedError


@dataclass
class Seen:
    method: str
    target: str
    headers: dict[str, str]  # lower-cased names
    client_cn: str | None = None


class EchoUpstream(_Servers):
    """See the module docstring; ``seen`` lists every request, in order."""

    def __init__(self, thread: LoopThread, tls: ssl.SSLContext | None = None) -> None:
        super().__init__(thread)
        self.tls = tls
        self.seen: list[Seen] = []
        self._start(tls)
        self.url = f"{'https' if tls else 'http'}://127.0.0.1:{self.port}"

    async def handle(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        client_cn = None
        peer = writer.get_extra_info("peercert")
        if peer:
            for rdn in peer.get("subject", ()):
                for key, value in rdn:
                    if key == "commonName":
                        client_cn = value
        while (request := await _read_request(reader)) is not None:
            method, target, pairs, _ = request
            headers = {k.lower(): v for k, v in pairs}
            self.seen.append(Seen(method, target, headers, client_cn))
            if urlsplit(target).path.endswith("/chat/completions"):
                body = json.dumps(_completion()).encode()
            else:
                body = json.dumps(
                    {"method": method, "target": target, "headers": headers}
                ).encode()
            close = headers.get("connection", "").lower() == "close"
            writer.write(
                b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                + (b"Connection: close\r\n" if close else b"")
                + f"Content-Length: {len(body)}\r\n\r\n".encode()
                + body
            )
            await writer.drain()
            if close:
                return


def _completion() -> dict[str, Any]:
    return {
        "id": "chatcmpl-outbound",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": "m1",
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": "through"},
                "finish_reason": "stop",
            }
        ],
        "usage": {"prompt_tokens": 3, "completion_tokens": 1, "total_tokens": 4},
    }


@dataclass
class Carried:
    """One thing the proxy carried: ``CONNECT host:port`` or ``GET http://...``."""

    method: str
    target: str
    authorization: str | None


class ConnectProxy(_Servers):
    """See the module docstring; ``log`` lists what it carried, in order."""

    def __init__(self, thread: LoopThread, *, require: str | None = None) -> None:
        super().__init__(thread)
        self.require = require  # the Proxy-Authorization value required, if any
        self.log: list[Carried] = []
        self._start()
        self.url = f"http://127.0.0.1:{self.port}"

    def url_with(self, user: str, password: str) -> str:
        return f"http://{user}:{password}@127.0.0.1:{self.port}"

    async def handle(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        request = await _read_request(reader)
        if request is None:
            return
        method, target, pairs, body = request
        headers = {k.lower(): v for k, v in pairs}
        auth = headers.get("proxy-authorization")
        self.log.append(Carried(method, target, auth))
        if self.require is not None and auth != self.require:
            writer.write(
                b"HTTP/1.1 407 Proxy Authentication Required\r\n"
                b'Proxy-Authenticate: Basic realm="test"\r\nContent-Length: 0\r\n\r\n'
            )
            await writer.drain()
            return
        if method == "CONNECT":
            host, _, port = target.rpartition(":")
            try:
                up_reader, up_writer = await asyncio.open_connection(
                    host.strip("[]"), int(port)
                )
            except Exception:
                writer.write(b"HTTP/1.1 502 Bad Gateway\r\nContent-Length: 0\r\n\r\n")
                await writer.drain()
                return
            writer.write(b"HTTP/1.1 200 Connection Established\r\n\r\n")
            await writer.drain()
            await _pipe_both(reader, writer, up_reader, up_writer)
            return
        # absolute-form: forward this one request with Connection: close
        parts = urlsplit(target)
        assert parts.scheme == "http", target
        assert parts.hostname, target
        up_reader, up_writer = await asyncio.open_connection(
            parts.hostname, parts.port or 80
        )
        path = parts.path or "/"
        if parts.query:
            path = f"{path}?{parts.query}"
        forwarded = [f"{method} {path} HTTP/1.1"]
        for name, value in pairs:
            if name.lower() not in {"proxy-authorization", "connection"}:
                forwarded.append(f"{name}: {value}")
        forwarded.append("Connection: close")
        up_writer.write(("\r\n".join(forwarded) + "\r\n\r\n").encode("latin-1") + body)
        await up_writer.drain()
        writer.write(await up_reader.read())
        await writer.drain()
        up_writer.close()


async def _pipe_both(
    reader: asyncio.StreamReader,
    writer: asyncio.StreamWriter,
    up_reader: asyncio.StreamReader,
    up_writer: asyncio.StreamWriter,
) -> None:
    async def pipe(src: asyncio.StreamReader, dst: asyncio.StreamWriter) -> None:
        with contextlib.suppress(ConnectionError, OSError):
            while data := await src.read(65536):
                dst.write(data)
                await dst.drain()
        with contextlib.suppress(ConnectionError, OSError, RuntimeError):
            dst.close()

    try:
        await asyncio.gather(pipe(reader, up_writer), pipe(up_reader, writer))
    finally:
        up_writer.close()


@contextlib.contextmanager
def loop_thread() -> Iterator[LoopThread]:
    with LoopThread() as thread:
        yield thread
