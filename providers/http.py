"""The one place that builds outbound HTTP clients (style §2.4), all on the one
outbound policy of the process (``providers.outbound_policy``, spec 10 §4).

* ``process_policy()``: the policy (environment proxies, the trust store of
  ``OMNIROUTE_CA_BUNDLE`` / ``SSL_CERT_FILE``, ``User-Agent: omniroute/<version>``),
  resolved once per process.
* ``upstream_client()``: the pooled ``UpstreamClient`` (``providers.upstream_client``)
  of this process and event loop, with the timeouts and pool limits of spec 08 §1;
  redirects are never followed (a 3xx is an upstream error, spec 08 §5.3).  It replaced
  httpx on the request path: it costs ~30 µs of CPU per request against ~400 µs
  (``docs/benchmarks.md``).
* ``mock_client()``: an ``httpx.AsyncClient`` mounted on the built-in ``mock`` provider
  kind's ASGI app, so the demo answers in-process with no network.
* ``client_for(kind, outbound)``: the client a provider kind uses, routed by the
  provider's ``ProviderOutbound`` (proxy, CA bundle, client certificate, headers).
* ``job_client()``: for scheduled jobs and webhook deliveries (30 s timeout, spec 06
  §3.1), on the outbound contract (``providers.outbound``).
* ``sync_post()``: one POST with ``job_client()`` whose transport errors become a
  ``SyncReply`` without a status (webhook deliveries, spec 02 §12.3).
* ``sync_fetch()``: one GET of a scheduled job's source (spec 06 §3.1): redirects
  followed only to ``https``, the body capped, connection errors, 429 and 5xx retried
  after 1, 2 and 4 s; every other failure raises ``FetchError``.
* ``post_json()``: one JSON POST of a side call (Nadir).

The httpx clients never read the environment themselves (``trust_env=False``): their
transport (``PolicyTransport``) asks the policy route which proxy each request goes
through (the very decision the lean client makes) and verifies with a context of the
route's TLS identity (the same trust store and client certificate).
"""

from __future__ import annotations

import asyncio
import ssl
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from urllib.parse import urljoin, urlsplit

import httpx
import orjson
from django.conf import settings

from gateway.dialects import REGISTRY
from providers.mock_upstream import build_app
from providers.outbound import HTTPClient, Response
from providers.outbound_policy import (
    OutboundPolicy,
    ProviderOutbound,
    Proxy,
    Route,
    product_version,
    user_agent,
)
from providers.upstream_client import UpstreamClient

__all__ = [
    "HTTPClient",
    "OutboundPolicy",
    "PolicyTransport",
    "ProviderOutbound",
    "client_for",
    "job_client",
    "post_json",
    "process_policy",
    "product_version",
    "set_process_policy",
    "sync_fetch",
    "sync_post",
    "upstream_client",
    "user_agent",
]

MOCK_ORIGIN = "http://omniroute-mock"
_clients: dict[int, UpstreamClient] = {}
_mock_clients: dict[tuple[int, ProviderOutbound | None], httpx.AsyncClient] = {}
_process: list[OutboundPolicy] = []
_process_lock = threading.Lock()


def process_policy() -> OutboundPolicy:
    """The outbound policy of this process: the proxies and the CA bundle the
    settings read from the environment at start-up, the product's ``User-Agent``.
    Built on first use, cached."""
    if _process:
        return _process[0]
    with _process_lock:
        if not _process:
            _process.append(
                OutboundPolicy(
                    proxies=settings.OMNIROUTE_OUTBOUND_PROXIES,
                    ca_bundle=settings.OMNIROUTE_CA_BUNDLE,
                    user_agent=user_agent(),
                )
            )
        return _process[0]


def set_process_policy(policy: OutboundPolicy | None) -> None:
    """Replace the process policy (tests); None: resolve it again on next use.
    Clients already built keep the policy they were built with."""
    with _process_lock:
        _process.clear()
        if policy is not None:
            _process.append(policy)


def _timeout() -> httpx.Timeout:
    return httpx.Timeout(
        connect=settings.OMNIROUTE_UPSTREAM_CONNECT_TIMEOUT_MS / 1000,
        read=settings.OMNIROUTE_UPSTREAM_READ_TIMEOUT_MS / 1000,
        write=settings.OMNIROUTE_UPSTREAM_READ_TIMEOUT_MS / 1000,
        pool=settings.OMNIROUTE_UPSTREAM_CONNECT_TIMEOUT_MS / 1000,
    )


def new_upstream_client(policy: OutboundPolicy | None = None) -> UpstreamClient:
    return UpstreamClient(
        connect_timeout_s=settings.OMNIROUTE_UPSTREAM_CONNECT_TIMEOUT_MS / 1000,
        read_timeout_s=settings.OMNIROUTE_UPSTREAM_READ_TIMEOUT_MS / 1000,
        max_connections=settings.OMNIROUTE_UPSTREAM_MAX_CONNECTIONS,
        max_keepalive=settings.OMNIROUTE_UPSTREAM_MAX_KEEPALIVE,
        keepalive_expiry_s=30.0,
        policy=policy or process_policy(),
    )


def upstream_client() -> UpstreamClient:
    """The pooled client of the running event loop (one per process and loop)."""
    loop_id = id(asyncio.get_running_loop())
    client = _clients.get(loop_id)
    if client is None or client.is_closed:
        client = _clients[loop_id] = new_upstream_client()
    return client


def mock_client(outbound: ProviderOutbound | None = None) -> httpx.AsyncClient:
    """The in-process client of the built-in ``mock`` kind (no network), with the
    route's default headers like every other client."""
    key = (id(asyncio.get_running_loop()), outbound)
    client = _mock_clients.get(key)
    if client is None or client.is_closed:
        if len(_mock_clients) >= _MAX_CLIENTS:
            _mock_clients.clear()
        client = _mock_clients[key] = httpx.AsyncClient(
            timeout=_timeout(),
            follow_redirects=False,
            trust_env=False,
            headers=dict(process_policy().route(outbound).headers),
            transport=httpx.ASGITransport(app=build_app()),
        )
    return client


def client_for(kind: str, outbound: ProviderOutbound | None = None) -> HTTPClient:
    """The client a provider kind is called with (``providers.outbound``), routed by
    the provider's outbound values (None: the process policy's defaults)."""
    if REGISTRY[kind].in_process:
        return mock_client(outbound)
    return upstream_client().for_provider(outbound)


async def close_upstream_clients() -> None:
    clients: list[UpstreamClient | httpx.AsyncClient] = [
        *_clients.values(),
        *_mock_clients.values(),
    ]
    _clients.clear()
    _mock_clients.clear()
    for client in clients:
        await client.aclose()


_MAX_CLIENTS = 256
_DEFAULT_PORTS = {"http": 80, "https": 443}


class PolicyTransport(httpx.AsyncBaseTransport):
    """An httpx transport that routes each request as a policy route says: direct or
    through the route's proxy for that URL (``CONNECT`` for https, with its
    ``Proxy-Authorization``), verifying with an ``SSLContext`` of the route's TLS
    identity (same trust store and client certificate as the lean client's).  One pooled
    ``httpx.AsyncHTTPTransport`` per proxy (or direct), made on first use; a TLS file
    that cannot be used fails the request with ``httpx.ConnectError``."""

    def __init__(self, route: Route) -> None:
        self._route = route
        self._context: ssl.SSLContext | None = None
        self._transports: dict[Proxy | None, httpx.AsyncHTTPTransport] = {}

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        url = request.url
        scheme = url.scheme
        proxy = self._route.proxy_for(
            scheme, url.host, url.port or _DEFAULT_PORTS.get(scheme)
        )
        transport = self._transports.get(proxy)
        if transport is None:
            transport = self._transports[proxy] = self._transport(request, proxy)
        return await transport.handle_async_request(request)

    def _transport(
        self, request: httpx.Request, proxy: Proxy | None
    ) -> httpx.AsyncHTTPTransport:
        try:
            context = self._context
            if context is None:  # its own: httpcore sets ALPN on it per connect
                context = self._context = self._route.tls.new_context()
        except (OSError, ValueError) as exc:  # ssl.SSLError is an OSError
            raise httpx.ConnectError(
                f"TLS settings unusable: {exc}", request=request
            ) from exc
        return httpx.AsyncHTTPTransport(
            verify=context,
            trust_env=False,
            proxy=None if proxy is None else _httpx_proxy(proxy),
        )

    async def aclose(self) -> None:
        transports = list(self._transports.values())
        self._transports.clear()
        for transport in transports:
            await transport.aclose()


def _httpx_proxy(proxy: Proxy) -> httpx.Proxy:
    headers = {}
    if proxy.authorization:
        headers["Proxy-Authorization"] = proxy.authorization
    return httpx.Proxy(proxy.url, headers=headers)


def policy_client(
    *,
    timeout: float | httpx.Timeout | None,
    outbound: ProviderOutbound | None = None,
    policy: OutboundPolicy | None = None,
    transport: httpx.AsyncBaseTransport | None = None,
) -> httpx.AsyncClient:
    """An httpx client on the outbound policy (``policy``, else the process's):
    its proxies and trust store, the route's default headers, no redirects, no
    environment of its own.  ``transport`` replaces the policy's (tests)."""
    route = (policy or process_policy()).route(outbound)
    return httpx.AsyncClient(
        timeout=timeout,
        follow_redirects=False,
        trust_env=False,
        headers=dict(route.headers),
        transport=transport if transport is not None else PolicyTransport(route),
    )


def job_client(
    *,
    timeout_s: float = 30.0,
    transport: httpx.AsyncBaseTransport | None = None,
    outbound: ProviderOutbound | None = None,
) -> HTTPClient:
    """The client of a scheduled job's fetch and a webhook delivery, on the outbound
    contract (spec 06 §3.1, 02 §12.3) and the outbound policy: redirects never
    followed by the client, the product's ``User-Agent``; ``outbound`` routes it as
    a provider (model discovery, token minting); ``transport`` is for tests."""
    return policy_client(timeout=timeout_s, outbound=outbound, transport=transport)


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
    """POST ``content``; read at most ``max_head_bytes`` of the reply; no redirects.
    Blocking: for the delivery threads and Celery tasks, never an event loop."""
    return asyncio.run(_post(url, content, headers, timeout_s, max_head_bytes))


async def _post(
    url: str,
    content: bytes,
    headers: Mapping[str, str],
    timeout_s: float,
    max_head_bytes: int,
) -> SyncReply:
    client = job_client(timeout_s=timeout_s)
    try:
        async with client.stream(
            "POST", url, content=content, headers=headers
        ) as response:
            head = b""
            async for chunk in response.aiter_bytes():
                head += chunk
                if len(head) >= max_head_bytes:
                    break
            return SyncReply(status=response.status_code, head=head[:max_head_bytes])
    except (httpx.RequestError, httpx.InvalidURL) as exc:
        return SyncReply(error=f"{type(exc).__name__}: {exc}")
    finally:
        await client.aclose()


_side_clients: dict[int, HTTPClient] = {}
SIDE_MAX_BYTES = 1024 * 1024
_SIDE_TIMEOUT = httpx.Timeout(5.0)  # httpx's default; the call's own bound is tighter


async def post_json(
    url: str, body: Mapping[str, object], headers: Mapping[str, str], timeout_s: float
) -> tuple[int, bytes]:
    """One JSON POST to a side service (the Nadir router, spec 04 §8): no retry, no
    redirects, the reply cut at 1 MiB.  Network errors and timeouts raise."""
    loop_id = id(asyncio.get_running_loop())
    client = _side_clients.get(loop_id)
    if client is None or client.is_closed:
        client = _side_clients[loop_id] = policy_client(timeout=_SIDE_TIMEOUT)
    sent = {
        "content-type": "application/json",
        "accept-encoding": "identity",
        **headers,
    }
    async with asyncio.timeout(timeout_s):
        async with client.stream(
            "POST", url, content=orjson.dumps(dict(body)), headers=sent
        ) as response:
            data = b""
            async for chunk in response.aiter_raw():
                data += chunk
                if len(data) > SIDE_MAX_BYTES:
                    break
            return response.status_code, data[:SIDE_MAX_BYTES]


FETCH_RETRY_DELAYS_SECONDS = (1.0, 2.0, 4.0)  # spec 06 §3.1: 3 retries
FETCH_MAX_REDIRECTS = 5
_REDIRECTS = frozenset({301, 302, 303, 307, 308})
_TOO_MANY_REQUESTS = 429
_SERVER_ERROR = 500
_OK_FIRST, _OK_END = 200, 300


class FetchError(Exception):
    """A job's source could not be read; the message names the URL and the cause."""


class _Retryable(FetchError):
    pass


def sync_fetch(
    url: str,
    *,
    max_bytes: int,
    timeout_s: float = 30.0,
    retry_delays_s: Sequence[float] = FETCH_RETRY_DELAYS_SECONDS,
    sleep: Callable[[float], None] | None = None,
    transport: httpx.AsyncBaseTransport | None = None,
) -> bytes:
    """GET ``url`` and return at most ``max_bytes`` of body, or raise ``FetchError``.

    Connection errors, timeouts, 429 and 5xx are retried, one retry after each
    delay of ``retry_delays_s``; a redirect is followed only to an ``https`` URL; a
    body larger than ``max_bytes`` (announced or read) fails without reading on.
    Blocking: for the scheduler's threads, Celery tasks and commands.
    """
    pause = sleep or time.sleep
    retries = 0
    while True:
        try:
            return asyncio.run(_fetch_once(url, max_bytes, timeout_s, transport))
        except _Retryable:
            if retries == len(retry_delays_s):
                raise
            pause(retry_delays_s[retries])
            retries += 1


async def _fetch_once(
    url: str,
    max_bytes: int,
    timeout_s: float,
    transport: httpx.AsyncBaseTransport | None,
) -> bytes:
    client = job_client(timeout_s=timeout_s, transport=transport)
    try:
        for _ in range(FETCH_MAX_REDIRECTS + 1):
            try:
                async with client.stream("GET", url) as response:
                    status = response.status_code
                    if status in _REDIRECTS:
                        url = _redirect_target(url, response)
                        continue
                    _check_status(url, status)
                    return await _read_capped(url, response, max_bytes)
            except httpx.UnsupportedProtocol as exc:
                raise FetchError(f"GET {url}: {exc}") from exc
            except httpx.TransportError as exc:
                raise _Retryable(f"GET {url}: {type(exc).__name__}: {exc}") from exc
            except httpx.InvalidURL as exc:
                raise FetchError(f"GET {url}: invalid URL: {exc}") from exc
        raise FetchError(f"GET {url}: more than {FETCH_MAX_REDIRECTS} redirects")
    finally:
        await client.aclose()


def _redirect_target(url: str, response: Response) -> str:
    location = response.headers.get("location")
    if not location:
        raise FetchError(f"GET {url}: {response.status_code} without Location")
    target = urljoin(url, location)
    scheme = urlsplit(target).scheme
    if scheme != "https":
        raise FetchError(f"GET {url}: redirect to {scheme}:// refused (https only)")
    return target


def _check_status(url: str, status: int) -> None:
    if status == _TOO_MANY_REQUESTS or status >= _SERVER_ERROR:
        raise _Retryable(f"GET {url}: HTTP {status}")
    if not _OK_FIRST <= status < _OK_END:
        raise FetchError(f"GET {url}: HTTP {status}")


async def _read_capped(url: str, response: Response, max_bytes: int) -> bytes:
    announced = response.headers.get("content-length") or ""
    if announced.isascii() and announced.isdigit() and int(announced) > max_bytes:
        raise FetchError(f"GET {url}: payload of {announced} bytes exceeds {max_bytes}")
    body = bytearray()
    async for chunk in response.aiter_bytes():
        body += chunk
        if len(body) > max_bytes:
            raise FetchError(f"GET {url}: payload exceeds {max_bytes} bytes")
    return bytes(body)
