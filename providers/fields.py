"""Model fields shared by the apps."""

from __future__ import annotations

from typing import Any

from django.db import models


class RegistryChoiceField(models.CharField):
    """A ``CharField`` whose choices come from a registry in code (the dialects, the
    strategies): the forms and the admin offer them, but they are left out of the
    schema, so a new registry entry needs no migration."""

    def deconstruct(self) -> Any:
        name, path, args, kwargs = super().deconstruct()
        kwargs.pop("choices", None)
        return name, path, args, kwargs
