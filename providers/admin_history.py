"""Field-level change history in the admin (issue #15).

Django's history says "Changed Targets."; an operator needs what changed.  An admin
that mixes in ``FieldHistory`` snapshots the row when its change page loads and again
after the save, and logs the difference as the history entry's message:
``strategy: priority → round-robin; targets: [pa/m1, pb/m2] → [pa/m1]``.

A snapshot is the row as its admin describes it (``history_snapshot``), never its
secrets: a credential appears as ``set``/``none`` or its ``env:`` reference, so the
history can be read by anyone who can read the row.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any
from urllib.parse import urlsplit

from django.http import HttpRequest

from providers import crypto

MAX_VALUE_CHARS = 160
_BEFORE = "_omr_history_before"


def _flat(value: Any, prefix: str = "") -> dict[str, Any]:
    if isinstance(value, dict) and value:
        out: dict[str, Any] = {}
        for key, item in value.items():
            out.update(_flat(item, f"{prefix}.{key}" if prefix else str(key)))
        return out
    return {prefix: value}


def _text(value: Any) -> str:
    if value is None or value == "":
        return "—"
    if isinstance(value, str):
        text = value
    else:
        text = json.dumps(value, default=str, ensure_ascii=False)
    return text if len(text) <= MAX_VALUE_CHARS else text[: MAX_VALUE_CHARS - 1] + "…"


class Secret:
    """A stored credential in a snapshot: equal to another when the value is the
    same (by a digest held only in memory), and printed as nothing of it."""

    __slots__ = ("_digest",)

    def __init__(self, value: str) -> None:
        self._digest = hashlib.sha256(value.encode()).digest()

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Secret) and other._digest == self._digest

    def __hash__(self) -> int:
        return hash(self._digest)


def _secret_change(old: Any, new: Any) -> str:
    if old is None:
        return "set"
    return "removed" if new is None else "changed"


def diff_text(before: dict[str, Any], after: dict[str, Any]) -> str:
    """``path: old → new`` for every path whose value changed, in order; a
    credential's path says only ``set``, ``changed`` or ``removed``."""
    old, new = _flat(before), _flat(after)
    parts = []
    for path in dict.fromkeys([*old, *new]):
        was, now = old.get(path), new.get(path)
        if was == now:
            continue
        if isinstance(was, Secret) or isinstance(now, Secret):
            parts.append(f"{path}: {_secret_change(was, now)}")
        else:
            parts.append(f"{path}: {_text(was)} → {_text(now)}")
    return "; ".join(parts)


class FieldHistory:
    """Mixin for a ``ModelAdmin``: the change message lists each changed field."""

    def history_snapshot(self, obj: Any) -> dict[str, Any]:
        raise NotImplementedError

    def get_object(self, request: HttpRequest, object_id: str, from_field: Any = None):  # type: ignore[no-untyped-def]
        obj = super().get_object(request, object_id, from_field)  # type: ignore[misc]
        if obj is not None and request.method == "POST":
            setattr(request, _BEFORE, self.history_snapshot(obj))
        return obj

    def construct_change_message(  # type: ignore[no-untyped-def]
        self, request: HttpRequest, form: Any, formsets: Any, add: bool = False
    ):
        before = getattr(request, _BEFORE, None)
        if add or before is None:
            return super().construct_change_message(  # type: ignore[misc]
                request, form, formsets, add
            )
        instance = type(form.instance).objects.get(pk=form.instance.pk)
        text = diff_text(before, self.history_snapshot(instance))
        return f"Changed {text}." if text else "No fields changed."


# -- snapshots of the providers app's rows -----------------------------------------


def credential_text(conn: Any) -> str:
    if conn.api_key_ref:
        return str(conn.api_key_ref)
    names = ["api_key"] if conn.api_key_encrypted else []
    names += list(conn.secret_names())
    return "set: " + ", ".join(names) if names else "none"


def _stored_credentials(conn: Any) -> dict[str, Secret]:
    """The literal credentials as ``Secret``s: a key replaced by another literal
    changes no ``credential`` text, yet is an edit the history must show."""
    found: dict[str, Secret] = {}
    if conn.api_key_encrypted:
        try:
            found["api key"] = Secret(crypto.decrypt(conn.api_key_encrypted))
        except crypto.SecretUnreadable:  # unreadable here: compared by ciphertext
            found["api key"] = Secret(conn.api_key_encrypted)
    for name, value in conn.stored_secrets().items():
        found[name.replace("_", " ")] = Secret(value)
    return found


def connection_snapshot(conn: Any) -> dict[str, Any]:
    return {
        "name": conn.name,
        "credential": credential_text(conn),
        **_stored_credentials(conn),
        "secret_refs": dict(conn.secret_refs or {}),
        "settings": dict(conn.settings or {}),
        "tier": conn.tier,
        "active": conn.active,
        "priority": conn.priority,
        "max_concurrency": conn.max_concurrency,
        "default_model": conn.default_model,
        "quota_remaining_percent": conn.quota_remaining_percent,
        "quota_reset_interval_seconds": conn.quota_reset_interval_seconds,
    }


def _model_snapshot(model: Any) -> dict[str, Any]:
    return {
        name: getattr(model, name)
        for name in (
            "input_cost",
            "output_cost",
            "context_window",
            "max_output_tokens",
            "capabilities",
            "tier",
            "wire",
        )
        if getattr(model, name, None) not in (None, "")
    }


def provider_snapshot(provider: Any) -> dict[str, Any]:
    proxy = provider.proxy_url or ""
    return {
        "slug": provider.slug,
        "kind": provider.kind,
        "base_url": provider.base_url,
        "wire": provider.wire,
        "preset": provider.preset,
        "settings": dict(provider.settings or {}),
        "proxy_url": "***" if proxy and urlsplit(proxy).password else proxy,
        "connections": {
            c.name: connection_snapshot(c)
            for c in provider.connections.order_by("priority", "name")
        },
        "models": {
            m.model_id: _model_snapshot(m)
            for m in provider.models.order_by("position", "model_id")
        },
    }
