"""REST error bodies: DRF's field map plus an OpenAI-style ``error`` object."""

from __future__ import annotations

import logging
from typing import Any

from django.db import IntegrityError, InterfaceError, OperationalError
from rest_framework.response import Response
from rest_framework.views import exception_handler as drf_handler

from providers.validation import Problem

logger = logging.getLogger("omniroute.api")

_TYPES = {401: "authentication_error", 403: "permission_error", 404: "not_found_error"}


def problems_response(problems: list[Problem], status: int = 400) -> Response:
    fields: dict[str, Any] = {}
    for problem in problems:
        fields.setdefault(problem.path or "non_field_errors", []).append(
            problem.message
        )
    first = problems[0] if problems else Problem("", "invalid")
    fields["error"] = {
        "message": str(first),
        "type": "invalid_request_error",
        "code": "invalid_config",
        "param": first.path or None,
    }
    return Response(fields, status=status)


def exception_handler(exc: Exception, context: dict[str, Any]) -> Response | None:
    """DRF's answer with an ``error`` object; a write that still collides with a
    stored row is a 409, anything unexpected a JSON 500 (never an HTML page)."""
    response = drf_handler(exc, context)
    if response is None:
        if isinstance(exc, RecursionError):  # the JSON parser on a very deep body
            return problems_response([Problem("", "JSON nested too deeply")])
        if isinstance(exc, IntegrityError):
            return problems_response(
                [Problem("", "conflicts with an existing row")], status=409
            )
        if isinstance(exc, OperationalError | InterfaceError):  # the DB is down
            logger.warning("REST API: database unavailable (%s)", type(exc).__name__)
            return Response(
                {
                    "error": {
                        "message": "The database is unavailable; retry shortly",
                        "type": "api_error",
                        "code": "database_unavailable",
                        "param": None,
                    }
                },
                status=503,
                headers={"Retry-After": "5"},
            )
        logger.error("unhandled error in the REST API", exc_info=exc)
        return Response(
            {
                "error": {
                    "message": "Internal server error",
                    "type": "api_error",
                    "code": "internal_error",
                    "param": None,
                }
            },
            status=500,
        )
    if (
        response is not None
        and isinstance(response.data, dict)
        and ("detail" in response.data)
    ):
        detail = response.data["detail"]
        response.data["error"] = {
            "message": str(detail),
            "type": _TYPES.get(response.status_code, "invalid_request_error"),
            # DRF's own code; it also names a Django ``Http404`` ("not_found")
            "code": getattr(detail, "code", None)
            or getattr(exc, "default_code", "error"),
            "param": None,
        }
    return response
