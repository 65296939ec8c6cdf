"""A provider's ``verify: false`` (spec 10 §4) over real loopback sockets: an HTTPS
upstream with a self-signed certificate fails verification until that provider, and
only that provider, turns it off; the setting exists only with ``DJANGO_DEBUG=1``."""

from __future__ import annotations

import datetime as dt
import ipaddress
import json
import ssl
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from providers import http
from providers.outbound_policy import OutboundPolicy, ProviderOutbound, user_agent
from providers.upstream_client import UpstreamClient, UpstreamConnectError
from tests.integration.conftest import KEY_ALL, Gateway, free_port, inherited_env
from tests.outbound_servers import EchoUpstream, LoopThread

pytestmark = pytest.mark.integration

OFF = ProviderOutbound(verify=False)


def self_signed_context(folder: Path) -> ssl.SSLContext:
    """A server context whose certificate signs itself (no CA trusts it)."""
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "self-signed")])
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
        .sign(key, hashes.SHA256())
    )
    cert_path, key_path = folder / "self.crt", folder / "self.key"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert_path, key_path)
    context.set_alpn_protocols(["http/1.1"])
    return context


@pytest.fixture(scope="module")
def thread() -> Iterator[LoopThread]:
    with LoopThread() as running:
        yield running


@pytest.fixture(scope="module")
def upstream(
    thread: LoopThread, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[EchoUpstream]:
    server = EchoUpstream(
        thread, tls=self_signed_context(tmp_path_factory.mktemp("self-signed"))
    )
    yield server
    server.close()


@pytest.fixture
async def clients() -> AsyncIterator[list[Any]]:
    made: list[Any] = []
    yield made
    for client in made:
        await client.aclose()


async def call(client: Any, url: str) -> dict:
    async with client.stream("GET", url) as response:
        assert response.status_code == 200
        return json.loads(await response.aread())


async def test_verify_off_accepts_a_self_signed_upstream_for_that_provider_only(
    clients, upstream
):
    policy = OutboundPolicy(user_agent=user_agent())
    lean = UpstreamClient(policy=policy, connect_timeout_s=3.0, read_timeout_s=5.0)
    side = http.policy_client(timeout=5.0, policy=policy)
    side_off = http.policy_client(timeout=5.0, policy=policy, outbound=OFF)
    clients += [lean, side, side_off]

    with pytest.raises(UpstreamConnectError, match="TLS handshake"):
        await call(lean, upstream.url)
    with pytest.raises(httpx.ConnectError):
        await call(side, upstream.url)

    assert (await call(lean.for_provider(OFF), upstream.url))["method"] == "GET"
    assert (await call(side_off, upstream.url))["method"] == "GET"
    # the process policy and every other provider still verify
    with pytest.raises(UpstreamConnectError, match="TLS handshake"):
        await call(lean, f"{upstream.url}/again")
    other = ProviderOutbound(headers={"X-Title": "t"})
    with pytest.raises(UpstreamConnectError, match="TLS handshake"):
        await call(lean.for_provider(other), upstream.url)


# --- the gateway process --------------------------------------------------------------


def config(url: str) -> str:
    return f"""
providers:
  - slug: lab
    kind: openai
    base_url: {url}/v1
    verify: false
    connections:
      - name: main
        api_key: sk-upstream-secret-lab-1234567890
    models:
      - id: m1
  - slug: strict
    kind: openai
    base_url: {url}/v1
    connections:
      - name: main
        api_key: sk-upstream-secret-strict-1234567890
    models:
      - id: m1
api_keys:
  - name: all
    key: {KEY_ALL}
"""


def _gateway(data_dir: Path, **env: str) -> Gateway:
    gateway = Gateway(data_dir, free_port(), inherited_env())
    gateway.env.update(
        {
            "DJANGO_SETTINGS_MODULE": "omniroute_site.settings",
            "OMNIROUTE_DATA_DIR": str(data_dir),
            "OMNIROUTE_CONFIG_POLL_MS": "200",
            "PYTHONUNBUFFERED": "1",
            **env,
        }
    )
    return gateway


def test_a_debug_gateway_serves_a_self_signed_upstream_only_where_verify_is_off(
    tmp_path: Path, upstream: EchoUpstream
):
    gateway = _gateway(tmp_path, DJANGO_DEBUG="1")
    try:
        gateway.start()
        result = gateway.apply(config(upstream.url))
        assert result.returncode == 0, result.stderr
        assert "lab" in result.stdout
        assert "verify: TLS verification is OFF" in result.stdout  # loudly

        def chat(model: str) -> httpx.Response:
            return httpx.post(
                f"{gateway.url}/v1/chat/completions",
                headers={"Authorization": f"Bearer {KEY_ALL}"},
                json={"model": model, "messages": [{"role": "user", "content": "x"}]},
                timeout=30,
            )

        served = chat("lab/m1")
        assert served.status_code == 200, served.text
        assert upstream.seen[-1].target == "/v1/chat/completions"
        refused = chat("strict/m1")
        assert refused.status_code >= 500
        attempts = refused.json()["error"]["attempts"]
        assert attempts[0]["reason"] == "connection_error"
        exported = gateway.manage("export_config")
        assert "verify: false" in exported.stdout
    finally:
        gateway.stop()


def test_without_debug_verify_off_is_refused_naming_the_field(tmp_path: Path):
    gateway = _gateway(tmp_path)
    assert gateway.manage("migrate", "--noinput", "-v0").returncode == 0
    result = gateway.manage("import_config", "-", stdin=config("https://127.0.0.1:9"))
    assert result.returncode != 0
    assert "providers[0].verify: false is allowed only with DJANGO_DEBUG=1" in (
        result.stdout + result.stderr
    )
