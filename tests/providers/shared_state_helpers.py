"""Helpers for the shared state tests: the real Redis, links under a fresh key
prefix, an injectable clock, a recording observer and a proxy that fakes an outage.

Redis is the one on 127.0.0.1:6379 (or ``OMNIROUTE_TEST_REDIS_URL``).  With CI=true
a missing Redis fails the test; otherwise the test skips.
"""

from __future__ import annotations

import contextlib
import os
import socket
import threading
import uuid
from typing import Any

import redis

from providers.redis_store import RedisLink
from tests.services import unavailable

REDIS_URL = os.environ.get("OMNIROUTE_TEST_REDIS_URL", "redis://127.0.0.1:6379/0")
SAFE_TIMEOUT_S = 0.5  # no spurious fallback on a loaded CI machine


def require_redis() -> str:
    try:
        redis.Redis.from_url(REDIS_URL, socket_connect_timeout=0.5).ping()
    except redis.RedisError:
        unavailable(f"Redis at {REDIS_URL} is not running")
    return REDIS_URL


def dead_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class Links:
    """Links sharing one fresh key prefix; ``close()`` stops them and deletes it."""

    def __init__(self, url: str = REDIS_URL) -> None:
        self.url = url
        self.namespace = f"omniroute-test-{uuid.uuid4().hex[:12]}:"
        self._made: list[RedisLink] = []

    def __call__(self, url: str | None = None, **kwargs: Any) -> RedisLink:
        kwargs.setdefault("timeout_s", SAFE_TIMEOUT_S)
        link = RedisLink(url or self.url, namespace=self.namespace, **kwargs)
        self._made.append(link)
        return link

    def close(self) -> None:
        for link in self._made:
            link.close()
        raw = redis.Redis.from_url(self.url)
        for key in raw.scan_iter(match=f"{self.namespace}*"):
            raw.delete(key)
        raw.close()


class Observer:
    def __init__(self) -> None:
        self.fallbacks: list[str] = []
        self.up: list[bool] = []

    def fallback(self, op: str) -> None:
        self.fallbacks.append(op)

    def redis_up(self, up: bool) -> None:
        self.up.append(up)


class Clock:
    def __init__(self, now: float = 100.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


class FlakyProxy:
    """A TCP proxy to the test Redis that can drop every connection (an outage)."""

    def __init__(self, url: str = REDIS_URL) -> None:
        target = redis.connection.parse_url(url)
        self._target = (target.get("host", "127.0.0.1"), target.get("port", 6379))
        self._listener = socket.create_server(("127.0.0.1", 0))
        database = target.get("db", 0)  # the same database as the test Redis
        self.url = f"redis://127.0.0.1:{self._listener.getsockname()[1]}/{database}"
        self.is_up = True
        self._open: set[socket.socket] = set()
        self._lock = threading.Lock()
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            if not self.is_up:
                client.close()
                continue
            upstream = socket.create_connection(self._target)
            with self._lock:
                self._open.update((client, upstream))
            for src, dst in ((client, upstream), (upstream, client)):
                threading.Thread(
                    target=self._pump, args=(src, dst), daemon=True
                ).start()

    @staticmethod
    def _pump(src: socket.socket, dst: socket.socket) -> None:
        try:
            while data := src.recv(65536):
                dst.sendall(data)
        except OSError:
            pass
        finally:
            for sock in (src, dst):
                with contextlib.suppress(OSError):
                    sock.shutdown(socket.SHUT_RDWR)

    def down(self) -> None:
        self.is_up = False
        with self._lock:
            for sock in self._open:
                with contextlib.suppress(OSError):
                    sock.shutdown(socket.SHUT_RDWR)
            self._open.clear()

    def up(self) -> None:
        self.is_up = True

    def close(self) -> None:
        self.down()
        self._listener.close()
