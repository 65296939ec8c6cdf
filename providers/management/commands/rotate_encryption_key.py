"""``manage.py rotate_encryption_key``: re-encrypt every stored secret (spec 08 §1).

Rotation: put the new key first in ``OMNIROUTE_ENCRYPTION_KEY`` and keep the old
ones after it (the first encrypts, all decrypt), run this command, then drop the
old keys.  Every Fernet field (a model field named ``*_encrypted``: connection
credentials, webhook signing keys) is rewritten under the first key, in one
transaction; the plaintext does not change, so no config version is bumped.  A
secret no configured key can read is left as it is and named on stderr, and the
command then exits 1.
"""

from __future__ import annotations

from typing import Any

from django.apps import apps
from django.core.management.base import BaseCommand, CommandError
from django.db import models, transaction

from providers import crypto

ENCRYPTED_SUFFIX = "_encrypted"


def encrypted_fields() -> list[tuple[type[models.Model], str]]:
    """Every (model, field name) that holds a Fernet token."""
    return [
        (model, field.name)
        for model in apps.get_models()
        for field in model._meta.get_fields()
        if isinstance(field, models.TextField | models.CharField)
        and field.name.endswith(ENCRYPTED_SUFFIX)
    ]


class Command(BaseCommand):
    help = "Re-encrypt every stored provider secret with the first encryption key."

    def handle(self, *args: Any, **options: Any) -> None:
        rotated = 0
        unreadable: list[str] = []
        with transaction.atomic():
            for model, field in encrypted_fields():
                rows = (
                    model._default_manager.select_for_update()
                    .exclude(**{field: ""})
                    .order_by("pk")
                    .values_list("pk", field)
                )
                for pk, token in rows:
                    try:
                        new = crypto.rotate(token)
                    except crypto.SecretUnreadable:
                        unreadable.append(f"{model._meta.label} {pk} ({field})")
                        continue
                    # .update(): the row's other columns (updated_at) stay as they are
                    model._default_manager.filter(pk=pk).update(**{field: new})
                    rotated += 1
        self.stdout.write(f"rotate_encryption_key: {rotated} secrets re-encrypted")
        for name in unreadable:
            self.stderr.write(f"unreadable with the configured keys, kept: {name}")
        if unreadable:
            raise CommandError(
                f"{len(unreadable)} secrets could not be decrypted", returncode=1
            )
