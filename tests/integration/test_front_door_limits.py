"""Front-door limits (issue #16 point 3) on a real gateway process served as the
README serves it (uvicorn with ``omniroute_site.server.GuardedHttpToolsProtocol``;
the test gateway has 3 s header and body timeouts): oversize headers are a 431 read
no further, a slow header or body is a 408 and the connection closes, Django's paths
bound their body as the chat paths do, and a chat path checks ``Host``."""

from __future__ import annotations

import contextlib
import socket
import time

import httpx
import pytest

from tests.integration.conftest import KEY_ALL

pytestmark = pytest.mark.integration


def _raw(gateway, data: bytes, *, wait: float = 10.0) -> bytes:
    """Send ``data`` on a fresh connection; everything received until it closes."""
    with socket.create_connection(("127.0.0.1", gateway.port), timeout=wait) as sock:
        with contextlib.suppress(BrokenPipeError, ConnectionResetError):
            sock.sendall(data)
        chunks = []
        while True:
            try:
                chunk = sock.recv(65536)
            except (TimeoutError, ConnectionResetError):
                break
            if not chunk:
                break
            chunks.append(chunk)
    return b"".join(chunks)


def test_headers_over_64_kib_are_a_431_and_the_connection_closes(gateway):
    big = b"x" * (70 * 1024)
    reply = _raw(
        gateway,
        b"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\n"
        b"X-Padding: " + big + b"\r\n\r\n",
    )
    assert reply.startswith(b"HTTP/1.1 431 ")
    assert b"request_header_fields_too_large" in reply
    assert b"connection: close" in reply.lower()


def test_a_huge_header_is_refused_without_reading_it_all(gateway):
    """50 MB announced in one header: refused after the first 64 KiB."""
    with socket.create_connection(("127.0.0.1", gateway.port), timeout=10) as sock:
        sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Big: ")
        sent = 0
        refused = False
        try:
            while sent < 50 * 1024 * 1024:
                sock.sendall(b"y" * 65536)
                sent += 65536
        except (BrokenPipeError, ConnectionResetError):
            refused = True
        assert refused
        assert sent < 8 * 1024 * 1024


def test_a_slow_header_is_a_408(gateway):
    started = time.monotonic()
    with socket.create_connection(("127.0.0.1", gateway.port), timeout=15) as sock:
        sock.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\n")
        reply = sock.recv(65536)
        closed = sock.recv(65536) == b""
    assert reply.startswith(b"HTTP/1.1 408 ")
    assert closed
    assert time.monotonic() - started < 12


def test_a_silent_connection_is_closed(gateway):
    with socket.create_connection(("127.0.0.1", gateway.port), timeout=15) as sock:
        reply = sock.recv(65536)
    assert reply.startswith(b"HTTP/1.1 408 ")


def test_a_stalled_body_is_a_408_logged_under_its_key(gateway, upstream):
    head = (
        b"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\n"
        b"Authorization: Bearer " + KEY_ALL.encode() + b"\r\n"
        b"Content-Type: application/json\r\nContent-Length: 200\r\n\r\n"
    )
    reply = _raw(gateway, head + b'{"model": "pa/m1", ', wait=15)
    assert reply.startswith(b"HTTP/1.1 408 ")
    assert b"request_timeout" in reply
    row = gateway.requests_log()[-1]
    assert (row["http_status"], row["reason"]) == (408, "request_timeout")


@pytest.mark.parametrize("path", ["/healthz", "/api/combos", "/v1/models"])
def test_a_django_path_refuses_an_oversize_body(gateway, path):
    declared = _raw(
        gateway,
        f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\n"
        "Content-Length: 2000000000\r\n\r\n".encode(),
    )
    assert declared.startswith(b"HTTP/1.1 413 ")
    streamed = httpx.post(
        f"{gateway.url}{path}",
        content=iter([b"z" * 60_000, b"z" * 60_000]),  # chunked, 120 KB > 64 KiB
        timeout=15,
    )
    assert streamed.status_code == 413
    assert streamed.json()["error"]["code"] == "body_too_large"


def test_a_chat_path_checks_the_host(gateway, upstream):
    response = httpx.post(
        f"{gateway.url}/v1/chat/completions",
        headers={"Authorization": f"Bearer {KEY_ALL}", "Host": "evil.example"},
        json={"model": "pa/m1", "messages": [{"role": "user", "content": "x"}]},
        timeout=15,
    )
    assert response.status_code == 400
    assert response.json()["error"]["code"] == "invalid_host"
    assert upstream.requests() == []


def test_ordinary_requests_still_pass(gateway, upstream):
    response = httpx.post(
        f"{gateway.url}/v1/chat/completions",
        headers={"Authorization": f"Bearer {KEY_ALL}", "X-Pad": "p" * 8000},
        json={"model": "pa/m1", "messages": [{"role": "user", "content": "x"}]},
        timeout=15,
    )
    assert response.status_code == 200
