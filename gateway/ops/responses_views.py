"""Stored Responses over HTTP (spec 09 §3.4): ``GET`` / ``DELETE /v1/responses/{id}``
and ``GET /v1/responses/{id}/input_items``, for the key that made the response only
(another key's id is 404, as an unknown one)."""

from __future__ import annotations

import hashlib
import time
from typing import Any

import orjson
from django.http import HttpRequest, HttpResponse

from gateway.config.state import tables
from gateway.edge.auth import authenticate
from gateway.inbound import stored
from gateway.kernel.exchange import RequestError
from gateway.kernel.types import KeyPolicy
from gateway.ops.views import _error
from telemetry import metrics

_LIMITS = (1, 100)


def _json(payload: Any, status: int = 200) -> HttpResponse:
    return HttpResponse(
        orjson.dumps(payload), status=status, content_type="application/json"
    )


def _not_found(response_id: str) -> HttpResponse:
    return _error(
        RequestError(
            404,
            "response_not_found",
            f"No stored response '{response_id}' for this key",
            param="response_id",
            error_type="not_found_error",
        )
    )


def _method(request: HttpRequest, allowed: tuple[str, ...]) -> HttpResponse | None:
    if request.method in allowed or (request.method == "HEAD" and "GET" in allowed):
        return None
    return _error(
        RequestError(405, "method_not_allowed", f"Use {' or '.join(allowed)}"),
        headers={"Allow": ", ".join(allowed)},
    )


async def _key(request: HttpRequest) -> KeyPolicy | HttpResponse:
    table = await tables.ensure()
    headers = {k.lower(): v for k, v in request.headers.items()}
    try:
        return authenticate(headers, table, time.time())
    except RequestError as exc:
        metrics.bounded(metrics.REFUSALS, exc.code).inc()
        return _error(exc)


async def response_view(request: HttpRequest, response_id: str) -> HttpResponse:
    refused = _method(request, ("GET", "DELETE"))
    if refused is not None:
        return refused
    key = await _key(request)
    if isinstance(key, HttpResponse):
        return key
    if request.method == "DELETE":
        if not await stored.delete(response_id, key.id):
            return _not_found(response_id)
        return _json({"id": response_id, "object": "response", "deleted": True})
    found = await stored.load(response_id, key.id)
    if found is None:
        return _not_found(response_id)
    return _json(found.response)


def item_id(response_id: str, index: int, item: Any) -> str:
    """An input item's id: its own, else one derived from the response (stable, so
    ``after`` pages the same list every time)."""
    if isinstance(item, dict) and isinstance(item.get("id"), str) and item["id"]:
        return str(item["id"])
    digest = hashlib.sha256(f"{response_id}\x00{index}".encode()).hexdigest()[:24]
    return f"msg_{digest}"


def _limit(value: str | None) -> int:
    if value is None:
        return 20
    low, high = _LIMITS
    if not value.isdigit() or not low <= int(value) <= high:
        raise RequestError(
            400,
            "invalid_value",
            f"'limit' must be an integer in {low}..{high}",
            param="limit",
        )
    return int(value)


def _order(value: str | None) -> str:
    if value in (None, "asc", "desc"):
        return value or "desc"
    raise RequestError(
        400, "invalid_value", "'order' must be asc or desc", param="order"
    )


async def input_items_view(request: HttpRequest, response_id: str) -> HttpResponse:
    refused = _method(request, ("GET",))
    if refused is not None:
        return refused
    key = await _key(request)
    if isinstance(key, HttpResponse):
        return key
    try:
        limit = _limit(request.GET.get("limit"))
        order = _order(request.GET.get("order"))
    except RequestError as exc:
        return _error(exc)
    found = await stored.load(response_id, key.id)
    if found is None:
        return _not_found(response_id)
    items = [
        {**item, "id": item_id(response_id, i, item)}
        if isinstance(item, dict)
        else item
        for i, item in enumerate(found.input_items)
    ]
    if order == "desc":
        items.reverse()
    after = request.GET.get("after")
    if after:
        ids = [i.get("id") if isinstance(i, dict) else None for i in items]
        items = items[ids.index(after) + 1 :] if after in ids else []
    page = items[:limit]
    return _json(
        {
            "object": "list",
            "data": page,
            "first_id": page[0]["id"] if page else None,
            "last_id": page[-1]["id"] if page else None,
            "has_more": len(items) > limit,
        }
    )
