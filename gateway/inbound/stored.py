"""Stored Responses (spec 09 §3.4): save, load, delete, always scoped to one key.

Reads and writes go through Django's async ORM (a worker thread), so the event loop
never waits on the database; only a Responses request with ``store`` true or a
``previous_response_id`` touches it.  A row is written before the client receives the
final event or the JSON answer, so another worker can continue the conversation the
moment the client can.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from django.conf import settings
from django.utils import timezone

from gateway.models import StoredResponse


@dataclass(frozen=True, slots=True)
class Stored:
    id: str
    response: dict[str, Any]
    context: list[Any]
    input_items: list[Any]
    root_id: str

    def conversation(self) -> list[Any]:
        """Every item of the chain up to and including this response, oldest first:
        what a request continuing from it sends upstream before its own input."""
        output = self.response.get("output")
        replayed = [_replayable(i) for i in output] if isinstance(output, list) else []
        return [*self.context, *self.input_items, *replayed]


def _replayable(item: Any) -> Any:
    """An output item as the next turn's input: upstream calls never store, so the
    ids of a message or a call would name items the upstream never kept; a
    reasoning item keeps its id beside its encrypted content."""
    if not isinstance(item, dict) or item.get("type") == "reasoning":
        return item
    return {k: v for k, v in item.items() if k not in ("id", "status")}


def ttl() -> timedelta:
    return timedelta(days=int(settings.OMNIROUTE_RESPONSES_TTL_DAYS))


async def load(response_id: str, key_id: int) -> Stored | None:
    """The stored response ``response_id`` of key ``key_id``; None when it is unknown,
    expired, deleted or another key's."""
    row = (
        await StoredResponse.objects.filter(
            id=response_id, api_key_id=key_id, expires_at__gt=timezone.now()
        )
        .only("id", "response", "context", "input_items", "root_id")
        .afirst()
    )
    if row is None:
        return None
    return Stored(
        id=row.id,
        response=row.response,
        context=list(row.context or []),
        input_items=list(row.input_items or []),
        root_id=row.root_id,
    )


async def save(
    response_id: str,
    key_id: int,
    response: dict[str, Any],
    *,
    context: list[Any],
    input_items: list[Any],
    root_id: str,
) -> None:
    now = datetime.now(UTC)
    await StoredResponse.objects.aupdate_or_create(
        id=response_id,
        defaults={
            "api_key_id": key_id,
            "created_at": now,
            "expires_at": now + ttl(),
            "response": response,
            "context": context,
            "input_items": input_items,
            "root_id": root_id,
        },
    )


async def delete(response_id: str, key_id: int) -> bool:
    deleted, _ = await StoredResponse.objects.filter(
        id=response_id, api_key_id=key_id, expires_at__gt=timezone.now()
    ).adelete()
    return deleted > 0
