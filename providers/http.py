"""The one place that builds outbound HTTP clients (style §2.4).

* ``upstream_client()``: the pooled ``UpstreamClient`` (``providers.upstream_client``)
  of this process and event loop, with the timeouts and pool limits of spec 08 §1;
  redirects are never followed (a 3xx is an upstream error, spec 08 §5.3).  It replaced
  httpx on the request path: it costs ~30 µs of CPU per request against ~400 µs
  (``docs/benchmarks.md``).
* ``mock_client()``: an ``httpx.AsyncClient`` mounted on the built-in ``mock`` provider
  kind's ASGI app, so the demo answers in-process with no network.
* ``client_for(kind)``: the client a provider kind uses.
* ``sync_client()``: for Celery jobs and the admin (30 s timeout, spec 06 §3.1).
* ``sync_post()``: one POST with ``sync_client()`` whose transport errors become a
  ``SyncReply`` without a status (webhook deliveries, spec 02 §12.3).
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from dataclasses import dataclass

import httpx
from django.conf import settings

from providers.mock_upstream import build_app
from providers.upstream_client import UpstreamClient

MOCK_ORIGIN = "http://omniroute-mock"
MOCK_KIND = "mock"
_clients: dict[int, UpstreamClient] = {}
_mock_clients: dict[int, httpx.AsyncClient] = {}


def _timeout() -> httpx.Timeout:
    return httpx.Timeout(
        connect=settings.OMNIROUTE_UPSTREAM_CONNECT_TIMEOUT_MS / 1000,
        read=settings.OMNIROUTE_UPSTREAM_READ_TIMEOUT_MS / 1000,
        write=settings.OMNIROUTE_UPSTREAM_READ_TIMEOUT_MS / 1000,
        pool=settings.OMNIROUTE_UPSTREAM_CONNECT_TIMEOUT_MS / 1000,
    )


def new_upstream_client() -> UpstreamClient:
    return UpstreamClient(
        connect_timeout_s=settings.OMNIROUTE_UPSTREAM_CONNECT_TIMEOUT_MS / 1000,
        read_timeout_s=settings.OMNIROUTE_UPSTREAM_READ_TIMEOUT_MS / 1000,
        max_connections=settings.OMNIROUTE_UPSTREAM_MAX_CONNECTIONS,
        max_keepalive=settings.OMNIROUTE_UPSTREAM_MAX_KEEPALIVE,
        keepalive_expiry_s=30.0,
    )


def upstream_client() -> UpstreamClient:
    """The pooled client of the running event loop (one per process and loop)."""
    loop_id = id(asyncio.get_running_loop())
    client = _clients.get(loop_id)
    if client is None or client.is_closed:
        client = _clients[loop_id] = new_upstream_client()
    return client


def mock_client() -> httpx.AsyncClient:
    """The in-process client of the built-in ``mock`` kind (no network)."""
    loop_id = id(asyncio.get_running_loop())
    client = _mock_clients.get(loop_id)
    if client is None or client.is_closed:
        client = _mock_clients[loop_id] = httpx.AsyncClient(
            timeout=_timeout(),
            follow_redirects=False,
            trust_env=False,
            transport=httpx.ASGITransport(app=build_app()),
        )
    return client


def client_for(kind: str) -> UpstreamClient | httpx.AsyncClient:
    return mock_client() if kind == MOCK_KIND else upstream_client()


async def close_upstream_clients() -> None:
    clients: list[UpstreamClient | httpx.AsyncClient] = [
        *_clients.values(),
        *_mock_clients.values(),
    ]
    _clients.clear()
    _mock_clients.clear()
    for client in clients:
        await client.aclose()


def sync_client(*, timeout_s: float = 30.0) -> httpx.Client:
    return httpx.Client(
        timeout=timeout_s,
        follow_redirects=False,
        trust_env=False,
        headers={"User-Agent": "OmniRoute/0.1"},
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class SyncReply:
    """What one ``sync_post`` got: a status and the start of the body, or an error."""

    status: int | None = None  # None: no HTTP response (network error, bad URL)
    head: bytes = b""
    error: str | None = None


def sync_post(
    url: str,
    *,
    content: bytes,
    headers: Mapping[str, str],
    timeout_s: float,
    max_head_bytes: int = 1024,
) -> SyncReply:
    """POST ``content``; read at most ``max_head_bytes`` of the reply; no redirects."""
    try:
        with (
            sync_client(timeout_s=timeout_s) as client,
            client.stream("POST", url, content=content, headers=headers) as response,
        ):
            head = b""
            for chunk in response.iter_bytes():
                head += chunk
                if len(head) >= max_head_bytes:
                    break
            return SyncReply(status=response.status_code, head=head[:max_head_bytes])
    except (httpx.RequestError, httpx.InvalidURL) as exc:
        return SyncReply(error=f"{type(exc).__name__}: {exc}")


_side_clients: dict[int, httpx.AsyncClient] = {}
SIDE_MAX_BYTES = 1024 * 1024


async def post_json(
    url: str, body: Mapping[str, object], headers: Mapping[str, str], timeout_s: float
) -> tuple[int, bytes]:
    """One JSON POST to a side service (the Nadir router, spec 04 §8): no retry, no
    redirects, the reply cut at 1 MiB.  Network errors and timeouts raise."""
    loop_id = id(asyncio.get_running_loop())
    client = _side_clients.get(loop_id)
    if client is None or client.is_closed:
        client = _side_clients[loop_id] = httpx.AsyncClient(
            follow_redirects=False,
            trust_env=False,
            headers={"User-Agent": "OmniRoute/0.1"},
        )
    async with asyncio.timeout(timeout_s):
        async with client.stream(
            "POST", url, json=dict(body), headers=dict(headers), timeout=timeout_s
        ) as response:
            data = b""
            async for chunk in response.aiter_bytes():
                data += chunk
                if len(data) > SIDE_MAX_BYTES:
                    break
            return response.status_code, data[:SIDE_MAX_BYTES]
