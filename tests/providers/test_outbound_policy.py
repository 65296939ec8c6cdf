"""The outbound policy's decisions (spec 10 §4), without sockets: which proxy a URL
takes under HTTPS_PROXY / HTTP_PROXY / ALL_PROXY / NO_PROXY and a provider's
``proxy_url``; proxy credentials; the per-provider values' contract; default headers;
one cached ``SSLContext`` per TLS identity; the request head the lean client writes
through a proxy.  ``tests/integration/test_outbound_proxy_tls.py`` has the sockets."""

from __future__ import annotations

import base64
import ssl
from pathlib import Path

import pytest

from providers import http
from providers.outbound_policy import (
    NoProxy,
    OutboundPolicy,
    ProviderOutbound,
    Proxy,
    ProxyRules,
    product_version,
    user_agent,
)
from providers.upstream_client import UpstreamClient, _ClientRoute, _request_head


def rules(**environ: str) -> ProxyRules:
    return ProxyRules.from_environ(environ)


# --- proxies from the environment -----------------------------------------------------


def test_https_and_http_proxies_apply_to_their_scheme_and_all_proxy_to_the_rest():
    only_https = rules(HTTPS_PROXY="http://p1:3128")
    assert only_https.proxy_for("https", "api.example.com", 443) == Proxy("p1", 3128)
    assert only_https.proxy_for("http", "api.example.com", 80) is None

    both = rules(HTTP_PROXY="p2:8080", ALL_PROXY="http://p3")
    assert both.proxy_for("http", "h", 80) == Proxy("p2", 8080)  # no scheme: http
    assert both.proxy_for("https", "h", 443) == Proxy("p3", 80)  # no port: 80


def test_lower_case_names_win_and_empty_values_are_unset():
    chosen = rules(https_proxy="http://low:1", HTTPS_PROXY="http://up:2")
    assert chosen.https == Proxy("low", 1)
    fallback = rules(https_proxy="", HTTPS_PROXY="http://up:2", no_proxy=" ")
    assert fallback.https == Proxy("up", 2)
    assert fallback.no_proxy == NoProxy()


@pytest.mark.parametrize(
    ("no_proxy", "host", "port", "bypassed"),
    [
        ("*", "anything.example", 443, True),
        ("example.com", "example.com", 443, True),
        ("example.com", "api.example.com", 443, True),
        ("example.com", "notexample.com", 443, False),
        (".example.com", "example.com", 443, True),
        (".example.com", "a.b.example.com", 443, True),
        ("*.example.com", "a.example.com", 443, True),
        ("EXAMPLE.com.", "Api.Example.COM", 443, True),
        ("example.com:8443", "api.example.com", 8443, True),
        ("example.com:8443", "api.example.com", 443, False),
        ("10.0.0.0/8", "10.1.2.3", 443, True),
        ("10.0.0.0/8", "11.1.2.3", 443, False),
        ("10.0.0.0/8", "ten.example", 443, False),
        ("127.0.0.1", "127.0.0.1", 80, True),
        ("127.0.0.1:8080", "127.0.0.1", 80, False),
        ("::1", "::1", 443, True),
        ("[::1]", "[::1]", 443, True),
        ("[::1]:8443", "::1", 8443, True),
        ("[::1]:8443", "::1", 443, False),
        ("fd00::/8", "fd12::1", 443, True),
        ("fd00::/8", "10.0.0.1", 443, False),
        ("a.example, b.example  c.example", "c.example", 443, True),
        ("", "example.com", 443, False),
    ],
)
def test_no_proxy_matching(no_proxy: str, host: str, port: int, bypassed: bool):
    chosen = rules(HTTPS_PROXY="http://p:1", NO_PROXY=no_proxy)
    assert (chosen.proxy_for("https", host, port) is None) is bypassed


def test_there_is_no_implicit_loopback_bypass():
    assert rules(HTTP_PROXY="http://p:1").proxy_for("http", "127.0.0.1", 80)
    assert rules(HTTP_PROXY="http://p:1").proxy_for("http", "localhost", 80)


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("ALL_PROXY", "socks5://u:hunter2@p:1080"),
        ("https_proxy", "https://u:hunter2@p:443"),
        ("HTTP_PROXY", "http://u:hunter2@p:notaport"),
        ("HTTPS_PROXY", "http://u:hunter2@p:1/path"),
    ],
)
def test_an_unusable_proxy_is_refused_naming_the_variable(name: str, value: str):
    with pytest.raises(ValueError, match=name) as caught:
        rules(**{name: value})
    assert "hunter2" not in str(caught.value)


def test_proxy_credentials_become_basic_auth_and_never_show():
    proxy = Proxy.parse("http://us%40er:s3cr%3At@proxy.corp:3128", "HTTPS_PROXY")

    assert (proxy.host, proxy.port) == ("proxy.corp", 3128)
    assert proxy.authorization == "Basic " + base64.b64encode(b"us@er:s3cr:t").decode()
    assert proxy.url == "http://proxy.corp:3128"
    for shown in (repr(proxy), str(proxy), repr(rules(HTTPS_PROXY=str(proxy.url)))):
        assert "s3cr" not in shown
    outbound = ProviderOutbound(proxy_url="http://u:s3cret@p:1")
    assert "s3cret" not in repr(outbound)
    assert "s3cret" not in repr(OutboundPolicy().route(outbound))


# --- per-provider values --------------------------------------------------------------


def test_a_provider_proxy_overrides_the_environment_and_none_disables_it():
    policy = OutboundPolicy(
        proxies=rules(HTTPS_PROXY="http://env:1", NO_PROXY="internal.example")
    )

    assert policy.route().proxy_for("https", "api.example", 443) == Proxy("env", 1)
    assert policy.route().proxy_for("https", "internal.example", 443) is None
    own = policy.route(ProviderOutbound(proxy_url="http://own:2"))
    assert own.proxy_for("https", "api.example", 443) == Proxy("own", 2)
    assert own.proxy_for("http", "internal.example", 80) == Proxy("own", 2)
    direct = policy.route(ProviderOutbound(proxy_url="none"))
    assert direct.proxy_for("https", "api.example", 443) is None
    assert (
        policy.route(ProviderOutbound(proxy_url=" NONE ")).proxy_for("https", "x", 443)
        is None
    )


def test_provider_values_are_frozen_hashable_and_compare_by_value():
    one = ProviderOutbound(ca_bundle="/ca.pem", headers={"X-Title": "OmniRoute"})
    same = ProviderOutbound(ca_bundle="/ca.pem", headers={"X-Title": "OmniRoute"})

    assert one == same
    assert hash(one) == hash(same)
    assert one != ProviderOutbound(ca_bundle="/ca.pem")
    assert one.headers is not None
    assert one.headers["x-title"] == "OmniRoute"
    with pytest.raises(AttributeError):
        one.ca_bundle = "/other.pem"  # type: ignore[misc]
    with pytest.raises(TypeError):
        one.headers["X-Title"] = "x"  # type: ignore[index]
    policy = OutboundPolicy()
    assert policy.route(one) is policy.route(same)


@pytest.mark.parametrize(
    "values",
    [
        {"client_key": "/k.pem"},
        {"headers": {"X-Bad": "a\r\nInjected: 1"}},
        {"headers": {"Bad Name:": "v"}},
        {"proxy_url": "socks5://p:1"},
    ],
)
def test_unusable_provider_values_are_refused(values: dict[str, object]):
    with pytest.raises(ValueError, match=r"client_key|header|proxy"):
        ProviderOutbound(**values)  # type: ignore[arg-type]


def test_default_headers_user_agent_unless_the_provider_sets_one():
    policy = OutboundPolicy(user_agent=user_agent())

    assert policy.route().headers == (("User-Agent", f"omniroute/{product_version()}"),)
    fixed = ProviderOutbound(
        headers={"HTTP-Referer": "https://a.example", "X-Title": "t"}
    )
    assert policy.route(fixed).headers == (
        ("HTTP-Referer", "https://a.example"),
        ("X-Title", "t"),
        ("User-Agent", user_agent()),
    )
    own_agent = ProviderOutbound(headers={"user-agent": "mine/1"})
    assert policy.route(own_agent).headers == (("user-agent", "mine/1"),)
    assert OutboundPolicy().route().headers == ()


def test_the_user_agent_is_the_version_get_root_reports():
    assert http.user_agent() == f"omniroute/{http.product_version()}"
    assert product_version() != "0"  # installed: the package metadata is there


# --- trust ----------------------------------------------------------------------------


def test_one_cached_context_per_tls_identity(tmp_path: Path):
    policy = OutboundPolicy()
    plain = policy.route().tls.context()

    assert policy.route().tls.context() is plain
    assert policy.route(ProviderOutbound(proxy_url="none")).tls.context() is plain
    assert policy.route(ProviderOutbound(headers={"a": "b"})).tls is policy.route().tls
    own = policy.route().tls.new_context()  # an httpx client's: same recipe, own object
    assert own is not plain
    assert own.get_ca_certs() == plain.get_ca_certs()
    assert plain.verify_mode == ssl.CERT_REQUIRED
    assert plain.check_hostname


def test_a_missing_ca_file_is_a_value_error_from_check(tmp_path: Path):
    policy = OutboundPolicy()
    broken = ProviderOutbound(ca_bundle=str(tmp_path / "missing.pem"))

    with pytest.raises(ValueError, match="TLS settings unusable"):
        policy.check(broken)
    with pytest.raises(ValueError, match="TLS settings unusable"):
        OutboundPolicy(ca_bundle=str(tmp_path / "missing.pem")).check(
            ProviderOutbound()
        )


def test_a_fixed_context_refuses_provider_tls_files():
    policy = OutboundPolicy(ssl_context=ssl.create_default_context())
    assert policy.route().tls.context() is policy._ssl_context
    with pytest.raises(ValueError, match="fixed ssl_context"):
        policy.route(ProviderOutbound(ca_bundle="/ca.pem"))


# --- the lean client's head and pool keys -------------------------------------------


def _head(client: UpstreamClient, route: _ClientRoute, url: str, **headers: str) -> str:
    target = client._parse(url, route)
    head, _ = _request_head("GET", target, b"", headers or None, route.extra)
    return head.decode("latin-1")


def test_http_through_a_proxy_is_absolute_form_with_proxy_authorization():
    proxies = rules(HTTP_PROXY="http://u:pw@proxy:3128", NO_PROXY="direct.example")
    client = UpstreamClient(policy=OutboundPolicy(proxies=proxies, user_agent="ua/1"))
    route = client._default
    credentials = base64.b64encode(b"u:pw").decode()

    assert _head(client, route, "http://api.example:8080/v1/x?a=1") == (
        "GET http://api.example:8080/v1/x?a=1 HTTP/1.1\r\n"
        "User-Agent: ua/1\r\n"
        "Host: api.example:8080\r\n"
        f"Proxy-Authorization: Basic {credentials}\r\n"
        "Accept-Encoding: identity\r\n\r\n"
    )
    assert _head(client, route, "http://direct.example/", **{"user-agent": "own"}) == (
        "GET / HTTP/1.1\r\nuser-agent: own\r\nHost: direct.example\r\n"
        "Accept-Encoding: identity\r\n\r\n"
    )
    # an https target is tunnelled: origin-form, the credentials only on CONNECT
    https_head = _head(client, route, "https://api.example/v1")
    assert https_head.startswith("GET /v1 HTTP/1.1\r\n")
    assert "Proxy-Authorization" not in https_head


def test_pool_keys_include_the_proxy_and_the_tls_identity(tmp_path: Path):
    policy = OutboundPolicy(proxies=rules(HTTPS_PROXY="http://p:1"))
    client = UpstreamClient(policy=policy)
    url = "https://api.example/v1/chat/completions"
    default = client._parse(url, client._default).origin
    routed = client.for_provider(ProviderOutbound(proxy_url="none"))
    direct = client._parse(url, routed._route).origin  # type: ignore[union-attr]
    mtls = client.for_provider(ProviderOutbound(client_cert=str(tmp_path / "c.pem")))
    with_cert = client._parse(url, mtls._route).origin  # type: ignore[union-attr]

    assert default.proxy == Proxy("p", 1)
    assert direct.proxy is None
    assert len({id(default), id(direct), id(with_cert)}) == 3
    assert with_cert.tls is not default.tls
    assert client._parse(url, client._default).origin is default
    assert client.for_provider(ProviderOutbound(proxy_url="none")) is routed
    assert client.for_provider(None) is client
    assert "via proxy p:1" in default.label


def test_a_client_without_a_policy_sends_no_default_headers_and_has_no_routes():
    client = UpstreamClient()
    assert client._default.extra == ()
    with pytest.raises(ValueError, match="without a policy"):
        client.for_provider(ProviderOutbound(proxy_url="none"))
    with pytest.raises(ValueError, match="not both"):
        UpstreamClient(
            policy=OutboundPolicy(), ssl_context=ssl.create_default_context()
        )


def test_the_snapshot_builds_one_provider_outbound_from_stored_settings(caplog):
    from gateway.config.snapshot import provider_outbound

    assert provider_outbound({}) is None
    built = provider_outbound({"proxy_url": "none", "headers": {"X-Title": "t"}})
    assert built == ProviderOutbound(proxy_url="none", headers={"X-Title": "t"})
    assert built.is_direct
    # a value that changed behind validation's back: the process policy applies
    with caplog.at_level("WARNING"):
        assert provider_outbound({"client_key": "/k.pem"}) is None
    assert "client_key" in caplog.text
