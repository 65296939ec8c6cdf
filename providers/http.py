"""The one place that builds outbound HTTP clients (style §2.4).

* ``upstream_client()``: the pooled ``httpx.AsyncClient`` of this process and event
  loop, with the timeouts and pool limits of spec 08 §1; redirects are never followed
  (a 3xx is an upstream error, spec 08 §5.3).  The built-in ``mock`` provider kind is
  mounted in-process at ``http://omniroute-mock`` so the demo needs no network.
* ``sync_client()``: for Celery jobs and the admin (30 s timeout, spec 06 §3.1).
"""

from __future__ import annotations

import asyncio

import httpx
from django.conf import settings

from providers.mock_upstream import build_app

MOCK_ORIGIN = "http://omniroute-mock"
_clients: dict[int, httpx.AsyncClient] = {}


def _limits() -> httpx.Limits:
    return httpx.Limits(
        max_connections=settings.OMNIROUTE_UPSTREAM_MAX_CONNECTIONS,
        max_keepalive_connections=settings.OMNIROUTE_UPSTREAM_MAX_KEEPALIVE,
        keepalive_expiry=30.0,
    )


def _timeout() -> httpx.Timeout:
    return httpx.Timeout(
        connect=settings.OMNIROUTE_UPSTREAM_CONNECT_TIMEOUT_MS / 1000,
        read=settings.OMNIROUTE_UPSTREAM_READ_TIMEOUT_MS / 1000,
        write=settings.OMNIROUTE_UPSTREAM_READ_TIMEOUT_MS / 1000,
        pool=settings.OMNIROUTE_UPSTREAM_CONNECT_TIMEOUT_MS / 1000,
    )


def new_upstream_client() -> httpx.AsyncClient:
    return httpx.AsyncClient(
        timeout=_timeout(),
        limits=_limits(),
        follow_redirects=False,
        http2=settings.OMNIROUTE_UPSTREAM_HTTP2,
        trust_env=False,
        mounts={MOCK_ORIGIN: httpx.ASGITransport(app=build_app())},
    )


def upstream_client() -> httpx.AsyncClient:
    """The pooled client of the running event loop (one per process and loop)."""
    loop_id = id(asyncio.get_running_loop())
    client = _clients.get(loop_id)
    if client is None or client.is_closed:
        client = _clients[loop_id] = new_upstream_client()
    return client


async def close_upstream_clients() -> None:
    clients = list(_clients.values())
    _clients.clear()
    for client in clients:
        await client.aclose()


def sync_client(*, timeout_s: float = 30.0) -> httpx.Client:
    return httpx.Client(
        timeout=timeout_s,
        follow_redirects=False,
        trust_env=False,
        headers={"User-Agent": "OmniRoute/0.1"},
    )
