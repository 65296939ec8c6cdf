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

A read-only foreign key links to the related row's page only for a user who may open
it (view or change permission on its model); for anyone else it is plain text, so no
link leads to a refusal.  The admin renders it without the request at hand: the form
class ``ModelAdmin.get_form`` makes for the request carries its user.
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


_USER_ATTR = "_omniroute_user"


def _with_user(original: Callable[..., Any]) -> Callable[..., Any]:
    """``ModelAdmin.get_form``, whose form class (made for this request) also
    carries the request's user, for its read-only fields' links."""

    def get_form(self: Any, request: Any, *args: Any, **kwargs: Any) -> Any:
        form = original(self, request, *args, **kwargs)
        setattr(form, _USER_ATTR, getattr(request, "user", None))
        return form

    setattr(get_form, _MARK, True)
    return get_form


def may_open_row(user: Any, model: Any) -> bool:
    """Whether ``user`` may open a row of ``model`` in the admin."""
    meta = model._meta
    return bool(
        user.has_perm(f"{meta.app_label}.view_{meta.model_name}")
        or user.has_perm(f"{meta.app_label}.change_{meta.model_name}")
    )


def _for_admin_url(original: Callable[..., Any]) -> Callable[..., Any]:
    def get_admin_url(self: Any, remote_field: Any, remote_obj: Any) -> Any:
        user = getattr(self.form, _USER_ATTR, None)
        if user is not None and not may_open_row(user, remote_field.model):
            return str(remote_obj)
        return original(self, remote_field, remote_obj)

    setattr(get_admin_url, _MARK, True)
    return get_admin_url


#: the read-only field classes whose foreign keys link to the related row
_LINKERS = {
    "django.contrib.admin.helpers": "AdminReadonlyField",
    "unfold.fields": "UnfoldAdminReadonlyField",
}

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
    for module_name, class_name in _LINKERS.items():
        cls = getattr(importlib.import_module(module_name), class_name)
        original = cls.get_admin_url
        if not getattr(original, _MARK, False):
            cls.get_admin_url = _for_admin_url(original)
    from django.contrib.admin import ModelAdmin

    if not getattr(ModelAdmin.get_form, _MARK, False):
        setattr(ModelAdmin, "get_form", _with_user(ModelAdmin.get_form))  # noqa: B010
