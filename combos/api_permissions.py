"""REST authorisation (spec 08 §5.3): the admin's model permissions, per request.

A staff user (session or admin token) may do on ``/api`` exactly what the admin lets
them do: ``view_<model>`` to read (GET, HEAD, OPTIONS), ``add_<model>`` to create
(POST on a collection), ``change_<model>`` to update (PUT, PATCH) or run an action
(``reset-health``), ``delete_<model>`` to delete.  A view names its model in
``model``; a view without one needs staff only.  Secrets and moving a connection
to another provider need ``providers.change_provider`` besides (``combos.api``).
"""

from __future__ import annotations

from typing import Any

from rest_framework.permissions import BasePermission
from rest_framework.request import Request

_BY_METHOD = {
    "GET": "view",
    "HEAD": "view",
    "OPTIONS": "view",
    "POST": "add",
    "PUT": "change",
    "PATCH": "change",
    "DELETE": "delete",
}
#: viewset actions that are not the CRUD their method suggests
_ACTIONS = {"reset_health": "change", "reset_all_health": "change"}


def needed_permission(model: Any, method: str, action: str | None) -> str | None:
    """``<app>.<verb>_<model>`` for ``method`` (or the named ``action``)."""
    verb = _ACTIONS.get(action or "") or _BY_METHOD.get(method.upper())
    if verb is None:
        return None
    meta = model._meta
    return f"{meta.app_label}.{verb}_{meta.model_name}"


class ModelPermissions(BasePermission):
    """Staff, and the model permission the request's method needs."""

    message = "You do not have permission to perform this action."

    def has_permission(self, request: Request, view: Any) -> bool:
        user = request.user
        if user is None or not user.is_authenticated or not user.is_staff:
            return False
        model = getattr(view, "model", None)
        if model is None:
            return True
        needed = needed_permission(
            model, request.method or "", getattr(view, "action", None)
        )
        if needed is None:
            return False
        if not user.has_perm(needed):
            self.message = f"this needs the {needed} permission"
            return False
        return True
