"""Per-process state: the current routing table and the config watcher.

The table is immutable and swapped whole (one attribute assignment, atomic under the
GIL); a request keeps the table it read at its start.  A daemon thread polls the
config revision every ``OMNIROUTE_CONFIG_POLL_MS`` and rebuilds the table off the
request path when it changed, so a change reaches this worker within the poll
interval plus one rebuild (the spec allows 2 s).  With Redis, a version published on
``omniroute:config`` after each config commit wakes the watcher at once (spec 08
§3.4); the poll stays, so a lost message costs at most one interval.

``report_shared_state()`` feeds the shared state's health into Prometheus.
"""

from __future__ import annotations

import asyncio
import json
import logging
import threading
from collections.abc import Mapping
from typing import Any
from urllib.parse import urlsplit

from django.conf import settings
from django.db import close_old_connections

from gateway.config.refreshed import close_connections_quietly
from gateway.kernel.types import RoutingTable
from telemetry import metrics
from telemetry.sanitize import set_known_secrets

logger = logging.getLogger(__name__)


class TableHolder:
    def __init__(self) -> None:
        self.table: RoutingTable | None = None
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._wake = threading.Event()  # a published config version: check now
        self._thread: threading.Thread | None = None
        self._listening = False

    def refresh(self) -> RoutingTable:
        """Rebuild now (sync ORM; never call from the event loop thread)."""
        from gateway.config.snapshot import build_table

        with self._lock:
            table = build_table()
            set_known_secrets(known_secrets(table))
            previous, self.table = self.table, table
        if previous is not None:
            gone = _names(previous) - _names(table)
            if gone:
                metrics.forget_labels(gone)
            _reenable_new_credentials(previous, table)
        logger.info("routing table loaded: config version %s", table.version)
        return table

    def start(self) -> None:
        """Start the watcher thread once per process."""
        if self._thread is not None and self._thread.is_alive():
            return
        self._stop.clear()
        self._thread = threading.Thread(
            target=self._watch, name="omniroute-config-watcher", daemon=True
        )
        self._thread.start()
        self._listen()

    def stop(self) -> None:
        self._stop.set()
        self._wake.set()

    def _listen(self) -> None:
        """Follow ``omniroute:config`` when Redis is configured (once per process)."""
        if not settings.REDIS_URL or self._listening:
            return
        from providers.redis_store import CONFIG_CHANNEL, shared_link

        link = shared_link()
        if link is None:
            return
        self._listening = True
        link.subscriber.listen(
            link.channel(CONFIG_CHANNEL), self._announced, on_connect=self._wake.set
        )

    def _announced(self, data: bytes) -> None:
        current = self.table
        if current is None or data.decode(errors="replace") != str(current.version):
            self._wake.set()

    def _watch(self) -> None:
        from gateway.config.snapshot import current_version

        interval = settings.OMNIROUTE_CONFIG_POLL_MS / 1000
        while True:
            self._wake.wait(interval)
            if self._stop.is_set():
                return
            self._wake.clear()
            try:
                version = current_version()
                current = self.table
                if current is None or version != current.version:
                    self.refresh()
            except Exception:
                # The watcher must survive a DB outage; the old table keeps serving.
                logger.exception("config watcher: refresh failed")
            finally:
                close_connections_quietly("config watcher")

    async def ensure(self) -> RoutingTable:
        """The current table, loading it on first use (servers without lifespan)."""
        table = self.table
        if table is not None:
            return table
        table = await asyncio.to_thread(self._first_load)
        self.start()
        return table

    def _first_load(self) -> RoutingTable:
        try:
            if self.table is not None:
                return self.table
            table = self.refresh()
            warn_shadowing_combos(table)
            return table
        finally:
            close_old_connections()


def known_secrets(table: RoutingTable) -> list[str | None]:
    """Every secret the table holds, for the sanitiser: the connections' keys and
    the proxies' passwords (spec 10 §4: proxy credentials are secrets)."""
    found: list[str | None] = []
    for provider in table.providers.values():
        for conn in provider.connections:
            found.append(conn.api_key)
            if conn.auth is not None:  # AWS keys, a service account, Entra (10 §3)
                found += _auth_secrets(conn.auth.secrets)
        proxy = provider.settings.get("proxy_url")
        if isinstance(proxy, str) and proxy != "none":
            found.append(urlsplit(proxy).password)
    return found


def _auth_secrets(secrets: Mapping[str, str]) -> list[str | None]:
    """A credential's secret values as the sanitiser masks them: the whole value,
    and a service account's private key apart (it appears in JSON-escaped form)."""
    found: list[str | None] = list(secrets.values())
    account = secrets.get("service_account_json")
    if account:
        try:
            parsed = json.loads(account)
        except ValueError:
            parsed = None
        if isinstance(parsed, dict):
            found += [parsed.get("private_key"), parsed.get("private_key_id")]
    return found


def _secrets(table: RoutingTable) -> dict[str, Any]:
    return {
        f"{provider.slug}@{conn.name}": (
            conn.api_key,
            tuple(sorted(conn.auth.secrets.items())) if conn.auth else (),
        )
        for provider in table.providers.values()
        for conn in provider.connections
    }


def _reenable_new_credentials(previous: RoutingTable, table: RoutingTable) -> None:
    """Spec 03 §8.3: saving new credentials clears an auth disable, whichever way
    they were saved (admin, REST, ``import_config``, another node): every worker
    sees the change when it rebuilds its table."""
    from providers.health import board

    before = _secrets(previous)
    for key, secret in _secrets(table).items():
        if key in before and before[key] != secret:
            board.reenable(key)


def _names(table: RoutingTable) -> set[str]:
    """Configured names that metric labels carry: providers, combos, aliases."""
    return {
        *(p.slug for p in table.providers.values()),
        *(c.name for c in table.combos.values()),
        *table.smart_routes,
    }


def shadowing_combos(table: RoutingTable) -> list[str]:
    """``name (provider/model)`` of every combo named like a bare catalog model id."""
    found = []
    for combo in sorted(table.combos.values(), key=lambda c: c.name.lower()):
        owners = sorted(table.bare_models.get(combo.name.lower(), ()))
        if owners:
            slug, model_id = owners[0]
            found.append(f"{combo.name} ({slug}/{model_id})")
    return found


def warn_shadowing_combos(table: RoutingTable) -> None:
    """Spec 03 §1.3: one WARNING line at process start listing every collision."""
    found = shadowing_combos(table)
    if found:
        logger.warning("COMBO_NAME_SHADOWS_MODEL: %s", ", ".join(found))


tables = TableHolder()


class _SharedStateMetrics:
    def fallback(self, op: str) -> None:
        metrics.SHARED_STATE_FALLBACKS.labels(op).inc()

    def redis_up(self, up: bool) -> None:
        metrics.REDIS_UP.set(1 if up else 0)


def report_shared_state() -> None:
    """Count the shared state's local fallbacks and Redis's health (app ready)."""
    from providers.state_store import observe

    observe(_SharedStateMetrics())
