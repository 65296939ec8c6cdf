"""The one validator of configuration objects (spec 07, 02 §13, 03 §2, 04, 05).

Every write path — the YAML import, the admin forms and the REST API — hands the
object in its YAML shape (snake_case, ``config`` camelCase) to these functions and
gets back a normalised copy plus ``Problem``s that carry the path of the offending
field (``combos[2].targets[0].model: unknown provider 'opena'``).  Nothing here
touches the database: referential checks read a ``ConfigIndex`` built by the caller.
"""

from __future__ import annotations

import datetime
import logging
import math
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

from gateway.dialects import REGISTRY, WIRES, wires_of
from gateway.dialects.azure import DEPLOYMENT
from gateway.kernel.autoids import UnknownAutoVariant, is_auto_id, parse_auto_id
from gateway.kernel.errors import RETRYABLE_REASONS
from gateway.kernel.globs import compile_glob
from providers.outbound_policy import Proxy
from providers.presets import PRESETS, Preset

COMBO_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:-]{0,63}$")
SLUG = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")
CONNECTION_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:-]{0,63}$")
#: an upstream model id (spec 07 ``models[].id``): what upstreams name their models
#: with (``gpt-5-nano``, ``meta-llama/Llama-3-8b``, ``claude-sonnet-4@20250514``,
#: ``us.anthropic.claude-3:0``, ``openai/gpt-4o:free``); no spaces or punctuation
#: that a model string cannot carry
MODEL_ID = re.compile(r"^[A-Za-z0-9~][A-Za-z0-9._:/@+~-]{0,255}$")
#: connection priority (spec 07: "lower first"): 0 is the default and the first
PRIORITY_RANGE = (0, 1_000_000)
RESERVED = frozenset({"auto", "combo"})
_NAME_RULE = "letters, digits, '.', '_', '-'{colon}, starting with a letter or digit"
#: what each name pattern allows, in words (issue #15: errors never show a regex)
PATTERN_TEXT: dict[str, str] = {
    SLUG.pattern: _NAME_RULE.format(colon=""),
    COMBO_NAME.pattern: _NAME_RULE.format(colon=" and ':'"),
    CONNECTION_NAME.pattern: _NAME_RULE.format(colon=" and ':'"),
    DEPLOYMENT.pattern: _NAME_RULE.format(colon="") + " (at most 64)",
    MODEL_ID.pattern: "letters, digits and '.', '_', '-', ':', '/', '@', '+', '~', "
    "no spaces, starting with a letter, digit or '~' (at most 256)",
}
MAX_TARGETS = 16
MAX_COMBO_DEPTH = 3
ON_ORDER = tuple(r.value for r in RETRYABLE_REASONS)
CAPABILITIES = ("tools", "vision", "reasoning", "json", "embeddings")
#: what no column can store: NUL (PostgreSQL text) and unpaired surrogates (UTF-8)
UNSTORABLE = re.compile("[\x00\ud800-\udfff]")
UNSTORABLE_MESSAGE = "must not contain NUL or unpaired surrogate characters"
_MAX_WALK_DEPTH = 200

logger = logging.getLogger(__name__)


def http_url(value: str) -> bool:
    """An http(s) URL with a host (and a port, if any, that parses)."""
    if not re.match(r"^https?://[^\s/]+", value) or re.search(r"\s", value):
        return False
    try:
        parts = urlsplit(value)
        port_ok = parts.port is None or parts.port > 0
    except ValueError:  # "http://[::1", "http://h:99999"
        return False
    return bool(parts.hostname) and port_ok


def unstorable_path(value: Any, path: str = "", depth: int = 0) -> str | None:
    """The path of the first string (or mapping key) in ``value`` that no column
    can store, else None; ``path`` is the dotted path of ``value`` itself."""
    if depth > _MAX_WALK_DEPTH:
        return None
    if isinstance(value, str):
        return path if UNSTORABLE.search(value) else None
    if isinstance(value, dict):
        for key, item in value.items():
            here = f"{path}.{key}" if path else str(key)
            if isinstance(key, str) and UNSTORABLE.search(key):
                return path or "(a key)"
            found = unstorable_path(item, here, depth + 1)
            if found is not None:
                return found
    if isinstance(value, list):
        for index, item in enumerate(value):
            found = unstorable_path(item, f"{path}[{index}]", depth + 1)
            if found is not None:
                return found
    return None


@dataclass(frozen=True, slots=True)
class Problem:
    path: str
    message: str

    def __str__(self) -> str:
        return f"{self.path}: {self.message}" if self.path else self.message


@dataclass(slots=True)
class ConfigIndex:
    """What references may point at: providers, their connections and models, combos."""

    #: lower-cased slug -> (canonical slug, connection names, model ids)
    providers: dict[str, tuple[str, set[str], set[str]]] = field(default_factory=dict)
    #: lower-cased combo name -> (canonical name, strategy, referenced names (lower))
    combos: dict[str, tuple[str, str, list[str]]] = field(default_factory=dict)
    smart_aliases: set[str] = field(default_factory=set)
    #: a stored smart route's ``easy``/``hard`` target -> that route's alias
    smart_targets: dict[str, str] = field(default_factory=dict)
    api_keys: set[str] = field(default_factory=set)
    #: model-to-combo mapping globs (spec 03 §1.1 step 4)
    mapping_patterns: set[str] = field(default_factory=set)

    def drop_smart_route(self, alias: str) -> None:
        """Forget a stored smart route that is being replaced or edited."""
        self.smart_aliases.discard(alias)
        self.smart_targets = {
            target: owner
            for target, owner in self.smart_targets.items()
            if owner != alias
        }

    def model_exists(self, provider_model: str) -> bool:
        slug, sep, model = provider_model.partition("/")
        entry = self.providers.get(slug.lower())
        return bool(sep and entry and model in entry[2])

    def bare_model_owner(self, name: str) -> tuple[str, str] | None:
        """(first provider slug, catalog spelling) of a bare id, ignoring case."""
        for slug, _conns, models in sorted(self.providers.values()):
            for model in sorted(models):
                if model.lower() == name.lower():
                    return slug, model
        return None

    def resolves(self, text: str) -> bool:
        """Whether ``text`` names something spec 03 §1.1 can resolve (no health),
        a model-to-combo mapping included."""
        return self.resolved_name(text) is not None or any(
            compile_glob(pattern).fullmatch(text) for pattern in self.mapping_patterns
        )

    def resolved_name(self, text: str) -> str | None:
        """The resolved form of ``text`` (spec 03 §1.2), as the engine computes it:
        a combo's canonical name, an auto route id, ``provider/model`` in catalog
        spelling, or ``*/<id>`` for a bare id several providers serve; None when
        ``text`` does not resolve (mappings and smart aliases aside)."""
        lowered = text.lower()
        if lowered in self.combos:
            return self.combos[lowered][0]
        if lowered.startswith("combo/"):
            entry = self.combos.get(lowered[len("combo/") :])
            return entry[0] if entry else None
        if is_auto_id(text):
            try:
                return parse_auto_id(text)
            except UnknownAutoVariant:
                return None
        return self._model_form(text)

    def _model_form(self, text: str) -> str | None:
        """Steps 6-7 of spec 03 §1.1: ``provider/model``, else a bare id."""
        slug, sep, rest = text.partition("/")
        if sep and rest and slug.lower() in self.providers:
            canonical, _conns, models = self.providers[slug.lower()]
            model = _catalog_spelling(models, rest)
            return f"{canonical}/{model}" if model else None
        owners = [
            (canonical, model)
            for canonical, _conns, models in sorted(
                self.providers.values(), key=lambda entry: entry[0].lower()
            )
            if (model := _catalog_spelling(models, text)) is not None
        ]
        if not owners:
            return None
        canonical, model = owners[0]
        return f"{canonical}/{model}" if len(owners) == 1 else f"*/{model}"


def _catalog_spelling(models: set[str], name: str) -> str | None:
    """Exact id, else the one id equal ignoring case (spec 03 §1.1, steps 6-7)."""
    if name in models:
        return name
    folded = [m for m in models if m.lower() == name.lower()]
    return folded[0] if len(folded) == 1 else None


class Checker:
    """Collects problems while walking one object."""

    def __init__(self, base: str) -> None:
        self.base = base
        self.problems: list[Problem] = []
        self.warnings: list[Problem] = []

    def path(self, name: str) -> str:
        if not self.base or not name:
            return self.base or name
        return f"{self.base}{name}" if name.startswith("[") else f"{self.base}.{name}"

    def error(self, name: str, message: str) -> None:
        self.problems.append(Problem(self.path(name), message))

    def warn(self, name: str, message: str) -> None:
        self.warnings.append(Problem(self.path(name), message))

    def unknown_keys(
        self, data: dict[str, Any], allowed: set[str] | frozenset[str], prefix: str = ""
    ) -> None:
        for key in data:
            if key not in allowed:
                self.error(f"{prefix}{key}", "unknown key")

    def string(
        self,
        data: dict[str, Any],
        name: str,
        *,
        required: bool = False,
        pattern: re.Pattern[str] | None = None,
        max_len: int = 300,
    ) -> str | None:
        value = data.get(name)
        if value is None:
            if required:
                self.error(name, "is required")
            return None
        if not isinstance(value, str) or (required and value == ""):
            self.error(
                name, "must be a non-empty string" if required else "must be a string"
            )
            return None
        if len(value) > max_len:
            self.error(name, f"must be at most {max_len} characters")
            return None
        if UNSTORABLE.search(value):
            self.error(name, UNSTORABLE_MESSAGE)
            return None
        if pattern is not None and not pattern.fullmatch(value):
            allowed = PATTERN_TEXT.get(pattern.pattern, "see the documentation")
            self.error(name, f"'{value}' is not allowed here: use {allowed}")
            return None
        return value

    def boolean(self, data: dict[str, Any], name: str, default: bool) -> bool:
        value = data.get(name, default)
        if not isinstance(value, bool):
            self.error(name, "must be true or false")
            return default
        return value

    def integer(
        self,
        data: dict[str, Any],
        name: str,
        low: int | None = None,
        high: int | None = None,
        *,
        default: int | None = None,
    ) -> int | None:
        value = data.get(name)
        if value is None:
            return default
        if isinstance(value, bool) or not (
            isinstance(value, int) or (isinstance(value, float) and value.is_integer())
        ):
            self.error(name, "must be an integer")
            return default
        if isinstance(value, float):
            value = data[name] = int(value)  # stored as the integer it is: 2.0 -> 2
        if (low is not None and value < low) or (high is not None and value > high):
            self.error(name, _range_text(low, high))
            return default
        return value

    def number(
        self,
        data: dict[str, Any],
        name: str,
        low: float | None = None,
        high: float | None = None,
        *,
        default: float | None = None,
        exclusive_low: bool = False,
        exclusive_high: bool = False,
    ) -> float | None:
        value = data.get(name)
        if value is None:
            return default
        if (
            isinstance(value, bool)
            or not isinstance(value, int | float)
            or not (math.isfinite(value))
        ):
            self.error(name, "must be a number")
            return default
        too_low = low is not None and (value <= low if exclusive_low else value < low)
        too_high = high is not None and (
            value >= high if exclusive_high else value > high
        )
        if too_low or too_high:
            self.error(name, _range_text(low, high, exclusive_low, exclusive_high))
            return default
        return float(value)

    def choice(
        self,
        data: dict[str, Any],
        name: str,
        choices: tuple[str, ...],
        *,
        default: str | None = None,
        required: bool = False,
    ) -> str | None:
        value = data.get(name)
        if value is None:
            if required:
                self.error(name, "is required")
            return default
        if value not in choices:
            self.error(name, f"must be one of: {', '.join(choices)}")
            return default
        return str(value)

    def string_list(self, data: dict[str, Any], name: str) -> list[str] | None:
        value = data.get(name)
        if value is None:
            return None
        if not isinstance(value, list) or not all(
            isinstance(v, str) and v for v in value
        ):
            self.error(name, "must be a list of non-empty strings")
            return None
        return list(value)


def plain_number(value: float) -> str:
    """A number as a person writes it: ``1 000 000``, ``3 600 000``, ``0.5``."""
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, int):
        return f"{value:,}".replace(",", " ")
    return repr(value)


def _range_text(
    low: float | None, high: float | None, xl: bool = False, xh: bool = False
) -> str:
    """The allowed range in words (issue #15): "must be between 0 and 1 000 000"."""
    if low is not None and high is not None:
        if not xl and not xh:
            return f"must be between {plain_number(low)} and {plain_number(high)}"
        left = "more than" if xl else "at least"
        right = "less than" if xh else "at most"
        return f"must be {left} {plain_number(low)} and {right} {plain_number(high)}"
    if low is not None:
        return f"must be {'more than' if xl else 'at least'} {plain_number(low)}"
    return f"must be {'less than' if xh else 'at most'} {plain_number(high or 0)}"


def require_mapping(
    value: Any, path: str
) -> tuple[dict[str, Any] | None, list[Problem]]:
    if isinstance(value, dict):
        return value, []
    return None, [Problem(path, "must be a mapping")]


# ---------------------------------------------------------------- providers

PROVIDER_KEYS = frozenset(
    {
        "slug",
        "kind",
        "base_url",
        "wire",
        "connections",
        "models",
        "preset",
        "proxy_url",
        "ca_bundle",
        "client_cert",
        "client_key",
        "headers",
        "models_dev_id",
        "verify",
    }
)
#: every kind's credential fields (spec 10 §3): a connection's secrets and plain
#: settings, a provider's plain settings; which belong to which kind is the kind's
CREDENTIAL_SECRETS = frozenset(
    name for d in REGISTRY.values() for name in d.credentials.secrets
)
CREDENTIAL_SETTINGS = frozenset(
    name for d in REGISTRY.values() for name in d.credentials.settings
)
PROVIDER_CREDENTIAL_SETTINGS = frozenset(
    name for d in REGISTRY.values() for name in d.credentials.provider_settings
)
PROVIDER_KEYS = PROVIDER_KEYS | PROVIDER_CREDENTIAL_SETTINGS
#: every wire some kind is spoken over (spec 10 §5)
ALL_WIRES = tuple(dict.fromkeys(wire for _, wire in WIRES))
CONNECTION_KEYS = frozenset(
    {
        "name",
        "api_key",
        "tier",
        "default_model",
        "active",
        "priority",
        "quota",
        "max_concurrency",
    }
) | (CREDENTIAL_SECRETS | CREDENTIAL_SETTINGS)
MODEL_KEYS = frozenset(
    {
        "id",
        "input_cost",
        "output_cost",
        "cache_read_cost",
        "cache_write_cost",
        "context_window",
        "max_output_tokens",
        "capabilities",
        "tier",
        "wire",
        "deployment",
    }
)
#: plain settings that say where a credential is sent (the Entra authority): REST
#: and the admin treat a change like a change of the secret (spec 08 §5.3)
SECRET_ROUTING_SETTINGS = frozenset({"authority_host"})
#: the kinds whose models may name a ``deployment`` (spec 10 §1)
DEPLOYMENT_KINDS = frozenset({"azure"})
SECRET_MASK = "***"
VERIFY_OFF = (
    "TLS verification is OFF for this provider: any certificate is accepted "
    "(debug only, never in production)"
)


def _preset(data: dict[str, Any], check: Checker) -> Preset | None:
    name = check.choice(data, "preset", tuple(PRESETS))
    if name is None:
        return None
    preset = PRESETS[name]
    if preset.kind not in REGISTRY:
        check.error(
            "preset",
            f"needs kind '{preset.kind}', which this gateway does not have yet",
        )
        return None
    return preset


def _base_url(
    data: dict[str, Any], check: Checker, kind: str | None, preset: Preset | None
) -> str | None:
    base_url = check.string(data, "base_url", max_len=500)
    if not base_url and preset is not None:
        base_url = preset.base_url
    if kind is not None and REGISTRY[kind].needs_base_url:
        if not base_url:
            check.error("base_url", "is required for this kind")
        elif not http_url(base_url):
            check.error("base_url", "must be an http or https URL")
    elif base_url and not http_url(base_url):
        check.error("base_url", "must be an http or https URL")
    return base_url


def validate_provider(data: dict[str, Any], check: Checker) -> dict[str, Any]:
    check.unknown_keys(data, PROVIDER_KEYS)
    slug = check.string(data, "slug", required=True, pattern=SLUG, max_len=64)
    if slug is not None and slug.lower() in RESERVED:
        check.error("slug", f"'{slug}' is reserved")
    preset = _preset(data, check)  # spec 10 §2: what is given overrides it
    kind = check.choice(data, "kind", tuple(REGISTRY), required=preset is None)
    if kind is None and preset is not None:
        kind = preset.kind
    base_url = _base_url(data, check, kind, preset)
    out: dict[str, Any] = {"slug": slug, "kind": kind, "base_url": base_url or ""}
    out["preset"] = data.get("preset") if preset is not None else ""
    out["settings"] = _outbound_settings(data, check)
    if preset is not None and preset.models_dev_id:
        out["settings"].setdefault("models_dev_id", preset.models_dev_id)
    out["proxy_url"] = _proxy_url(data, check)
    wires = wires_of(kind) if kind is not None else ALL_WIRES
    out["wire"] = check.choice(data, "wire", wires, default="chat") or "chat"
    if kind is not None:
        _provider_credential_settings(data, kind, out["settings"], check)

    def connection(item: dict[str, Any], sub: Checker) -> dict[str, Any]:
        return validate_connection(
            item, sub, kind=kind, provider_settings=out["settings"]
        )

    out["connections"] = _list_of(data, "connections", check, connection, key="name")
    out["models"] = _list_of(data, "models", check, validate_model, key="id")
    for index, model in enumerate(out["models"]):
        if model.get("wire") and kind is not None and model["wire"] not in wires:
            check.error(
                f"models[{index}].wire",
                f"must be one of: {', '.join(wires)} (kind '{kind}')",
            )
        if (
            model.get("deployment")
            and kind is not None
            and kind not in DEPLOYMENT_KINDS
        ):
            check.error(
                f"models[{index}].deployment", f"not a setting of kind '{kind}'"
            )
    return out


_HEADER_NAME = re.compile(r"^[!#$%&'*+.^_`|~0-9A-Za-z-]{1,100}$")
MAX_FIXED_HEADERS = 50


def _outbound_settings(data: dict[str, Any], check: Checker) -> dict[str, Any]:
    """``ca_bundle``, ``client_cert``, ``client_key`` (readable files), ``headers``
    (a mapping of header names to values), ``models_dev_id`` and ``verify``
    (spec 10 §4, §5)."""
    found: dict[str, Any] = {}
    for name in ("ca_bundle", "client_cert", "client_key"):
        path = check.string(data, name, max_len=500)
        if path is None:
            continue
        if not os.path.isfile(path) or not os.access(path, os.R_OK):
            check.error(name, f"cannot read {path}")
        found[name] = path
    if ("client_cert" in found) != ("client_key" in found):
        check.error("client_key", "client_cert and client_key go together")
    headers = _fixed_headers(data.get("headers"), check)
    if headers is not None:
        found["headers"] = headers
    models_dev_id = check.string(data, "models_dev_id", max_len=100)
    if models_dev_id:
        found["models_dev_id"] = models_dev_id
    if not check.boolean(data, "verify", True):
        _verify_off(data, found, check)
    return found


def _fixed_headers(headers: Any, check: Checker) -> dict[str, str] | None:
    """The provider's ``headers`` mapping, or None (absent or refused)."""
    if headers is None:
        return None
    if not isinstance(headers, dict) or len(headers) > MAX_FIXED_HEADERS:
        check.error("headers", f"must be a mapping of at most {MAX_FIXED_HEADERS}")
        return None
    bad = False
    for name, value in headers.items():
        if not isinstance(name, str) or not _HEADER_NAME.match(name):
            check.error("headers", f"'{name}' is not a header name")
            bad = True
        elif not isinstance(value, str) or re.search(r"[\r\n\x00]", value):
            check.error(f"headers.{name}", "must be a one-line string")
            bad = True
    return None if bad else dict(headers)


def _verify_off(data: dict[str, Any], found: dict[str, Any], check: Checker) -> None:
    """``verify: false`` (spec 10 §4): only with ``DJANGO_DEBUG=1``, and loudly."""
    from django.conf import settings

    if not settings.DEBUG:
        check.error("verify", "false is allowed only with DJANGO_DEBUG=1")
        return
    found["verify"] = False
    check.warn("verify", VERIFY_OFF)
    logger.warning("provider %r: %s", data.get("slug"), VERIFY_OFF)


def _proxy_url(data: dict[str, Any], check: Checker) -> str | None:
    """``none``, or an ``http://[user:password@]host:port`` proxy (spec 10 §4): what
    the outbound policy can route through; an https or SOCKS proxy is refused here
    rather than bypassed later."""
    value = check.string(data, "proxy_url", max_len=500)
    if value is None or value in ("none", SECRET_MASK):
        return value
    try:
        Proxy.parse(value, "proxy_url")
        explicit_port = urlsplit(value).port is not None and "://" in value
    except ValueError:
        explicit_port = False
    if not explicit_port or urlsplit(value).scheme.lower() != "http":
        check.error("proxy_url", "must be none or http://[user:password@]host:port")
        return None
    return value


def _list_of(
    data: dict[str, Any], name: str, check: Checker, fn: Any, key: str
) -> list[dict[str, Any]]:
    items = data.get(name, [])
    if items is None:
        return []
    if not isinstance(items, list):
        check.error(name, "must be a list")
        return []
    result: list[dict[str, Any]] = []
    seen: set[str] = set()
    for index, item in enumerate(items):
        sub = Checker(check.path(f"{name}[{index}]"))
        if not isinstance(item, dict):
            sub.error("", "must be a mapping")
        else:
            value = fn(item, sub)
            ident = str(value.get(key) or "")
            if ident and ident.lower() in seen:
                sub.error(key, f"duplicate '{ident}'")
            seen.add(ident.lower())
            result.append(value)
        check.problems += sub.problems
        check.warnings += sub.warnings
    return result


def _dated(value: Any) -> Any:
    """A YAML date (an unquoted ``api_version: 2024-10-21``) as the text written."""
    if isinstance(value, datetime.date) and not isinstance(value, datetime.datetime):
        return value.isoformat()
    return value


def _scalar_setting(value: Any) -> bool:
    return isinstance(value, (str, bool, int, float)) and not (
        isinstance(value, str) and len(value) > MAX_SETTING_LEN
    )


MAX_SETTING_LEN = 500


def _provider_credential_settings(
    data: dict[str, Any], kind: str, settings: dict[str, Any], check: Checker
) -> None:
    """A provider's plain credential settings (``region``, ``auth_header``, …): only
    its kind's, scalars, then the kind's own checks."""
    shape = REGISTRY[kind].credentials
    for name in sorted(PROVIDER_CREDENTIAL_SETTINGS & set(data)):
        value = _dated(data[name])
        if value is None:
            continue
        if name not in shape.provider_settings:
            check.error(name, f"not a setting of kind '{kind}'")
        elif not _scalar_setting(value):
            check.error(name, "must be a string, a number or true/false")
        else:
            settings[name] = value
    for field_name, message in shape.check_provider(settings):
        check.error(field_name, message)


def _credential(
    data: dict[str, Any],
    check: Checker,
    kind: str | None,
    provider_settings: Mapping[str, Any] | None,
) -> tuple[dict[str, str], dict[str, Any]]:
    """A connection's credential fields beyond ``api_key`` (spec 10 §3): each must be
    one of its kind's; secrets are strings (a literal or ``env:NAME``), settings
    scalars; then the kind's own checks (a malformed service-account JSON, a
    missing region)."""
    shape = REGISTRY[kind].credentials if kind is not None else None
    secrets: dict[str, str] = {}
    settings: dict[str, Any] = {}
    for name in sorted((CREDENTIAL_SECRETS | CREDENTIAL_SETTINGS) & set(data)):
        value = _dated(data[name])
        if value is None:
            continue
        if shape is not None and name not in (*shape.secrets, *shape.settings):
            check.error(name, f"not a credential of kind '{kind}'")
        elif name in CREDENTIAL_SECRETS:
            problem = _secret_problem(value)
            if problem:
                check.error(name, problem)
            else:
                secrets[name] = value
        elif not _scalar_setting(value):
            check.error(name, "must be a string, a number or true/false")
        else:
            settings[name] = value
    if shape is not None:
        if not shape.api_key and data.get("api_key"):
            check.error("api_key", f"not a credential of kind '{kind}'")
        given = {**settings, **secrets}
        if shape.api_key and data.get("api_key"):
            given["api_key"] = data["api_key"]
        for field_name, message in shape.check_connection(
            given, provider_settings or {}
        ):
            check.error(field_name, message)
    return secrets, settings


def _secret_problem(value: Any) -> str | None:
    if not isinstance(value, str) or len(value) > MAX_SECRET_LEN:
        return "must be a string (a literal or env:NAME)"
    if value.startswith("env:") and not ENV_REF.fullmatch(value):
        return "env reference must look like env:NAME"
    return None


#: a service-account JSON fits comfortably; a pasted novel does not
MAX_SECRET_LEN = 20_000
ENV_REF = re.compile(r"env:[A-Za-z_][A-Za-z0-9_]{0,195}")


def validate_connection(
    data: dict[str, Any],
    check: Checker,
    *,
    kind: str | None = None,
    provider_settings: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """One connection; with its provider's ``kind`` (and settings) its credential
    fields are checked against the kind's (spec 10 §3)."""
    check.unknown_keys(data, CONNECTION_KEYS)
    out: dict[str, Any] = {
        "name": check.string(
            data, "name", required=True, pattern=CONNECTION_NAME, max_len=64
        ),
        "tier": check.choice(
            data, "tier", ("free", "standard", "pro", "ultra"), default="standard"
        ),
        "default_model": check.string(data, "default_model", max_len=256) or "",
        "active": check.boolean(data, "active", True),
        "priority": check.integer(data, "priority", *PRIORITY_RANGE, default=0),
        "max_concurrency": check.integer(
            data, "max_concurrency", 0, 1_000_000, default=0
        ),
    }
    api_key = data.get("api_key")
    if api_key is not None and not isinstance(api_key, str):
        check.error("api_key", "must be a string (a literal or env:NAME)")
        api_key = None
    if (
        isinstance(api_key, str)
        and api_key.startswith("env:")
        and not re.fullmatch(r"env:[A-Za-z_][A-Za-z0-9_]{0,195}", api_key)
    ):
        check.error(
            "api_key", "env reference must look like env:NAME (at most 200 characters)"
        )
    out["api_key"] = api_key
    out["secrets"], out["credential_settings"] = _credential(
        data, check, kind, provider_settings
    )
    quota = data.get("quota")
    out["quota"] = None
    if quota is not None:
        if not isinstance(quota, dict):
            check.error("quota", "must be a mapping")
        else:
            sub = Checker(check.path("quota"))
            sub.unknown_keys(quota, {"remaining_percent", "reset_interval_seconds"})
            out["quota"] = {
                "remaining_percent": sub.number(quota, "remaining_percent", 0, 100),
                "reset_interval_seconds": sub.integer(
                    quota, "reset_interval_seconds", 1, 31_536_000
                ),
            }
            check.problems += sub.problems
    return out


def validate_model(data: dict[str, Any], check: Checker) -> dict[str, Any]:
    check.unknown_keys(data, MODEL_KEYS)
    out: dict[str, Any] = {
        "id": check.string(data, "id", required=True, pattern=MODEL_ID, max_len=256)
    }
    for name in ("input_cost", "output_cost", "cache_read_cost", "cache_write_cost"):
        out[name] = check.number(data, name, 0, 1_000_000)
    out["context_window"] = check.integer(data, "context_window", 1, 100_000_000)
    out["max_output_tokens"] = check.integer(data, "max_output_tokens", 1, 100_000_000)
    caps = data.get("capabilities")
    out["capabilities"] = None
    if caps is not None:
        if not isinstance(caps, list) or any(c not in CAPABILITIES for c in caps):
            check.error("capabilities", f"must be a list of: {', '.join(CAPABILITIES)}")
        else:
            out["capabilities"] = [c for c in CAPABILITIES if c in caps]
    out["tier"] = (
        check.choice(
            data, "tier", ("budget", "fast", "standard", "premium"), default=""
        )
        or ""
    )
    out["wire"] = check.choice(data, "wire", ALL_WIRES, default="") or ""
    out["deployment"] = check.string(data, "deployment", pattern=DEPLOYMENT) or ""
    return out
