"""The ``vertex`` kind's credential (spec 10 §3): what a connection holds and what is
checked when it is saved, naming the field.

A connection holds ``service_account_json`` (a secret: the key file's content, or
``env:NAME`` read when used) or ``use_default_credentials: true``, not both, and a
``project`` and a ``region`` of its own or its provider's.  A literal JSON must be
a service account's key file that can mint a token (``client_email``,
``private_key`` in PEM framing, an http(s) ``token_uri``); the region must be a DNS
label, since it becomes part of the host name.  A connection given neither key nor
default credentials passes (an edit that keeps a stored key sends none; ``***`` is
the stored one): its mint is refused as ``auth``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any
from urllib.parse import urlsplit

from gateway.dialects.base import CredentialProblem, CredentialShape

#: a region is a DNS label inside the host name: nothing else may get in there
REGION = re.compile(r"^[a-z][a-z0-9-]{0,40}[a-z0-9]$")
#: a project id (6–30 characters) or a project number
PROJECT = re.compile(r"^([a-z][a-z0-9-]{4,28}[a-z0-9]|[0-9]{1,20})$")
#: what a service-account JSON must hold for a token to be minted from it
SERVICE_ACCOUNT_KEYS = ("client_email", "private_key", "token_uri")


def is_true(value: Any) -> bool:
    """``use_default_credentials`` as YAML (a bool) or the admin (text) gives it."""
    return value is True or (isinstance(value, str) and value.lower() == "true")


def service_account_problems(text: str) -> list[str]:
    """What keeps a literal service-account JSON from minting a token."""
    try:
        info = json.loads(text)
    except ValueError:
        return ["is not valid JSON (paste the key file's whole content)"]
    if not isinstance(info, dict):
        return ["must be a JSON object (a service-account key file)"]
    problems = []
    if info.get("type", "service_account") != "service_account":
        problems.append(f"has type '{info.get('type')}', not 'service_account'")
    missing = [k for k in SERVICE_ACCOUNT_KEYS if not isinstance(info.get(k), str)]
    if missing:
        problems.append(f"lacks {', '.join(missing)}")
    elif "PRIVATE KEY-----" not in info["private_key"]:
        problems.append("private_key is not a PEM private key")
    elif urlsplit(info["token_uri"]).scheme not in ("http", "https"):
        problems.append("token_uri must be an http(s) URL")
    return problems


def _check_location(settings: Mapping[str, Any]) -> list[CredentialProblem]:
    problems: list[CredentialProblem] = []
    region = settings.get("region")
    if region not in (None, "") and not (
        isinstance(region, str) and REGION.fullmatch(region)
    ):
        problems.append(("region", "must be a region name such as us-central1"))
    project = settings.get("project")
    if project not in (None, "") and not (
        isinstance(project, str) and PROJECT.fullmatch(project)
    ):
        problems.append(("project", "must be a Google Cloud project id"))
    return problems


def check_provider(provider: Mapping[str, Any]) -> list[CredentialProblem]:
    return _check_location(provider)


#: what export and the admin show for a stored secret (validation keeps it)
MASKED = "***"


def check_connection(
    connection: Mapping[str, Any], provider: Mapping[str, Any]
) -> list[CredentialProblem]:
    """A project and a region, the connection's or its provider's; a literal
    service-account JSON that can mint a token; not that and
    ``use_default_credentials: true`` together.  A connection given neither passes
    (an edit that leaves a stored key untouched sends none; a connection without
    one fails its mint as ``auth``)."""
    problems = _check_location(connection)
    for name in ("project", "region"):
        if connection.get(name) in (None, "") and provider.get(name) in (None, ""):
            problems.append((name, "is required for kind 'vertex'"))
    given = connection.get("service_account_json")
    default = connection.get("use_default_credentials")
    if default is not None and not isinstance(default, bool):
        problems.append(("use_default_credentials", "must be true or false"))
    if given and is_true(default):
        problems.append(
            (
                "use_default_credentials",
                "give either service_account_json or use_default_credentials",
            )
        )
    elif isinstance(given, str) and given not in ("", MASKED):
        literal = not given.startswith("env:")  # a reference is read when used
        problems += [
            ("service_account_json", text)
            for text in (service_account_problems(given) if literal else ())
        ]
    return problems


CREDENTIALS = CredentialShape(
    api_key=False,
    secrets=("service_account_json",),
    settings=("project", "region", "use_default_credentials"),
    provider_settings=("project", "region"),
    check_provider=check_provider,
    check_connection=check_connection,
)
