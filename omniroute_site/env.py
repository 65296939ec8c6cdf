"""Strict readers for environment settings (spec 08 §1).

Every value is read through these helpers: booleans accept only
``true/false/1/0/yes/no``, anything else stops start-up naming the variable; a secret
may come from ``NAME_FILE`` instead of ``NAME``.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from django.core.exceptions import ImproperlyConfigured

_TRUE = {"true", "1", "yes"}
_FALSE = {"false", "0", "no"}


def env_str(name: str, default: str | None = None) -> str | None:
    """``NAME``, else the content of the file named by ``NAME_FILE``, else default."""
    value = os.environ.get(name)
    if value is not None:
        return value
    path = os.environ.get(f"{name}_FILE")
    if path:
        try:
            return Path(path).read_text(encoding="utf-8").strip()
        except OSError as exc:
            raise ImproperlyConfigured(
                f"{name}_FILE: cannot read {path}: {exc}"
            ) from exc
    return default


def env_bool(name: str, default: bool) -> bool:
    raw = env_str(name)
    if raw is None or raw.strip() == "":
        return default
    value = raw.strip().lower()
    if value in _TRUE:
        return True
    if value in _FALSE:
        return False
    raise ImproperlyConfigured(f"{name}: expected true/false/1/0/yes/no, got {raw!r}")


def env_int(name: str, default: int, *, minimum: int | None = None) -> int:
    raw = env_str(name)
    if raw is None or raw.strip() == "":
        return default
    try:
        value = int(raw.strip())
    except ValueError as exc:
        raise ImproperlyConfigured(f"{name}: expected an integer, got {raw!r}") from exc
    if minimum is not None and value < minimum:
        raise ImproperlyConfigured(f"{name}: must be >= {minimum}, got {value}")
    return value


def env_list(name: str, default: list[str]) -> list[str]:
    raw = env_str(name)
    if raw is None:
        return list(default)
    return [item.strip() for item in raw.split(",") if item.strip()]


def env_json_object(name: str) -> dict[str, str]:
    """A JSON object of strings (``{"gemini": "google"}``); unset or blank -> {}."""
    raw = env_str(name)
    if raw is None or raw.strip() == "":
        return {}
    try:
        value = json.loads(raw)
    except ValueError as exc:
        raise ImproperlyConfigured(f"{name}: expected a JSON object: {exc}") from exc
    if not isinstance(value, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in value.items()
    ):
        raise ImproperlyConfigured(f"{name}: expected a JSON object of strings")
    return value
