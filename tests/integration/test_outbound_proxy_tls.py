"""The one outbound HTTP policy over real loopback sockets (spec 10 §4, issue #14):
a CONNECT proxy that logs what it carries, HTTPS upstreams whose certificates come
from a private CA made here, one that requires a client certificate.

The lean ``UpstreamClient`` (the request path) and the httpx clients (jobs, webhooks,
Nadir) are given policies built with explicit values, since the process policy comes
from settings read at start-up; the last tests run a gateway process with
``HTTPS_PROXY`` and ``OMNIROUTE_CA_BUNDLE`` in its environment.
"""

from __future__ import annotations

import asyncio
import base64
import json
import socket
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import uvloop

from gateway.kernel.errors import FailureReason, classify_transport
from gateway.pipeline.upstream import _transport_failure
from providers import http, upstream_dial
from providers.outbound_policy import (
    OutboundPolicy,
    ProviderOutbound,
    ProxyRules,
    user_agent,
)
from providers.upstream_client import (
    UpstreamClient,
    UpstreamConnectError,
    UpstreamError,
)
from tests.integration.conftest import KEY_ALL, Gateway, free_port, inherited_env
from tests.outbound_servers import (
    Carried,
    ConnectProxy,
    EchoUpstream,
    LoopThread,
    PrivateCA,
)

pytestmark = pytest.mark.integration

CREDENTIALS = "Basic " + base64.b64encode(b"svc:pa55word").decode()


# --- fixtures -------------------------------------------------------------------------


@pytest.fixture(scope="module")
def thread() -> Iterator[LoopThread]:
    with LoopThread() as running:
        yield running


@pytest.fixture(scope="module")
def ca(tmp_path_factory: pytest.TempPathFactory) -> PrivateCA:
    return PrivateCA(tmp_path_factory.mktemp("ca"))


@pytest.fixture(scope="module")
def other_ca(tmp_path_factory: pytest.TempPathFactory) -> PrivateCA:
    return PrivateCA(tmp_path_factory.mktemp("other-ca"), "Other Test CA")


@pytest.fixture(scope="module")
def upstream(thread: LoopThread, ca: PrivateCA) -> Iterator[EchoUpstream]:
    server = EchoUpstream(thread, tls=ca.server_context())
    yield server
    server.close()


@pytest.fixture(scope="module")
def plain(thread: LoopThread) -> Iterator[EchoUpstream]:
    server = EchoUpstream(thread)
    yield server
    server.close()


@pytest.fixture(scope="module")
def mtls_upstream(thread: LoopThread, ca: PrivateCA) -> Iterator[EchoUpstream]:
    server = EchoUpstream(thread, tls=ca.server_context("mtls", client_ca=ca))
    yield server
    server.close()


@pytest.fixture
def proxy(thread: LoopThread) -> Iterator[ConnectProxy]:
    server = ConnectProxy(thread, require=CREDENTIALS)
    yield server
    server.close()


def through(
    proxy: ConnectProxy, ca: PrivateCA | None = None, **env: str
) -> OutboundPolicy:
    """A policy as the process would build it from this environment."""
    environ = {
        "HTTPS_PROXY": proxy.url_with("svc", "pa55word"),
        "HTTP_PROXY": proxy.url_with("svc", "pa55word"),
        **env,
    }
    return OutboundPolicy(
        proxies=ProxyRules.from_environ(environ),
        ca_bundle=str(ca.path) if ca else None,
        user_agent=user_agent(),
    )


@pytest.fixture
async def clients() -> AsyncIterator[list[Any]]:
    """Closes every client a test appends."""
    made: list[Any] = []
    yield made
    for client in made:
        await client.aclose()


def lean(clients: list[Any], policy: OutboundPolicy) -> UpstreamClient:
    client = UpstreamClient(policy=policy, connect_timeout_s=3.0, read_timeout_s=5.0)
    clients.append(client)
    return client


def side(
    clients: list[Any],
    policy: OutboundPolicy,
    outbound: ProviderOutbound | None = None,
) -> httpx.AsyncClient:
    client = http.policy_client(timeout=5.0, policy=policy, outbound=outbound)
    clients.append(client)
    return client


async def call(client: Any, url: str, headers: dict[str, str] | None = None) -> dict:
    async with client.stream("GET", url, headers=headers) as response:
        assert response.status_code == 200
        return json.loads(await response.aread())


def tunnels(proxy: ConnectProxy, server: EchoUpstream) -> list[Carried]:
    authority = server.url.split("://", 1)[1]
    return [c for c in proxy.log if c.target == authority or server.url in c.target]


def classified(exc: BaseException) -> FailureReason:
    """How the gateway's attempt runner classifies this transport error."""
    return classify_transport(_transport_failure(exc)).reason


# --- (a) proxies ----------------------------------------------------------------------


async def test_lean_https_calls_are_tunnelled_with_the_proxy_credentials(
    clients, proxy, upstream, ca
):
    client = lean(clients, through(proxy, ca))

    first = await call(client, f"{upstream.url}/v1/models")
    await call(client, f"{upstream.url}/v1/models")

    authority = upstream.url.removeprefix("https://")
    assert proxy.log == [
        Carried("CONNECT", authority, CREDENTIALS)
    ]  # one tunnel, reused
    assert first["target"] == "/v1/models"
    assert first["headers"]["user-agent"] == f"omniroute/{http.product_version()}"
    assert "proxy-authorization" not in first["headers"]  # never sent to the origin


async def test_lean_http_calls_go_to_the_proxy_in_absolute_form(clients, proxy, plain):
    client = lean(clients, through(proxy))

    echoed = await call(client, f"{plain.url}/v1/models?x=1")

    assert proxy.log == [Carried("GET", f"{plain.url}/v1/models?x=1", CREDENTIALS)]
    assert echoed["target"] == "/v1/models?x=1"
    assert echoed["headers"]["user-agent"] == user_agent()


async def test_a_refused_proxy_login_is_a_connection_error_that_hides_the_secret(
    clients, thread, upstream, ca
):
    strict = ConnectProxy(thread, require="Basic nobody")
    try:
        client = lean(clients, through(strict, ca))
        with pytest.raises(UpstreamConnectError, match="407") as caught:
            await call(client, upstream.url)
    finally:
        strict.close()
    assert "pa55word" not in str(caught.value)
    assert CREDENTIALS.split()[1] not in str(caught.value)
    assert classified(caught.value) is FailureReason.CONNECTION_ERROR


async def test_httpx_clients_follow_the_same_proxy_choice(
    clients, proxy, upstream, plain, ca
):
    client = side(clients, through(proxy, ca))

    secure = await call(client, f"{upstream.url}/jobs/source")
    insecure = await call(client, f"{plain.url}/jobs/source")

    assert proxy.log == [
        Carried("CONNECT", upstream.url.removeprefix("https://"), CREDENTIALS),
        Carried("GET", f"{plain.url}/jobs/source", CREDENTIALS),
    ]
    assert secure["headers"]["user-agent"] == user_agent()
    assert insecure["headers"]["user-agent"] == user_agent()


def test_jobs_webhooks_and_nadir_go_through_the_process_policy(
    proxy, upstream, ca, monkeypatch
):
    """``sync_fetch`` (models.dev, Arena), ``sync_post`` (webhooks) and ``post_json``
    (Nadir) all build their clients on the process policy."""
    monkeypatch.setattr(http, "_side_clients", {})
    http.set_process_policy(through(proxy, ca))
    try:
        fetched = http.sync_fetch(f"{upstream.url}/api.json", max_bytes=10_000)
        delivered = http.sync_post(
            f"{upstream.url}/hook", content=b"{}", headers={}, timeout_s=5
        )
        status, answer = asyncio.run(
            http.post_json(f"{upstream.url}/nadir", {"q": 1}, {}, timeout_s=5)
        )
    finally:
        http.set_process_policy(None)

    assert json.loads(fetched)["target"] == "/api.json"
    assert delivered.status == 200
    assert delivered.error is None
    assert status == 200
    assert json.loads(answer)["method"] == "POST"
    assert [c.method for c in tunnels(proxy, upstream)] == ["CONNECT"] * 3
    assert {c.authorization for c in proxy.log} == {CREDENTIALS}
    assert {s.headers["user-agent"] for s in upstream.seen[-3:]} == {user_agent()}


async def test_no_proxy_bypasses_for_both_clients(clients, proxy, upstream, plain, ca):
    policy = through(proxy, ca, NO_PROXY="localhost,127.0.0.0/8")

    await call(lean(clients, policy), upstream.url)
    await call(lean(clients, policy), plain.url)
    await call(side(clients, policy), upstream.url)
    await call(side(clients, policy), plain.url)

    assert proxy.log == []


async def test_a_provider_proxy_url_none_bypasses_and_a_provider_proxy_wins(
    clients, proxy, thread, upstream, ca
):
    policy = through(proxy, ca)
    direct = ProviderOutbound(proxy_url="none")

    await call(lean(clients, policy).for_provider(direct), upstream.url)
    await call(side(clients, policy, direct), upstream.url)
    assert proxy.log == []

    own = ConnectProxy(thread)
    try:
        mine = ProviderOutbound(proxy_url=own.url)
        await call(lean(clients, policy).for_provider(mine), upstream.url)
        await call(side(clients, policy, mine), upstream.url)
        assert [c.method for c in own.log] == ["CONNECT", "CONNECT"]
        assert {c.authorization for c in own.log} == {None}
    finally:
        own.close()
    assert proxy.log == []


# --- (b) one trust store --------------------------------------------------------------


async def test_a_private_ca_fails_as_connection_error_until_it_is_the_bundle(
    clients, upstream, ca, other_ca
):
    system = OutboundPolicy(user_agent=user_agent())  # the system store
    with pytest.raises(UpstreamConnectError, match="TLS handshake") as lean_error:
        await call(lean(clients, system), upstream.url)
    with pytest.raises(httpx.ConnectError) as side_error:
        await call(side(clients, system), upstream.url)
    assert classified(lean_error.value) is FailureReason.CONNECTION_ERROR
    assert classified(side_error.value) is FailureReason.CONNECTION_ERROR

    # OMNIROUTE_CA_BUNDLE replaces the system store ...
    bundle = OutboundPolicy(ca_bundle=str(ca.path), user_agent=user_agent())
    assert (await call(lean(clients, bundle), upstream.url))["method"] == "GET"
    assert (await call(side(clients, bundle), upstream.url))["method"] == "GET"
    # ... so a bundle of another CA does not trust this upstream
    wrong = OutboundPolicy(ca_bundle=str(other_ca.path))
    with pytest.raises(UpstreamConnectError, match="TLS handshake"):
        await call(lean(clients, wrong), upstream.url)


async def test_a_provider_ca_bundle_adds_trust_for_that_provider_only(
    clients, upstream, ca, other_ca
):
    policy = OutboundPolicy(ca_bundle=str(other_ca.path))
    mine = ProviderOutbound(ca_bundle=str(ca.path))
    client = lean(clients, policy)

    assert (await call(client.for_provider(mine), upstream.url))["method"] == "GET"
    assert (await call(side(clients, policy, mine), upstream.url))["method"] == "GET"
    with pytest.raises(UpstreamConnectError, match="TLS handshake"):
        await call(client, upstream.url)


async def test_tls_through_the_tunnel_is_verified_too(clients, proxy, upstream, ca):
    with pytest.raises(UpstreamConnectError, match="TLS handshake"):
        await call(lean(clients, through(proxy)), upstream.url)
    assert (await call(lean(clients, through(proxy, ca)), upstream.url))["method"]
    assert [c.method for c in proxy.log] == ["CONNECT", "CONNECT"]


async def test_an_unreadable_provider_bundle_fails_the_call_as_a_connection_error(
    clients, upstream, tmp_path: Path
):
    broken = ProviderOutbound(ca_bundle=str(tmp_path / "missing.pem"))
    policy = OutboundPolicy()
    with pytest.raises(UpstreamConnectError, match="TLS settings") as lean_error:
        await call(lean(clients, policy).for_provider(broken), upstream.url)
    with pytest.raises(httpx.ConnectError, match="TLS settings") as side_error:
        await call(side(clients, policy, broken), upstream.url)
    assert classified(lean_error.value) is FailureReason.CONNECTION_ERROR
    assert classified(side_error.value) is FailureReason.CONNECTION_ERROR


# --- (c) mutual TLS -------------------------------------------------------------------


async def test_an_upstream_requiring_a_client_certificate_accepts_only_with_one(
    clients, mtls_upstream, ca
):
    cert, key = ca.issue("omniroute-client", client=True)
    policy = OutboundPolicy(ca_bundle=str(ca.path))
    client = lean(clients, policy)

    with pytest.raises(UpstreamError):  # TLS 1.3: the alert may come on first read
        await call(client, mtls_upstream.url)
    with pytest.raises(httpx.TransportError):
        await call(side(clients, policy), mtls_upstream.url)

    with_cert = ProviderOutbound(client_cert=str(cert), client_key=str(key))
    assert (await call(client.for_provider(with_cert), mtls_upstream.url))["method"]
    assert (await call(side(clients, policy, with_cert), mtls_upstream.url))["method"]
    assert [s.client_cn for s in mtls_upstream.seen] == ["omniroute-client"] * 2


# --- (d) identity ---------------------------------------------------------------------


async def test_user_agent_and_provider_headers_with_the_call_headers_winning(
    clients, plain
):
    policy = OutboundPolicy(user_agent=user_agent())
    fixed = ProviderOutbound(
        headers={"HTTP-Referer": "https://ops.example", "X-Title": "t"}
    )
    for client in (lean(clients, policy), side(clients, policy)):
        routed = (
            client.for_provider(fixed)
            if isinstance(client, UpstreamClient)
            else (side(clients, policy, fixed))
        )
        default = (await call(client, plain.url))["headers"]
        merged = (await call(routed, plain.url, {"X-Title": "call"}))["headers"]
        own = (await call(client, plain.url, {"User-Agent": "caller/1"}))["headers"]

        assert default["user-agent"] == user_agent()
        assert (merged["http-referer"], merged["x-title"]) == (
            "https://ops.example",
            "call",
        )
        assert merged["user-agent"] == user_agent()
        assert own["user-agent"] == "caller/1"


# --- connecting -----------------------------------------------------------------------


async def test_a_black_holed_first_address_costs_the_happy_eyeballs_delay(
    clients, plain, monkeypatch
):
    port = int(plain.url.rsplit(":", 1)[1])
    hanging = (socket.AF_INET6, socket.SOCK_STREAM, 6, "", ("2001:db8::1", port, 0, 0))
    working = (socket.AF_INET, socket.SOCK_STREAM, 6, "", ("127.0.0.1", port))
    attempts: list[str] = []
    cancelled = asyncio.Event()
    real_connect = upstream_dial._connect_one

    async def resolve(loop, host, port_):
        return [hanging, working] if host == "dual.test" else [working]

    async def connect_one(loop, info):
        attempts.append(info[4][0])
        if info is hanging:  # a route that drops SYNs: never answers
            try:
                await asyncio.Event().wait()
            finally:
                cancelled.set()
        return await real_connect(loop, info)

    monkeypatch.setattr(upstream_dial, "_resolve", resolve)
    monkeypatch.setattr(upstream_dial, "_connect_one", connect_one)
    client = UpstreamClient(connect_timeout_s=5.0)
    clients.append(client)

    started = time.perf_counter()
    async with client.stream("GET", f"http://dual.test:{port}/") as response:
        assert response.status_code == 200
    elapsed = time.perf_counter() - started

    assert attempts == ["2001:db8::1", "127.0.0.1"]
    assert 0.2 <= elapsed < 1.5  # the 250 ms delay, not the 5 s connect timeout
    await asyncio.wait_for(cancelled.wait(), 1)  # the loser was cancelled


async def test_a_refused_first_address_moves_on_at_once():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        closed = probe.getsockname()[1]
    server = await asyncio.start_server(lambda r, w: w.close(), "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    infos = [
        (socket.AF_INET, socket.SOCK_STREAM, 6, "", ("127.0.0.1", closed)),
        (socket.AF_INET, socket.SOCK_STREAM, 6, "", ("127.0.0.1", port)),
    ]
    loop = asyncio.get_running_loop()
    started = time.perf_counter()
    sock = await upstream_dial._race(loop, infos, 5.0)
    elapsed = time.perf_counter() - started
    sock.close()
    server.close()
    await server.wait_closed()
    assert elapsed < 1.0
    with pytest.raises(ConnectionRefusedError):
        await upstream_dial._race(loop, infos[:1] * 2, 0.05)


def test_the_proxy_and_tls_paths_on_uvloop(thread, upstream, plain, ca):
    proxy = ConnectProxy(thread)
    policy = through(proxy, ca, HTTPS_PROXY=proxy.url, HTTP_PROXY=proxy.url)

    async def scenario() -> None:
        client = UpstreamClient(policy=policy, connect_timeout_s=3.0)
        for url in (upstream.url, upstream.url, plain.url):
            assert (await call(client, url))["method"] == "GET"
        await client.aclose()

    try:
        with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
            runner.run(scenario())
        assert [c.method for c in proxy.log] == ["CONNECT", "GET"]
    finally:
        proxy.close()


# --- the gateway process --------------------------------------------------------------


def gateway_config(good: str, bad: str, own: str = "", own_ca: str = "") -> str:
    """``good`` and ``bad`` follow the process policy; ``own`` (the untrusted
    upstream again) carries its own outbound settings: direct, its CA, a header."""
    providers = "\n".join(
        f"""  - slug: {slug}
    kind: openai
    base_url: {url}/v1
    connections:
      - name: main
        api_key: sk-upstream-secret-{slug}-1234567890
    models:
      - id: m1"""
        for slug, url in (("good", good), ("bad", bad))
    )
    if own:
        providers += f"""
  - slug: own
    kind: openai
    base_url: {own}/v1
    proxy_url: none
    ca_bundle: {own_ca}
    headers: {{X-Title: OmniRoute test}}
    connections:
      - name: main
        api_key: sk-upstream-secret-own-1234567890
    models:
      - id: m1"""
    return f"providers:\n{providers}\napi_keys:\n  - name: all\n    key: {KEY_ALL}\n"


@pytest.fixture(scope="module")
def outbound_gateway(
    tmp_path_factory: pytest.TempPathFactory,
    thread: LoopThread,
    upstream: EchoUpstream,
    other_ca: PrivateCA,
    ca: PrivateCA,
) -> Iterator[tuple[Gateway, ConnectProxy, EchoUpstream]]:
    proxy = ConnectProxy(thread, require=CREDENTIALS)
    untrusted = EchoUpstream(thread, tls=other_ca.server_context("untrusted"))
    data_dir = tmp_path_factory.mktemp("gateway")
    env = inherited_env()
    env.update(
        {
            "DJANGO_SETTINGS_MODULE": "omniroute_site.settings",
            "OMNIROUTE_DATA_DIR": str(data_dir),
            "OMNIROUTE_CONFIG_POLL_MS": "200",
            "OMNIROUTE_LOG_SYNC": "true",
            "PYTHONUNBUFFERED": "1",
            "HTTPS_PROXY": proxy.url_with("svc", "pa55word"),
            "OMNIROUTE_CA_BUNDLE": str(ca.path),
        }
    )
    gateway = Gateway(data_dir, free_port(), env)
    try:
        gateway.start()
        result = gateway.apply(
            gateway_config(
                upstream.url, untrusted.url, untrusted.url, str(other_ca.path)
            )
        )
        assert result.returncode == 0, result.stderr
        yield gateway, proxy, untrusted
    finally:
        gateway.stop()
        untrusted.close()
        proxy.close()


def test_the_gateway_calls_upstreams_through_the_proxy_with_the_ca_bundle(
    outbound_gateway, upstream
):
    gateway, proxy, untrusted = outbound_gateway

    response = httpx.post(
        f"{gateway.url}/v1/chat/completions",
        headers={"Authorization": f"Bearer {KEY_ALL}"},
        json={
            "model": "bad/m1",
            "fallback_models": ["good/m1"],
            "messages": [{"role": "user", "content": "through the proxy"}],
        },
        timeout=30,
    )

    assert response.status_code == 200, response.text
    attempts = response.json()["omniroute"]["failover"]["attempts"]
    assert [(a["model"], a["status"], a["reason"]) for a in attempts] == [
        ("bad/m1", "failed", "connection_error"),  # a CA not in OMNIROUTE_CA_BUNDLE
        ("good/m1", "served", None),
    ]
    assert [c.method for c in tunnels(proxy, untrusted)] == ["CONNECT"]
    assert [(c.method, c.authorization) for c in tunnels(proxy, upstream)] == [
        ("CONNECT", CREDENTIALS)
    ]
    last = upstream.seen[-1]
    assert last.target == "/v1/chat/completions"
    assert last.headers["user-agent"] == f"omniroute/{http.product_version()}"
    assert "pa55word" not in gateway.log.read_text()


def test_a_provider_own_outbound_settings_route_its_calls(outbound_gateway):
    """The same untrusted upstream that fails through the process policy serves a
    provider whose settings say: direct, trust its CA, send a fixed header."""
    gateway, proxy, untrusted = outbound_gateway
    tunnelled = len(tunnels(proxy, untrusted))

    response = httpx.post(
        f"{gateway.url}/v1/chat/completions",
        headers={"Authorization": f"Bearer {KEY_ALL}"},
        json={"model": "own/m1", "messages": [{"role": "user", "content": "direct"}]},
        timeout=30,
    )

    assert response.status_code == 200, response.text
    assert len(tunnels(proxy, untrusted)) == tunnelled  # not through the proxy
    last = untrusted.seen[-1]
    assert last.target == "/v1/chat/completions"
    assert last.headers["x-title"] == "OmniRoute test"
    assert last.headers["user-agent"] == f"omniroute/{http.product_version()}"


@pytest.mark.parametrize(
    ("variable", "value", "secret"),
    [
        ("ALL_PROXY", "socks5://svc:hunter2@127.0.0.1:1080", "hunter2"),
        ("HTTPS_PROXY", "http://svc:hunter2@127.0.0.1:notaport", "hunter2"),
        ("OMNIROUTE_CA_BUNDLE", "/nonexistent/ca.pem", None),
    ],
)
def test_unusable_outbound_settings_stop_start_up(
    tmp_path: Path, variable: str, value: str, secret: str | None
):
    gateway = Gateway(tmp_path, free_port(), {**inherited_env(), variable: value})
    gateway.env["OMNIROUTE_DATA_DIR"] = str(tmp_path)
    gateway.env["DJANGO_SETTINGS_MODULE"] = "omniroute_site.settings"
    result = gateway.manage("check")

    assert result.returncode != 0
    assert variable in result.stderr
    if secret:
        assert secret not in result.stderr
