"""Logging filters of the site's wiring (``LOGGING`` in settings)."""

from __future__ import annotations

import logging
from http import HTTPStatus


class ForbiddenInOneLine(logging.Filter):
    """A refused request (403) is one ``django.request`` line, not a traceback: the
    refusal is expected (a permission the user lacks), its stack says nothing."""

    def filter(self, record: logging.LogRecord) -> bool:
        if getattr(record, "status_code", None) == HTTPStatus.FORBIDDEN:
            record.exc_info = None
            record.exc_text = None
        return True
