"""Writes to providers, connections and models; every one bumps the config revision.

Callers (admin, REST API, ``import_config``) validate first with
``providers.validation``-style checks; these functions write inside the caller's
transaction and never leave the revision unbumped.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.db import transaction
from django.db.models import F

from providers.models import ConfigRevision, Connection, Provider, ProviderModel


def bump_config_revision() -> None:
    """Increment the config version in the current transaction (spec 08 §3.4).

    With Redis, the new version is announced to every worker once it is committed;
    the workers' poll of the row stays the guarantee.
    """
    updated = ConfigRevision.objects.filter(id=1).update(version=F("version") + 1)
    if not updated:
        ConfigRevision.objects.get_or_create(id=1, defaults={"version": 1})
    if settings.REDIS_URL:
        transaction.on_commit(announce_config_version)


def announce_config_version() -> None:
    """Publish the committed version on ``omniroute:config`` (fails open: logged)."""
    from providers.redis_store import shared_link

    link = shared_link()
    if link is not None:
        link.announce_config(config_version())


def config_version() -> int:
    row = ConfigRevision.objects.filter(id=1).values_list("version", flat=True).first()
    return int(row or 0)


@transaction.atomic
def save_provider(provider: Provider) -> Provider:
    provider.save()
    bump_config_revision()
    return provider


@transaction.atomic
def delete_provider(provider: Provider) -> None:
    provider.delete()
    bump_config_revision()


MASKED = "***"


def apply_connection_fields(connection: Connection, data: dict[str, Any]) -> None:
    """Copy validated YAML-shaped fields onto a connection (secret handled apart)."""
    connection.tier = data.get("tier") or Connection.Tier.STANDARD
    connection.default_model = data.get("default_model") or ""
    connection.active = bool(data.get("active", True))
    connection.priority = int(data.get("priority") or 0)
    connection.max_concurrency = int(data.get("max_concurrency") or 0)
    quota = data.get("quota") or {}
    connection.quota_remaining_percent = quota.get("remaining_percent")
    connection.quota_reset_interval_seconds = quota.get("reset_interval_seconds")
    secret = data.get("api_key")
    if secret is not None and secret != MASKED:
        connection.set_api_key(secret)
    connection.settings = dict(data.get("credential_settings") or {})
    secrets = data.get("secrets")
    if secrets:  # the fields given; the others stay (``""`` clears one)
        connection.set_secrets(secrets)


@transaction.atomic
def save_connection(
    connection: Connection, *, api_key: str | None = None
) -> Connection:
    """Save; a non-empty ``api_key`` replaces the stored secret (write-only)."""
    if api_key:
        connection.set_api_key(api_key)
    connection.save()
    bump_config_revision()
    return connection


@transaction.atomic
def delete_connection(connection: Connection) -> None:
    connection.delete()
    bump_config_revision()


def apply_model_fields(model: ProviderModel, data: dict[str, Any]) -> None:
    for name in (
        "input_cost",
        "output_cost",
        "cache_read_cost",
        "cache_write_cost",
        "context_window",
        "max_output_tokens",
        "capabilities",
    ):
        setattr(model, name, data.get(name))
    model.tier = data.get("tier") or ""
    model.wire = data.get("wire") or ""
    model.deployment = data.get("deployment") or ""


@transaction.atomic
def save_model(model: ProviderModel) -> ProviderModel:
    model.save()
    bump_config_revision()
    return model


@transaction.atomic
def delete_model(model: ProviderModel) -> None:
    model.delete()
    bump_config_revision()


def add_discovered_models(provider: Provider, model_ids: list[str]) -> int:
    """Add the chosen discovered ids as model rows (their facts come from the
    catalog at the next table build); ids already configured are skipped."""
    existing = set(provider.models.values_list("model_id", flat=True))
    position = provider.models.count()
    added = 0
    for model_id in model_ids:
        model_id = model_id.strip()[:256]
        if not model_id or model_id in existing:
            continue
        ProviderModel.objects.create(
            provider=provider, model_id=model_id, position=position + added
        )
        existing.add(model_id)
        added += 1
    if added:
        bump_config_revision()
    return added
