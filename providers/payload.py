"""Typed readers for untrusted JSON payloads (the sync jobs' sources, spec 06 §3).

Each ``read_*(obj, key, required=True)`` returns the value when it has the right type,
a neutral value when an optional key is absent (``""`` for text, else ``None``), and
raises ``Invalid`` when a required key is absent or any present value has the wrong
type.  Booleans never pass as numbers; numbers are finite and non-negative.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any


class Invalid(Exception):
    """One entry of a payload fails validation; the message names the field."""


_ABSENT = object()


def _get(obj: Mapping[str, Any], key: str, required: bool) -> Any:
    value = obj.get(key, _ABSENT)
    if value is _ABSENT and required:
        raise Invalid(f"{key} is missing")
    return value


def read_text(obj: Mapping[str, Any], key: str, *, required: bool = True) -> str:
    value = _get(obj, key, required)
    if value is _ABSENT:
        return ""
    if not isinstance(value, str):
        raise Invalid(f"{key} is not a string")
    return value


def read_flag(
    obj: Mapping[str, Any], key: str, *, required: bool = True
) -> bool | None:
    value = _get(obj, key, required)
    if value is _ABSENT:
        return None
    if not isinstance(value, bool):
        raise Invalid(f"{key} is not a boolean")
    return value


def read_count(
    obj: Mapping[str, Any], key: str, *, required: bool = True
) -> int | None:
    value = _get(obj, key, required)
    if value is _ABSENT:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise Invalid(f"{key} is not a non-negative integer")
    return value


def read_price(
    obj: Mapping[str, Any], key: str, *, required: bool = True
) -> float | None:
    value = _get(obj, key, required)
    if value is _ABSENT:
        return None
    if (
        isinstance(value, bool)
        or not isinstance(value, int | float)
        or not math.isfinite(value)
        or value < 0
    ):
        raise Invalid(f"{key} is not a non-negative number")
    return float(value)


def read_object(obj: Mapping[str, Any], key: str, *, required: bool = True) -> Any:
    value = _get(obj, key, required)
    if value is _ABSENT:
        return None
    if not isinstance(value, dict):
        raise Invalid(f"{key} is not an object")
    return value


def read_list(obj: Mapping[str, Any], key: str, *, required: bool = True) -> Any:
    value = _get(obj, key, required)
    if value is _ABSENT:
        return None
    if not isinstance(value, list):
        raise Invalid(f"{key} is not a list")
    return value


def read_strings(obj: Mapping[str, Any], key: str) -> list[str]:
    value = read_list(obj, key)
    if not all(isinstance(item, str) for item in value):
        raise Invalid(f"{key} holds a non-string")
    return list(value)
