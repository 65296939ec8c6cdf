"""Credentials that take I/O to obtain (spec 10 §1, §3): bearer tokens minted from a
Google service account or Entra client credentials, and default credential chains.

The dialects are pure: they take an ``Auth`` whose ``token`` (or resolved secrets) is
already there.  This module gets it there.  A kind that needs it registers one
``Minter`` in ``MINTERS`` (one line, next to its other I/O); every other kind's
``Auth`` passes through ``ready`` untouched without a coroutine switch.

Caching (spec 10 §1: "cached until 5 minutes before expiry, refreshed off the request
path"): a minted ``Auth`` is kept per credential (the kind, its secrets and settings,
compared by value, held in memory only).  A request finds it fresh and uses it; within
``REFRESH_MARGIN_S`` of its expiry it still uses it and starts one background refresh;
past its expiry (or never minted) it waits for one mint, shared by every request that
arrives meanwhile on the same event loop.  A failed background refresh is logged and
retried by the next request; a minted credential the upstream refuses (401/403) is
dropped (``refused``), so the next attempt mints anew, while that attempt still
counts as an auth failure; a failed mint fails the attempt as
``CredentialUnavailable`` (``auth`` when the credential was refused, else
``connection_error``), never with the secret in its message.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Final, Protocol

from gateway.kernel.types import Auth

logger = logging.getLogger(__name__)

#: a token is refreshed when it has less than this left (spec 10 §1: 5 minutes)
REFRESH_MARGIN_S: Final = 300.0
_MAX_ENTRIES: Final = 4096


@dataclass(frozen=True, slots=True)
class Minted:
    """What a minter obtained: the ``Auth`` to build requests with (its ``token`` or
    resolved secrets filled) and when it stops being valid (None: never)."""

    auth: Auth
    expires_at: float | None


class CredentialUnavailable(Exception):
    """No usable credential: ``reason`` is ``auth`` (refused: a wrong secret, a
    revoked account) or ``connection_error`` (the token endpoint was unreachable
    or answered nonsense).  The message never holds a secret."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason


class Minter(Protocol):
    """One kind's credential I/O."""

    def wants(self, auth: Auth) -> bool:
        """True when ``auth`` needs minting (an Azure key does not, its Entra
        credential does)."""
        ...

    def mint(self, auth: Auth, outbound: Any) -> Awaitable[Minted]:
        """Mint (or resolve) ``auth``; ``outbound`` is the provider's
        ``ProviderOutbound`` (its proxy and trust apply to the token endpoint too).
        Raises ``CredentialUnavailable``."""
        ...


#: kind -> its minter; a kind absent here needs no I/O for its credential
MINTERS: dict[str, Minter] = {}


def needs_minting(auth: Auth | None) -> bool:
    """True when ``auth`` must go through ``ready`` before a request is built."""
    if auth is None:
        return False
    minter = MINTERS.get(auth.kind)
    return minter is not None and auth.token is None and minter.wants(auth)


@dataclass(slots=True)
class _Entry:
    minted: Minted
    refreshing: bool = False


def _key(auth: Auth) -> tuple[Any, ...]:
    return (
        auth.kind,
        tuple(sorted(auth.secrets.items())),
        tuple(sorted((k, repr(v)) for k, v in auth.settings.items())),
    )


_cache: dict[tuple[Any, ...], _Entry] = {}
#: (event loop, credential) -> the mint in flight there
_inflight: dict[tuple[int, tuple[Any, ...]], asyncio.Future[Minted]] = {}
_background: set[asyncio.Task[None]] = set()


async def ready(
    auth: Auth | None,
    outbound: Any = None,
    *,
    clock: Callable[[], float] = time.time,
) -> Auth | None:
    """``auth`` ready to build a request with: minted when its kind needs it, from
    the cache when it holds a fresh one."""
    if auth is None or not needs_minting(auth):
        return auth
    key = _key(auth)
    now = clock()
    entry = _cache.get(key)
    if entry is not None:
        expires = entry.minted.expires_at
        if expires is None or now < expires - REFRESH_MARGIN_S:
            return entry.minted.auth
        if now < expires:  # still valid: use it, refresh in the background
            if not entry.refreshing:
                entry.refreshing = True
                task = asyncio.get_running_loop().create_task(
                    _refresh(key, auth, outbound, entry)
                )
                _background.add(task)
                task.add_done_callback(_background.discard)
            return entry.minted.auth
    return (await _mint_shared(key, auth, outbound)).auth


async def _mint_shared(key: tuple[Any, ...], auth: Auth, outbound: Any) -> Minted:
    loop = asyncio.get_running_loop()
    flight_key = (id(loop), key)
    flight = _inflight.get(flight_key)
    if flight is not None:
        return await asyncio.shield(flight)
    flight = loop.create_future()
    _inflight[flight_key] = flight
    try:
        minted = await MINTERS[auth.kind].mint(auth, outbound)
    except CredentialUnavailable as exc:
        flight.set_exception(exc)
        flight.exception()  # retrieved: no "never retrieved" warning when unshared
        raise
    except Exception as exc:  # noqa: BLE001 - a minter bug must not leak a secret
        logger.warning(
            "minting a %s credential failed: %s", auth.kind, type(exc).__name__
        )
        failure = CredentialUnavailable(
            "connection_error", f"could not obtain a {auth.kind} credential"
        )
        flight.set_exception(failure)
        flight.exception()
        raise failure from None
    finally:
        _inflight.pop(flight_key, None)
    _store(key, minted)
    flight.set_result(minted)
    return minted


def _store(key: tuple[Any, ...], minted: Minted) -> None:
    if len(_cache) >= _MAX_ENTRIES:
        _cache.clear()
    _cache[key] = _Entry(minted)


async def _refresh(
    key: tuple[Any, ...], auth: Auth, outbound: Any, entry: _Entry
) -> None:
    try:
        await _mint_shared(key, auth, outbound)
    except CredentialUnavailable as exc:
        entry.refreshing = False  # the next request tries again
        logger.warning("refreshing a %s credential failed: %s", auth.kind, exc)


def refused(auth: Auth, used: Auth) -> bool:
    """The upstream refused (401/403) ``used``, minted for ``auth``: the cached
    entry goes, so the next attempt mints anew instead of resending a token the
    upstream no longer takes until its own expiry.  An entry minted since (another
    request's fresh token) stays.  True when an entry was dropped."""
    if not needs_minting(auth):
        return False
    key = _key(auth)
    entry = _cache.get(key)
    if entry is None or entry.minted.auth is not used:
        return False
    del _cache[key]
    return True


def forget() -> None:
    """Drop every cached credential (tests; a rotated secret is a new key anyway)."""
    _cache.clear()
