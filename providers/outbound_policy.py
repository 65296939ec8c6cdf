"""The one outbound HTTP policy of the process (spec 10 §4): proxies, trust, identity.

Every outbound call (the lean ``UpstreamClient`` of the request path and the httpx
clients of jobs, webhooks and Nadir, all built by ``providers.http``) asks the same
``OutboundPolicy`` which proxy a URL goes through, which ``SSLContext`` verifies the
server, and which headers every request carries; so both clients decide the same way.
Plain stdlib: no Django, no httpx (``providers.http`` adapts it to httpx).

The process policy (``providers.http.process_policy()``) is built once, from what the
settings read at start-up (``OMNIROUTE_OUTBOUND_PROXIES``, ``OMNIROUTE_CA_BUNDLE``);
nothing here reads the environment or builds an ``SSLContext`` per request.

* Proxies (``ProxyRules``): ``https_proxy`` / ``HTTPS_PROXY`` for https URLs,
  ``http_proxy`` / ``HTTP_PROXY`` for http URLs, ``all_proxy`` / ``ALL_PROXY`` for
  either when its own is unset; the lower-case name wins over the upper-case one, an
  empty value is unset.  A proxy is ``http://[user:password@]host[:port]`` (no scheme
  means ``http://``, no port means 80); https and SOCKS proxies are refused
  (``ValueError`` naming the variable; the settings turn it into a start-up error),
  never silently bypassed.  Credentials (percent-decoded) become
  ``Proxy-Authorization: Basic …``, sent on ``CONNECT`` and on absolute-form requests
  only; they are secrets, never in a ``repr``, log line or error.
  ``no_proxy`` / ``NO_PROXY`` (``NoProxy``): comma- or space-separated entries,
  case-insensitive; ``*`` bypasses every host; ``example.com``, ``.example.com`` and
  ``*.example.com`` match the domain and every subdomain; an IP address or CIDR range
  (``10.0.0.0/8``, ``::1``, ``[::1]``) matches IP hosts in it; ``host:port`` (or
  ``[v6]:port``) matches that port only.  There is no implicit bypass, not even for
  loopback.
* Trust: one store for every call: the system default store, or the PEM file named by
  ``OMNIROUTE_CA_BUNDLE`` (else ``SSL_CERT_FILE``) when set, which replaces it
  (``settings.OMNIROUTE_CA_BUNDLE`` resolves the two at start-up).  One ``TLSConfig``
  per distinct (provider CA bundle, client certificate, client key); its shared
  ``SSLContext`` (the lean client's) is built on first use and cached, and each httpx
  client gets one of its own from the same recipe (``new_context()``), as httpx always
  built one per client; ALPN offers ``http/1.1`` only.
* Identity: ``User-Agent: omniroute/<version>`` (the installed package's version, the
  one ``GET /`` reports) on every request whose own headers do not set one.

Per-provider values (the contract for whoever stores them on a provider): build one
frozen ``ProviderOutbound`` per provider (all fields default to None = "as the process
policy says") and pass it as ``providers.http.client_for(kind, outbound)`` or
``providers.http.job_client(..., outbound=outbound)``:

* ``proxy_url``: None: the environment decides; ``"none"``: always direct; else an
  ``http://[user:password@]host[:port]`` proxy for every URL of that provider, whatever
  ``NO_PROXY`` says.
* ``ca_bundle``: a PEM file of CA certificates trusted *in addition* to the process
  store, for this provider only.
* ``client_cert`` / ``client_key``: PEM files for mutual TLS (``client_key`` may be
  omitted when ``client_cert`` holds the key too; a key without a certificate is
  refused).
* ``headers``: fixed headers sent on every request to this provider (OpenRouter's
  ``HTTP-Referer``, ``X-Title``); a call's own header of the same name wins; a
  ``User-Agent`` here replaces the product's.

Precedence of headers on the wire: the call's headers, then the provider's fixed
headers, then ``User-Agent: omniroute/<version>``.  A ``ProviderOutbound`` is
hashable and compares by value: equal values share a route, its cached decisions, its
``SSLContext`` and its pooled connections.  ``OutboundPolicy.check(outbound)`` builds
the TLS context at once and raises ``ValueError`` for unreadable files (for config
validation); otherwise a bad file fails the provider's calls as a connection error.

* ``verify``: False turns certificate and host-name verification off for this
  provider's calls only (spec 10 §4: debug only; validation refuses it, the
  snapshot ignores it and a system check reports it unless ``DJANGO_DEBUG=1``).  The
  process policy itself always verifies.
"""

from __future__ import annotations

import base64
import ipaddress
import os
import ssl
import threading
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from importlib import metadata
from typing import Final
from urllib.parse import unquote, urlsplit

__all__ = [
    "NoProxy",
    "OutboundPolicy",
    "ProviderOutbound",
    "Proxy",
    "ProxyRules",
    "Route",
    "TLSConfig",
    "product_version",
    "user_agent",
]

DIRECT: Final = "none"  # ProviderOutbound.proxy_url that turns proxies off
ALPN_HTTP11: Final = "http/1.1"
_DEFAULT_PORTS: Final = {"http": 80, "https": 443}
_MAX_ROUTES: Final = 256


def product_version() -> str:
    """The installed version of the product ("0" when not installed)."""
    return _VERSION[0]


def _installed_version() -> str:
    try:
        return metadata.version("omniroute")
    except metadata.PackageNotFoundError:
        return "0"


_VERSION: Final = (_installed_version(),)


def user_agent() -> str:
    """``omniroute/<installed version>`` (spec 10 §4)."""
    return f"omniroute/{product_version()}"


# --- per-provider values ----------------------------------------------------------


class FrozenHeaders(Mapping[str, str]):
    """An immutable, hashable header map (insertion order kept, names as given)."""

    __slots__ = ("_hash", "_items")

    def __init__(self, items: Mapping[str, str]) -> None:
        pairs = tuple((str(k), str(v)) for k, v in items.items())
        for name, value in pairs:
            if (
                not name
                or any(c in name for c in "\r\n:")
                or "\r" in value
                or ("\n" in value)
            ):
                raise ValueError(f"invalid fixed header {name!r}")
            try:
                (name + value).encode("latin-1")
            except UnicodeEncodeError:
                raise ValueError(f"fixed header {name!r} is not Latin-1") from None
        self._items = pairs
        self._hash = hash(pairs)

    def __getitem__(self, key: str) -> str:
        lower = key.lower()
        for name, value in self._items:
            if name.lower() == lower:
                return value
        raise KeyError(key)

    def __iter__(self) -> Iterator[str]:
        return (name for name, _ in self._items)

    def __len__(self) -> int:
        return len(self._items)

    def __hash__(self) -> int:
        return self._hash

    def __eq__(self, other: object) -> bool:
        if isinstance(other, FrozenHeaders):
            return self._items == other._items
        return NotImplemented

    def __repr__(self) -> str:
        return f"FrozenHeaders({dict(self._items)!r})"


@dataclass(frozen=True, slots=True, repr=False)
class ProviderOutbound:
    """One provider's outbound overrides; None everywhere = the process policy."""

    proxy_url: str | None = None  # None: environment; "none": direct; else a proxy
    ca_bundle: str | None = None  # PEM, trusted in addition, this provider only
    client_cert: str | None = None  # PEM, mutual TLS
    client_key: str | None = None  # PEM (None: in client_cert)
    headers: Mapping[str, str] | None = None  # fixed headers, frozen on construction
    verify: bool = True  # False: no certificate check (debug only, spec 10 §4)
    _proxy: Proxy | None = field(default=None, init=False, compare=False)
    _hash: int = field(default=0, init=False, compare=False)

    def __post_init__(self) -> None:
        proxy_url = self.proxy_url
        if proxy_url is not None and proxy_url.strip().lower() != DIRECT:
            object.__setattr__(self, "_proxy", Proxy.parse(proxy_url, "proxy_url"))
        if self.client_key and not self.client_cert:
            raise ValueError("client_key is set without client_cert")
        headers = self.headers
        if headers is not None and not isinstance(headers, FrozenHeaders):
            object.__setattr__(self, "headers", FrozenHeaders(headers))
        object.__setattr__(
            self,
            "_hash",
            hash(
                (
                    self.proxy_url,
                    self.ca_bundle,
                    self.client_cert,
                    self.client_key,
                    self.headers,
                    self.verify,
                )
            ),
        )

    def __hash__(self) -> int:
        return self._hash

    @property
    def is_direct(self) -> bool:
        proxy_url = self.proxy_url
        return proxy_url is not None and proxy_url.strip().lower() == DIRECT

    def __repr__(self) -> str:
        shown = []
        if self.proxy_url is not None:
            proxy = self._proxy
            shown.append(f"proxy={proxy!r}" if proxy else "proxy=none")
        for name in ("ca_bundle", "client_cert", "client_key"):
            value = getattr(self, name)
            if value is not None:
                shown.append(f"{name}={value!r}")
        if self.headers:
            shown.append(f"headers={sorted(self.headers)!r}")
        if not self.verify:
            shown.append("verify=False")
        return f"ProviderOutbound({', '.join(shown)})"


# --- proxies ----------------------------------------------------------------------


@dataclass(frozen=True, slots=True, repr=False)
class Proxy:
    """An HTTP proxy; ``authorization``: the ``Proxy-Authorization`` value (secret)."""

    host: str
    port: int
    authorization: str | None = None

    @classmethod
    def parse(cls, url: str, source: str) -> Proxy:
        """``http://[user:password@]host[:port]``; ``source`` names it in errors."""
        text = url.strip()
        if "://" not in text:
            text = f"http://{text}"
        try:
            parts = urlsplit(text)
            port = parts.port
        except ValueError:
            raise ValueError(f"{source}: not a proxy URL") from None
        scheme = parts.scheme.lower()
        if scheme != "http":
            raise ValueError(
                f"{source}: proxy scheme {scheme!r} is not supported (only http://)"
            )
        host = parts.hostname
        if not host:
            raise ValueError(f"{source}: no host in the proxy URL")
        if parts.path not in ("", "/") or parts.query or parts.fragment:
            raise ValueError(f"{source}: a proxy URL has no path")
        authorization = None
        if parts.username is not None or parts.password is not None:
            user = unquote(parts.username or "")
            password = unquote(parts.password or "")
            token = base64.b64encode(f"{user}:{password}".encode()).decode("ascii")
            authorization = f"Basic {token}"
        return cls(host.lower(), 80 if port is None else port, authorization)

    @property
    def address(self) -> str:
        """``host:port`` (brackets around an IPv6 host), never the credentials."""
        shown = f"[{self.host}]" if ":" in self.host else self.host
        return f"{shown}:{self.port}"

    @property
    def url(self) -> str:
        """``http://host:port``, never the credentials."""
        return f"http://{self.address}"

    def __repr__(self) -> str:
        extra = ", with credentials" if self.authorization else ""
        return f"Proxy({self.url}{extra})"


@dataclass(frozen=True, slots=True)
class _NoProxyEntry:
    domain: str | None  # a domain (matches itself and subdomains), or None
    network: ipaddress.IPv4Network | ipaddress.IPv6Network | None
    port: int | None


@dataclass(frozen=True, slots=True)
class NoProxy:
    """The parsed ``NO_PROXY`` list (see the module docstring for its syntax)."""

    entries: tuple[_NoProxyEntry, ...] = ()
    everything: bool = False

    @classmethod
    def parse(cls, value: str | None) -> NoProxy:
        if not value:
            return cls()
        entries: list[_NoProxyEntry] = []
        for raw in value.replace(",", " ").split():
            item = raw.strip().lower()
            if item == "*":
                return cls(everything=True)
            entry = _no_proxy_entry(item)
            if entry is not None:
                entries.append(entry)
        return cls(tuple(entries))

    def matches(self, host: str, port: int) -> bool:
        if self.everything:
            return True
        if not self.entries:
            return False
        name = host.lower().strip("[]").rstrip(".")
        try:
            ip: ipaddress.IPv4Address | ipaddress.IPv6Address | None
            ip = ipaddress.ip_address(name)
        except ValueError:
            ip = None
        for entry in self.entries:
            if entry.port is not None and entry.port != port:
                continue
            if entry.network is not None:
                if _in_network(ip, entry.network):
                    return True
            elif entry.domain is not None and (
                name == entry.domain or name.endswith(f".{entry.domain}")
            ):
                return True
        return False


def _in_network(
    ip: ipaddress.IPv4Address | ipaddress.IPv6Address | None,
    network: ipaddress.IPv4Network | ipaddress.IPv6Network,
) -> bool:
    return ip is not None and ip.version == network.version and ip in network


def _no_proxy_entry(item: str) -> _NoProxyEntry | None:
    port: int | None = None
    if item.startswith("["):  # [v6] or [v6]:port
        address, _, rest = item[1:].partition("]")
        if rest.startswith(":") and rest[1:].isdigit():
            port = int(rest[1:])
        item = address
    elif item.count(":") == 1:  # host:port (a bare IPv6 address has several)
        name, _, maybe_port = item.partition(":")
        if maybe_port.isdigit():
            item, port = name, int(maybe_port)
    try:
        network = ipaddress.ip_network(item, strict=False)
    except ValueError:
        domain = item.removeprefix("*").lstrip(".").rstrip(".")
        return _NoProxyEntry(domain, None, port) if domain else None
    return _NoProxyEntry(None, network, port)


def _first(environ: Mapping[str, str], name: str) -> tuple[str, str] | None:
    """The lower-case variable if set and non-empty, else the upper-case one."""
    for candidate in (name.lower(), name.upper()):
        value = environ.get(candidate)
        if value and value.strip():
            return candidate, value
    return None


@dataclass(frozen=True, slots=True)
class ProxyRules:
    """Which proxy, if any, each URL goes through."""

    http: Proxy | None = None
    https: Proxy | None = None
    no_proxy: NoProxy = NoProxy()

    @classmethod
    def from_environ(cls, environ: Mapping[str, str]) -> ProxyRules:
        """``HTTP(S)_PROXY``, ``ALL_PROXY``, ``NO_PROXY`` (lower case wins)."""
        found_all = _first(environ, "all_proxy")
        fallback = Proxy.parse(found_all[1], found_all[0]) if found_all else None
        chosen: dict[str, Proxy | None] = {}
        for scheme in ("http", "https"):
            found = _first(environ, f"{scheme}_proxy")
            chosen[scheme] = Proxy.parse(found[1], found[0]) if found else fallback
        found_no = _first(environ, "no_proxy")
        return cls(
            chosen["http"],
            chosen["https"],
            NoProxy.parse(found_no[1] if found_no else None),
        )

    def proxy_for(self, scheme: str, host: str, port: int) -> Proxy | None:
        proxy = self.https if scheme == "https" else self.http
        if proxy is None or self.no_proxy.matches(host, port):
            return None
        return proxy


# --- trust ------------------------------------------------------------------------


_TLSIdentity = tuple[str | None, str | None, str | None, bool]
_PROCESS_TLS: Final[_TLSIdentity] = (None, None, None, True)


class TLSConfig:
    """One TLS identity (extra CA bundle, client certificate and key, whether the
    server is verified); its ``SSLContext`` is built on first use and cached.
    Interned by the policy, so identity is equality (a connection pool key part)."""

    __slots__ = (
        "_context",
        "_lock",
        "_policy",
        "ca_bundle",
        "client_cert",
        "client_key",
        "verify",
    )

    def __init__(
        self,
        policy: OutboundPolicy,
        ca_bundle: str | None,
        client_cert: str | None,
        client_key: str | None,
        verify: bool = True,
    ) -> None:
        self._policy = policy
        self.ca_bundle = ca_bundle
        self.client_cert = client_cert
        self.client_key = client_key
        self.verify = verify
        self._context: ssl.SSLContext | None = None
        self._lock = threading.Lock()

    def new_context(self) -> ssl.SSLContext:
        """A context of its own with the same trust and identity, for a client that
        changes its context per connection (httpcore sets the ALPN list on every
        connect, which must not race another thread's handshake on a shared one)."""
        return self._policy._build_context(self)

    def context(self) -> ssl.SSLContext:
        """The shared context (built once; raises ``OSError``/``ssl.SSLError``/
        ``ValueError`` when a file cannot be used, and again on the next call)."""
        context = self._context
        if context is None:
            with self._lock:
                context = self._context
                if context is None:
                    context = self._context = self._policy._build_context(self)
        return context

    def __repr__(self) -> str:
        return (
            f"TLSConfig(ca_bundle={self.ca_bundle!r}, client_cert="
            f"{self.client_cert!r}, client_key={self.client_key!r}, "
            f"verify={self.verify!r})"
        )


class Route:
    """What one ``ProviderOutbound`` (or None) means under a policy: the proxy of each
    URL, the TLS identity and the default headers.  Built once per distinct value."""

    __slots__ = ("_direct", "_proxy", "_rules", "headers", "outbound", "tls")

    def __init__(
        self,
        outbound: ProviderOutbound | None,
        rules: ProxyRules,
        tls: TLSConfig,
        headers: tuple[tuple[str, str], ...],
    ) -> None:
        self.outbound = outbound
        self._rules = rules
        self._direct = outbound is not None and outbound.is_direct
        self._proxy = outbound._proxy if outbound is not None else None
        self.tls = tls
        #: sent on every request unless the call sets the same name (names as given)
        self.headers = headers

    def proxy_for(
        self, scheme: str, host: str, port: int | None = None
    ) -> Proxy | None:
        """The proxy a request to ``scheme://host:port`` goes through, or None."""
        if self._direct:
            return None
        if self._proxy is not None:
            return self._proxy
        if port is None:
            port = _DEFAULT_PORTS.get(scheme, 0)
        return self._rules.proxy_for(scheme, host, port)

    def __repr__(self) -> str:
        return f"Route({self.outbound!r})"


class OutboundPolicy:
    """Proxies, the trust store and the product's identity; see the module docstring.

    ``ssl_context`` (tests, and ``UpstreamClient`` without a policy) replaces the
    built contexts: it is used as given for every route, and a route that asks for
    its own CA bundle, client certificate or ``verify`` is refused (``ValueError``).
    """

    def __init__(
        self,
        *,
        proxies: ProxyRules | None = None,
        ca_bundle: str | None = None,
        user_agent: str | None = None,
        ssl_context: ssl.SSLContext | None = None,
    ) -> None:
        self.proxies = proxies or ProxyRules()
        self.ca_bundle = ca_bundle
        self.user_agent = user_agent
        self._ssl_context = ssl_context
        self._tls: dict[_TLSIdentity, TLSConfig] = {}
        self._routes: dict[ProviderOutbound | None, Route] = {}
        self._lock = threading.Lock()

    @classmethod
    def from_environment(
        cls,
        environ: Mapping[str, str] | None = None,
        *,
        ca_bundle: str | None = None,
        user_agent: str | None = None,
    ) -> OutboundPolicy:
        """The proxies of ``environ`` (``os.environ`` by default)."""
        rules = ProxyRules.from_environ(os.environ if environ is None else environ)
        return cls(proxies=rules, ca_bundle=ca_bundle, user_agent=user_agent)

    def route(self, outbound: ProviderOutbound | None = None) -> Route:
        """The route of a provider's values (None: the process defaults); cached."""
        route = self._routes.get(outbound)
        if route is None:
            with self._lock:
                route = self._routes.get(outbound)
                if route is None:
                    if len(self._routes) >= _MAX_ROUTES:
                        self._routes.clear()
                    route = self._routes[outbound] = self._new_route(outbound)
        return route

    def check(self, outbound: ProviderOutbound) -> None:
        """Build the provider's TLS context now; ``ValueError`` if it cannot be."""
        try:
            self.route(outbound).tls.context()
        except (OSError, ssl.SSLError, ValueError) as exc:
            raise ValueError(f"TLS settings unusable: {exc}") from exc

    def _new_route(self, outbound: ProviderOutbound | None) -> Route:
        fixed: Mapping[str, str] = {}
        identity = _PROCESS_TLS
        if outbound is not None:
            fixed = outbound.headers or {}
            identity = (
                outbound.ca_bundle,
                outbound.client_cert,
                outbound.client_key,
                outbound.verify,
            )
        if self._ssl_context is not None and identity != _PROCESS_TLS:
            raise ValueError("a fixed ssl_context cannot take a provider's TLS files")
        headers = list(fixed.items())
        if self.user_agent and not any(k.lower() == "user-agent" for k in fixed):
            headers.append(("User-Agent", self.user_agent))
        tls = self._tls.get(identity)
        if tls is None:
            tls = self._tls[identity] = TLSConfig(self, *identity)
        return Route(outbound, self.proxies, tls, tuple(headers))

    def _build_context(self, tls: TLSConfig) -> ssl.SSLContext:
        if self._ssl_context is not None:
            return self._ssl_context
        if self.ca_bundle:
            context = ssl.create_default_context(cafile=self.ca_bundle)
        else:  # the system store (OpenSSL's default paths)
            context = ssl.create_default_context()
        if tls.ca_bundle:
            context.load_verify_locations(cafile=tls.ca_bundle)
        if tls.client_cert:
            context.load_cert_chain(tls.client_cert, tls.client_key)
        if not tls.verify:  # a provider's debug-only ``verify: false`` (spec 10 §4)
            context.check_hostname = False
            context.verify_mode = ssl.CERT_NONE
        context.set_alpn_protocols([ALPN_HTTP11])
        return context
