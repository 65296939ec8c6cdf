"""Provider credentials at rest: Fernet (MultiFernet for rotation, spec 08 §5.2).

``OMNIROUTE_ENCRYPTION_KEYS`` holds one or more keys; the first encrypts, all decrypt.
Plaintext never leaves this module except through ``decrypt()`` for the snapshot.
"""

from __future__ import annotations

from functools import cache

from cryptography.fernet import Fernet, InvalidToken, MultiFernet
from django.conf import settings
from django.core.exceptions import ImproperlyConfigured


class SecretUnreadable(Exception):
    """A stored secret cannot be decrypted with the configured keys."""


@cache
def _fernet(keys: tuple[str, ...]) -> MultiFernet:
    if not keys:
        raise ImproperlyConfigured(
            "OMNIROUTE_ENCRYPTION_KEY is not set (providers.E001)"
        )
    return MultiFernet([Fernet(key.encode("ascii")) for key in keys])


def _current() -> MultiFernet:
    return _fernet(tuple(settings.OMNIROUTE_ENCRYPTION_KEYS))


def encrypt(plaintext: str) -> str:
    return _current().encrypt(plaintext.encode("utf-8")).decode("ascii")


def decrypt(token: str) -> str:
    try:
        return _current().decrypt(token.encode("ascii")).decode("utf-8")
    except (InvalidToken, ValueError) as exc:
        raise SecretUnreadable("stored secret cannot be decrypted") from exc


def rotate(token: str) -> str:
    """Re-encrypt ``token`` under the first key."""
    try:
        return _current().rotate(token.encode("ascii")).decode("ascii")
    except (InvalidToken, ValueError) as exc:
        raise SecretUnreadable("stored secret cannot be decrypted") from exc
