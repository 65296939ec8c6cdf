"""The Nadir router's service call (spec 04 §8 ``nadir``), with the HTTP injected.

``ask_nadir(pool, ctx, post)`` answers which bare model id the Nadir service picked
for this request, or ``None`` with a note when ``rules`` must decide:

1. No poster, or no last user text: no call.
2. Base URL = ``baseUrl``, else ``OMNIROUTE_NADIR_BASE_URL``, else
   ``https://api.getnadir.com``; trailing ``/`` stripped, then one trailing ``/v1``.
   A base URL that failed less than 30 s ago (by ``ctx.now``) is not called.
3. ``POST <base>/v1/bucket`` with ``Content-Type: application/json`` and, when a key
   is set, ``X-API-Key``; body ``{"prompt", "menu", "source": "omniroute"}``; the
   ``timeoutMs`` deadline (default 2000, clamped to 100..30000); no retry.
4. A 2xx JSON object whose ``selected_model`` is on the menu is the answer.

Invariants: nothing but the last user text (first 16 000 chars), the menu (distinct
bare model ids of the pool in rank order, at most 100) and ``"source"`` leaves the
process — no system prompt, history, tools, images, headers, client key, provider
credentials, connection names or request ids. ``ask_nadir`` never raises (a
``CancelledError`` of the caller still propagates). A timeout, transport error,
non-2xx reply, malformed JSON (including a JSON value that is not an object) or an
invalid base URL skips that base URL for 30 s in this process; a missing or
off-menu ``selected_model`` does not.

The key is ``apiKey`` (``env:NAME`` reads that variable; an unset or empty one
counts as no ``apiKey``), else ``OMNIROUTE_NADIR_API_KEY``. The environment is read
per call, never at import.
"""

from __future__ import annotations

import asyncio
import json
import logging
import math
import os
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from gateway.auto.engine.types import RouterContext, Scored

logger = logging.getLogger("omniroute.routing")

NADIR_DEFAULT_BASE_URL = "https://api.getnadir.com"
NADIR_DEFAULT_TIMEOUT_MS = 2000
NADIR_MIN_TIMEOUT_MS = 100
NADIR_MAX_TIMEOUT_MS = 30_000
NADIR_SKIP_SECONDS = 30.0  # spec 04 §8: a failed base URL is skipped for 30 s
NADIR_MAX_PROMPT_CHARS = 16_000
NADIR_MAX_MENU = 100

#: ``await nadir_post(url, body, headers, timeout_s) -> (status, body bytes)``;
#: raises on a network error or a timeout. The only I/O of the routing package.
NadirPost = Callable[
    [str, dict[str, Any], dict[str, str], float], Awaitable[tuple[int, bytes]]
]

# base URL -> ctx.now until which it is skipped; per process, as spec 04 §8 says.
_SKIPS: dict[str, float] = {}
#: once-per-process warnings already logged
_WARNED: set[str] = set()


@dataclass(frozen=True, slots=True)
class NadirAnswer:
    """The model Nadir picked (on the menu), or None and why ``rules`` decides."""

    model: str | None
    note: str | None = None


def reset_nadir_skips() -> None:
    """Forget every skipped base URL and the once-only warnings (tests)."""
    _SKIPS.clear()
    _WARNED.clear()


def nadir_base_url(config: Mapping[str, Any]) -> str:
    """The configured base URL, normalised but not validated."""
    raw = config.get("baseUrl")
    if not isinstance(raw, str) or not raw:
        raw = os.environ.get("OMNIROUTE_NADIR_BASE_URL") or NADIR_DEFAULT_BASE_URL
    return raw.rstrip("/").removesuffix("/v1")


def is_valid_base_url(url: str) -> bool:
    """An http(s) URL with a host."""
    parts = urlsplit(url)
    return parts.scheme in {"http", "https"} and bool(parts.netloc)


def nadir_api_key(config: Mapping[str, Any]) -> str | None:
    """``apiKey`` (``env:NAME`` resolved), else ``OMNIROUTE_NADIR_API_KEY``."""
    key = config.get("apiKey")
    if isinstance(key, str) and key.startswith("env:"):
        key = os.environ.get(key.removeprefix("env:"))
    if isinstance(key, str) and key:
        return key
    return os.environ.get("OMNIROUTE_NADIR_API_KEY") or None


def nadir_timeout_s(config: Mapping[str, Any]) -> float:
    """``timeoutMs`` (default 2000) clamped to 100..30000, in seconds."""
    ms = config.get("timeoutMs")
    if isinstance(ms, bool) or not isinstance(ms, int | float) or not math.isfinite(ms):
        ms = NADIR_DEFAULT_TIMEOUT_MS
    return min(NADIR_MAX_TIMEOUT_MS, max(NADIR_MIN_TIMEOUT_MS, ms)) / 1000


def nadir_menu(pool: Sequence[Scored]) -> list[str]:
    """Distinct bare model ids of the pool in rank order, at most 100."""
    return list(dict.fromkeys(c.model for c in pool))[:NADIR_MAX_MENU]


class _Failure(Exception):
    """A failure that skips the base URL for 30 s."""


async def ask_nadir(
    pool: Sequence[Scored], ctx: RouterContext, post: NadirPost | None
) -> NadirAnswer:
    """The model Nadir picks for this request; see the module docstring."""
    if post is None:
        if "no-poster" not in _WARNED:
            logger.warning("Nadir has no HTTP poster in this process; rules decides")
            _WARNED.add("no-poster")
        return NadirAnswer(None, "nadir unavailable")
    if not ctx.last_user_text:
        return NadirAnswer(None)
    config = ctx.nadir or {}
    base = nadir_base_url(config)
    if ctx.now < _SKIPS.get(base, -math.inf):
        return NadirAnswer(None, "nadir skipped after a recent failure")
    menu = nadir_menu(pool)
    body = {
        "prompt": ctx.last_user_text[:NADIR_MAX_PROMPT_CHARS],
        "menu": menu,
        "source": "omniroute",
    }
    try:
        selected = await _call(post, base, config, body)
    except _Failure as exc:
        _skip(base, ctx.now)
        logger.warning(
            "Nadir at %s failed (%s) on %s; rules decides, skipping it for %.0f s",
            base,
            exc,
            ctx.route_id,
            NADIR_SKIP_SECONDS,
        )
        return NadirAnswer(None, f"nadir failed: {exc}")
    if not isinstance(selected, str) or selected not in menu:
        return NadirAnswer(None, "nadir selected no model of the menu")
    return NadirAnswer(selected)


async def _call(
    post: NadirPost, base: str, config: Mapping[str, Any], body: dict[str, Any]
) -> object:
    """The ``selected_model`` of a 2xx JSON object reply; ``_Failure`` otherwise."""
    if not is_valid_base_url(base):
        raise _Failure("invalid base URL")
    headers = {"Content-Type": "application/json"}
    key = nadir_api_key(config)
    if key:
        headers["X-API-Key"] = key
    timeout_s = nadir_timeout_s(config)
    try:
        # The poster has the same deadline; wait_for bounds one that ignores it.
        status, raw = await asyncio.wait_for(
            post(f"{base}/v1/bucket", body, headers, timeout_s), timeout=timeout_s
        )
    except TimeoutError as exc:
        raise _Failure("timeout") from exc
    except Exception as exc:  # any transport error of the poster is a failure
        raise _Failure(type(exc).__name__) from exc
    if not 200 <= status < 300:  # noqa: PLR2004 - the 2xx range
        raise _Failure(f"HTTP {status}")
    try:
        reply = json.loads(raw)
    except ValueError as exc:  # JSONDecodeError and UnicodeDecodeError alike
        raise _Failure("malformed JSON") from exc
    if not isinstance(reply, dict):
        raise _Failure("malformed JSON")
    return reply.get("selected_model")


def _skip(base: str, now: float) -> None:
    for url, until in list(_SKIPS.items()):  # expired entries go: the map stays small
        if until <= now:
            del _SKIPS[url]
    _SKIPS[base] = now + NADIR_SKIP_SECONDS
