"""Field-level change history for edits made outside the admin's forms (issue #15).

The admin logs each changed field of an edit (``providers.admin_history``).  Edits
through the REST API and config-as-code imports land in the same history (Django's
``LogEntry``, read by every row's History page), with the same snapshots and diff
text, and say where they came from: ``REST API: changed strategy: priority →
round-robin.`` by the API user; ``config import: …`` by the admin who uploaded the
file, or by the ``config-import`` user for ``manage.py import_config``.
"""

from __future__ import annotations

from typing import Any

from django.contrib.admin.models import ADDITION, CHANGE, DELETION, LogEntry
from django.contrib.auth import get_user_model
from django.contrib.contenttypes.models import ContentType

from combos.config_export import snapshot_of
from combos.models import (
    ApiKey,
    CandidateOverride,
    Combo,
    GatewaySettings,
    ModelComboMapping,
    SmartRoute,
)
from providers.admin_history import connection_snapshot, diff_text, provider_snapshot
from providers.models import Connection, Provider

REST_API = "REST API"
CONFIG_IMPORT = "config import"
#: the user ``manage.py import_config`` records its changes as (inactive, no password)
IMPORT_USERNAME = "config-import"

#: the kinds a configuration import writes, each with its History page
TRACKED: tuple[type, ...] = (
    Provider,
    Connection,
    Combo,
    ModelComboMapping,
    ApiKey,
    CandidateOverride,
    SmartRoute,
    GatewaySettings,
)

Key = tuple[type, Any]
Snapshots = dict[Key, tuple[str, dict[str, Any]]]


def snapshot(obj: Any) -> dict[str, Any]:
    """The row as its admin's history describes it (secrets masked)."""
    if isinstance(obj, Provider):
        return provider_snapshot(obj)
    if isinstance(obj, Connection):
        return connection_snapshot(obj)
    return snapshot_of(obj)


def snapshot_all() -> Snapshots:
    """Every tracked row: ``(model, pk) → (its text, its snapshot)``."""
    out: Snapshots = {}
    for model in TRACKED:
        rows = model._default_manager.all()  # type: ignore[attr-defined]
        if model is Connection:
            rows = rows.select_related("provider")
        for row in rows:
            out[(model, row.pk)] = (str(row)[:200], snapshot(row))
    return out


def import_user() -> Any:
    """The user a command-line import is recorded as (created on first use)."""
    user, created = get_user_model()._default_manager.get_or_create(
        username=IMPORT_USERNAME, defaults={"is_active": False}
    )
    if created:
        user.set_unusable_password()
        user.save(update_fields=["password"])
    return user


def _message(
    source: str, flag: int, before: dict[str, Any], after: dict[str, Any]
) -> str:
    if flag == ADDITION:
        return f"{source}: added."
    if flag == DELETION:
        return f"{source}: deleted."
    text = diff_text(before, after)
    return f"{source}: changed {text}." if text else ""


def _log(user: Any, model: type, pk: Any, text: str, flag: int, message: str) -> None:
    LogEntry.objects.create(
        user_id=user.pk,
        content_type_id=ContentType.objects.get_for_model(model).pk,
        object_id=str(pk),
        object_repr=text,
        action_flag=flag,
        change_message=message,
    )


def record(user: Any, source: str, before: Snapshots, after: Snapshots) -> int:
    """Log one entry per row added, deleted or changed between two snapshots of
    ``snapshot_all``; the number logged."""
    logged = 0
    for key in dict.fromkeys([*before, *after]):
        model, pk = key
        old, new = before.get(key), after.get(key)
        if old is None and new is not None:
            flag, text = ADDITION, new[0]
        elif new is None and old is not None:
            flag, text = DELETION, old[0]
        elif old is not None and new is not None and old[1] != new[1]:
            flag, text = CHANGE, new[0]
        else:
            continue
        message = _message(source, flag, (old or ("", {}))[1], (new or ("", {}))[1])
        if message:
            _log(user, model, pk, text, flag, message)
            logged += 1
    return logged


def record_one(user: Any, source: str, obj: Any, before: dict[str, Any] | None) -> None:
    """Log one row's save: an addition when ``before`` is None, else the changed
    fields (nothing when none changed)."""
    model = type(obj)
    fresh = model._default_manager.get(pk=obj.pk)
    flag = ADDITION if before is None else CHANGE
    message = _message(source, flag, before or {}, snapshot(fresh))
    if message:
        _log(user, model, obj.pk, str(fresh)[:200], flag, message)


def record_deletion(user: Any, source: str, model: type, pk: Any, text: str) -> None:
    _log(user, model, pk, text[:200], DELETION, f"{source}: deleted.")
