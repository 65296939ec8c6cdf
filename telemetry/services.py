"""Writes to webhook endpoints and deliveries (spec 02 §12.3).

Endpoint writes bump the config revision: the snapshot decides who is subscribed, and
every gateway worker must see a change within 2 s.  Deliveries are created once per
(endpoint, event id), so handing the same event over twice adds nothing; the new rows
are scheduled after the commit (``webhook_delivery.schedule``).
"""

from __future__ import annotations

import secrets
import uuid
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
from functools import partial
from typing import Any

from django.db import transaction

from providers.services import bump_config_revision
from telemetry.models import WebhookDelivery, WebhookEndpoint
from telemetry.webhook_delivery import schedule

SECRET_BYTES = 32  # spec 02 §12.3: generated as 32 random bytes, hex


def generate_secret() -> str:
    return secrets.token_hex(SECRET_BYTES)


@transaction.atomic
def save_webhook_endpoint(
    endpoint: WebhookEndpoint, *, secret: str | None = None
) -> str | None:
    """Validate and save; returns the secret when one was generated (shown once).

    ``secret`` replaces the stored one; left empty, a new endpoint gets a generated
    secret and an existing one keeps its own.
    """
    generated = None
    if secret:
        endpoint.set_secret(secret)
    elif not endpoint.secret_encrypted:
        generated = generate_secret()
        endpoint.set_secret(generated)
    endpoint.full_clean()
    endpoint.save()
    bump_config_revision()
    return generated


@transaction.atomic
def delete_webhook_endpoints(endpoints: Iterable[WebhookEndpoint]) -> int:
    ids = [endpoint.pk for endpoint in endpoints]
    deleted, _ = WebhookEndpoint.objects.filter(id__in=ids).delete()
    bump_config_revision()
    return deleted


def _occurred_at() -> str:
    now = datetime.now(UTC).isoformat(timespec="milliseconds")
    return now.replace("+00:00", "Z")


@transaction.atomic
def create_deliveries(
    event: Mapping[str, Any], endpoint_ids: Iterable[int]
) -> list[int]:
    """One pending row per active endpoint for ``event``; returns the new row ids."""
    wanted = set(endpoint_ids)
    active = WebhookEndpoint.objects.filter(id__in=wanted, active=True)
    created_ids = []
    for endpoint_id in sorted(active.values_list("id", flat=True)):
        row, created = WebhookDelivery.objects.get_or_create(
            endpoint_id=endpoint_id,
            event_id=str(event["id"]),
            defaults={"event": str(event["event"]), "payload": dict(event)},
        )
        if created:
            created_ids.append(row.id)
    if created_ids:
        transaction.on_commit(partial(schedule, created_ids))
    return created_ids


def send_test_event(endpoints: Iterable[WebhookEndpoint]) -> list[int]:
    """A ``ping`` for each given active endpoint, subscribed or not."""
    created = []
    for endpoint in endpoints:
        if not endpoint.active:
            continue
        event = {
            "event": WebhookEndpoint.PING,
            "id": str(uuid.uuid4()),
            "occurred_at": _occurred_at(),
        }
        created += create_deliveries(event, [endpoint.pk])
    return created
