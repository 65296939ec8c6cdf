"""A provider's stored connections checked again when its kind or settings change.

A connection's credential fields are valid only for its provider's kind and settings
(spec 10 §3: a Bedrock connection without a region of its own needs the provider's,
a Vertex one needs a service account or ambient credentials).  A change to the
provider made without its connections — a REST ``PATCH``, the admin's provider
form, an import naming the provider but not all of its connections — must pass the
same checks for the connections it keeps, or the result cannot be used and its
export cannot be imported again (issue #14).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import Any

from providers.models import Connection, Provider
from providers.services import MASKED
from providers.validation import Checker, Problem, validate_connection


def stored_as_data(connection: Connection) -> dict[str, Any]:
    """The credential fields of a stored connection as the validator reads them; a
    stored secret counts as given (its value is never read back)."""
    data: dict[str, Any] = {
        "name": connection.name,
        **dict(connection.settings or {}),
        **dict.fromkeys(connection.secret_names(), MASKED),
    }
    if connection.has_api_key:
        data["api_key"] = connection.api_key_ref or MASKED
    return data


def stored_connection_problems(
    provider: Provider,
    *,
    kind: str | None,
    settings: Mapping[str, Any],
    base: str = "",
    skip: Collection[str] = (),
) -> list[Problem]:
    """Problems of ``provider``'s stored connections (except those named in
    ``skip``, which the change itself rewrites) under the new ``kind`` and
    ``settings``.  Paths are ``connections[i]`` in export order, each message names
    the connection.  Nothing to check for an unsaved provider or an unchanged kind
    and settings (a connection stored before a check was added does not block an
    unrelated edit)."""
    if provider.pk is None or kind is None:
        return []
    stored = Provider.objects.filter(pk=provider.pk).values("kind", "settings").first()
    if stored is None or (stored["kind"], stored["settings"] or {}) == (
        kind,
        dict(settings),
    ):
        return []
    problems: list[Problem] = []
    connections = Connection.objects.filter(provider_id=provider.pk).order_by(
        "priority", "name"
    )
    prefix = f"{base}." if base else ""
    for position, connection in enumerate(connections):
        if connection.name in skip:
            continue
        check = Checker(f"{prefix}connections[{position}]")
        validate_connection(
            stored_as_data(connection), check, kind=kind, provider_settings=settings
        )
        problems += [
            Problem(p.path, f"{p.message} (stored connection '{connection.name}')")
            for p in check.problems
        ]
    return problems
