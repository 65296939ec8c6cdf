"""How the admin renders values (issue #15): one time format, no raw ``null``.

The admin turns a model's value into text in two functions, ``display_for_field``
(a model field: list columns, read-only fields on edit and detail pages, inline rows)
and ``display_for_value`` (what a list column's method returns).  Django and
django-unfold each import them by name into the modules that render lists, read-only
fields and sections, so ``install()`` wraps them there: a date-time becomes the
console's ``<time>`` element (``gateway/templatetags/omr.py``), which the console's
script shows in the browser's local time with seconds and its age in the tooltip.
Everything else goes to the original function unchanged.

A read-only JSON field without a value (a request's skips, auto decision or tier
signals) shows the console's empty value, "—", not the JSON text ``null``.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from datetime import datetime
from typing import Any

from django.db import models

from gateway.templatetags.omr import omr_time

#: the modules that render admin values, with the names they imported
_RENDERERS = {
    "django.contrib.admin.helpers": ("display_for_field",),
    "django.contrib.admin.templatetags.admin_list": (
        "display_for_field",
        "display_for_value",
    ),
    "unfold.fields": ("display_for_field", "prettify_json"),
    "unfold.sections": ("display_for_field",),
    "unfold.templatetags.unfold_list": ("display_for_field", "display_for_value"),
}
_MARK = "_omr_times"


def _for_field(original: Callable[..., Any]) -> Callable[..., Any]:
    def display_for_field(
        value: Any, field: Any, empty_value_display: str, *args: Any, **kwargs: Any
    ) -> Any:
        if isinstance(field, models.DateTimeField) and isinstance(value, datetime):
            return omr_time(value)
        return original(value, field, empty_value_display, *args, **kwargs)

    setattr(display_for_field, _MARK, True)
    return display_for_field


def _for_value(original: Callable[..., Any]) -> Callable[..., Any]:
    def display_for_value(
        value: Any, empty_value_display: str, *args: Any, **kwargs: Any
    ) -> Any:
        if isinstance(value, datetime):
            return omr_time(value)
        return original(value, empty_value_display, *args, **kwargs)

    setattr(display_for_value, _MARK, True)
    return display_for_value


def _for_json(original: Callable[..., Any]) -> Callable[..., Any]:
    def prettify_json(data: Any, *args: Any, **kwargs: Any) -> Any:
        if data is None:
            return None  # the caller falls back to the empty value display
        return original(data, *args, **kwargs)

    setattr(prettify_json, _MARK, True)
    return prettify_json


_WRAPPERS = {
    "display_for_field": _for_field,
    "display_for_value": _for_value,
    "prettify_json": _for_json,
}


def install() -> None:
    """Wrap the admin's renderers (once; a second call changes nothing)."""
    from django.contrib import admin

    admin.site.empty_value_display = "—"  # as the console's own pages write it
    for module_name, names in _RENDERERS.items():
        module = importlib.import_module(module_name)
        for name in names:
            original = getattr(module, name)
            if not getattr(original, _MARK, False):
                setattr(module, name, _WRAPPERS[name](original))
