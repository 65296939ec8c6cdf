"""A map loaded from the database off the request path: one daemon thread loads it at
start and then every ``refresh_seconds``, swapping the whole map in with one
assignment; a failed refresh keeps the previous map (a DB outage must not stop it).
Subclasses give ``refresh()`` (sync ORM, never on the event loop thread)."""

from __future__ import annotations

import logging
import threading
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any, Generic, TypeVar

from django.db import close_old_connections

logger = logging.getLogger(__name__)
K = TypeVar("K")
V = TypeVar("V")


def close_connections_quietly(label: str) -> None:
    """Close this thread's unusable or expired connections without raising: the
    check itself touches the connection, which raises while the database is
    unreachable (or, in tests, blocked), and a background loop must outlive that."""
    try:
        close_old_connections()
    except Exception:
        logger.warning(
            "%s: closing the database connection failed", label, exc_info=True
        )


class RefreshedCache(Generic[K, V]):
    #: thread name and log label
    label = "cache"
    refresh_seconds = 60.0

    def __init__(self) -> None:
        self._rows: Mapping[K, V] = MappingProxyType({})
        self._start_lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def load(self, rows: Mapping[K, V]) -> None:
        """Swap in a new map (the refresh, and tests)."""
        self._rows = MappingProxyType(dict(rows))

    def refresh(self) -> int:
        raise TypeError(f"{type(self).__name__} must define refresh()")

    @property
    def is_running(self) -> bool:
        thread = self._thread
        return thread is not None and thread.is_alive()

    def start(self) -> None:
        """Start the refresher once per process; cheap when already running."""
        if self.is_running:
            return
        with self._start_lock:
            if self.is_running:
                return
            self._stop.clear()
            self._thread = threading.Thread(
                target=self._run, name=f"omniroute-{self.label}-refresher", daemon=True
            )
            self._thread.start()

    def stop(self) -> None:
        self._stop.set()

    def _run(self) -> None:
        while not self._stop.is_set():
            self.refresh_once()
            self._stop.wait(self.refresh_seconds)

    def refresh_once(self) -> None:
        """One refresh that never raises: a failure keeps the previous map, and so
        does a failure to close the thread's connection afterwards (closing checks
        the connection, which raises while the database is unreachable or, in
        tests, blocked); an escaping exception would end the thread for good."""
        try:
            count = self.refresh()
        except Exception:
            logger.exception("%s cache: refresh failed", self.label)
        else:
            logger.debug("%s cache: %d entries", self.label, count)
        close_connections_quietly(self.label)


__all__: list[Any] = ["RefreshedCache", "close_connections_quietly"]
