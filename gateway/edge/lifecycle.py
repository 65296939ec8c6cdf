"""Process start-up and shutdown for the gateway (ASGI lifespan or first request).

Shutdown follows spec 08 §4, in this order:

1. drain (``gateway.drain``): mark draining, let in-flight requests run for up to
   ``OMNIROUTE_SHUTDOWN_GRACE_SECONDS``, then cut what is still open;
2. the ``drain.on_shutdown`` callbacks (reconcile open reservations, §4 step 5);
3. stop the background threads (sending the target stats still queued for Redis)
   and flush the request log (spilling when the database is down), then the webhook
   deliveries;
4. close the upstream clients and the database pools.

uvicorn (0.54) runs the ASGI lifespan shutdown only *after* it has closed its listening
sockets and waited for every connection to end, so a drain that starts there has
nothing left to drain and no way to answer ``/readyz`` with ``draining``.  So under
uvicorn, ``startup()`` wraps uvicorn's own SIGTERM/SIGINT handler: the first signal
starts the drain at once while uvicorn keeps serving (``/readyz`` says ``draining``,
new chat requests get 503 ``shutting_down``), and uvicorn's handler runs when the
drain is over.  uvicorn then stops accepting, finds no chat request left, and sends
the lifespan shutdown, which runs steps 2-4.  A second signal during the drain goes
straight to uvicorn (Ctrl+C twice still quits).  Under other servers (daphne, tests)
no handler is wrapped and the whole sequence runs from the lifespan shutdown.
"""

from __future__ import annotations

import asyncio
import gc
import logging
import signal
import threading
from collections.abc import Callable
from types import FrameType
from typing import Any

from django.conf import settings
from django.db import connections

from gateway import drain
from gateway.auto.arena import cache as arena_cache
from gateway.auto.stats import cache as stats_cache
from gateway.config.state import tables
from gateway.limits import admission as limits
from providers import scheduler
from providers.health import start_shared_state, stop_shared_state
from providers.http import close_upstream_clients
from providers.target_stats import stats as target_stats
from telemetry import metrics, recorder, webhooks

logger = logging.getLogger(__name__)

SignalHandler = Callable[[int, FrameType | None], Any]
DRAIN_SIGNALS = (signal.SIGTERM, signal.SIGINT)
OWN_CHECKS = ("omniroute.", "providers.")


def refuse_on_failed_checks() -> None:
    """Spec 08 §1: the system checks refuse to start a misconfigured gateway, under
    uvicorn too (which never runs ``manage.py check``): an ``omniroute.``/
    ``providers.`` error stops the startup, naming every failed check."""
    from django.core import checks

    errors = [
        message
        for message in checks.run_checks()
        if message.is_serious()
        and not message.is_silenced()  # as ``manage.py check`` does
        and (message.id or "").startswith(OWN_CHECKS)
    ]
    if errors:
        raise RuntimeError(
            "system checks failed: " + "; ".join(f"{m.id}: {m.msg}" for m in errors)
        )


async def startup() -> None:
    await asyncio.to_thread(refuse_on_failed_checks)
    await tables.ensure()
    # Spec 08 §3.2: load the health mirror and follow Redis now (no-op without it).
    await asyncio.to_thread(start_shared_state)
    await limits.warm()  # spec 08 §6: per-key limits exact from the first burst
    # Spec 04 §3.1: the 24 h statistics, loaded and then refreshed off the request path.
    stats_cache.start()
    # Spec 04 §9.2: Arena fitness, the same way; unused while the sync is off.
    if settings.OMNIROUTE_ARENA_ELO_SYNC_ENABLED:
        arena_cache.start()
    # Without a broker, pending webhook deliveries are rows this process resumes.
    webhooks.start()
    # Issue #15: the embedded default runs the beat schedule in-process.
    scheduler.start()
    try:
        imported = await asyncio.to_thread(recorder.import_spill_files)
    except Exception:
        # Spill files are retried at the next start; serving must not wait on them.
        logger.exception("could not import spilled log rows")
    else:
        if imported:
            logger.info("imported %d spilled request log rows", imported)
    # a worker killed earlier left its live gauges behind (in-flight counts)
    dead = await asyncio.to_thread(metrics.forget_dead_workers)
    if dead:
        logger.info("metrics: forgot the live gauges of dead workers %s", dead)
    hook_server_signals()
    freeze_startup_heap()


def freeze_startup_heap() -> None:
    """Move what start-up allocated (modules, Django's registries, the routing
    table) out of the collector's reach: a full collection then scans only what
    serving allocated since.  Measured in process (bench note in
    docs/benchmarks.md): a full collection went from ~100 ms to ~3 ms, which is
    a p99 spike on every request in flight while it runs."""
    gc.collect()
    gc.freeze()


async def shutdown() -> None:
    await drain.registry.finish(settings.OMNIROUTE_SHUTDOWN_GRACE_SECONDS)
    await drain.registry.run_shutdown_callbacks()
    tables.stop()
    await asyncio.to_thread(scheduler.stop)
    stats_cache.stop()
    arena_cache.stop()
    # After the drain: the last in-flight decrements reach Redis (spec 03 §8.7).
    await asyncio.to_thread(target_stats.stop)
    await asyncio.to_thread(recorder.recorder.shutdown)
    await asyncio.to_thread(webhooks.shutdown)
    await close_upstream_clients()
    await asyncio.to_thread(stop_shared_state)  # spec 08 §4 step 7: Redis pools
    await asyncio.to_thread(close_database_pools)
    metrics.forget_worker()


def close_database_pools() -> None:
    """Close the psycopg pools that exist (reading ``.pool`` would create one)."""
    for alias in connections:
        wrapper = connections[alias]
        pools = getattr(type(wrapper), "_connection_pools", None)
        if pools is not None and alias in pools:
            wrapper.close_pool()  # type: ignore[attr-defined]


# --- starting the drain on the signal (uvicorn) ---------------------------------------


def _is_uvicorn_handler(handler: object) -> bool:
    owner = getattr(handler, "__self__", None)
    return owner is not None and type(owner).__module__.startswith("uvicorn.")


def hook_server_signals() -> list[int]:
    """Wrap uvicorn's handlers of SIGTERM and SIGINT; returns the signals wrapped."""
    if threading.current_thread() is not threading.main_thread():
        return []  # signal handlers can only be set from the main thread
    loop = asyncio.get_running_loop()
    wrapped: list[int] = []
    for sig in DRAIN_SIGNALS:
        previous = signal.getsignal(sig)
        if _is_uvicorn_handler(previous):
            signal.signal(sig, _DrainFirst(loop, previous))  # type: ignore[arg-type]
            wrapped.append(sig)
    return wrapped


class _DrainFirst:
    """A signal handler: drain first, then hand the signal to the server's handler."""

    def __init__(self, loop: asyncio.AbstractEventLoop, server: SignalHandler) -> None:
        self.loop = loop
        self.server = server
        self.task: asyncio.Task[None] | None = None  # a strong reference while it runs

    def __call__(self, sig: int, frame: FrameType | None) -> None:
        if drain.registry.is_draining:
            self.server(sig, frame)  # a second signal: the server's own behaviour
            return
        drain.registry.begin(settings.OMNIROUTE_SHUTDOWN_GRACE_SECONDS)
        # A signal handler may interrupt the loop anywhere; schedule, don't run.
        self.loop.call_soon_threadsafe(self._start, sig)

    def _start(self, sig: int) -> None:
        self.task = self.loop.create_task(self._drain_then_hand_over(sig))

    async def _drain_then_hand_over(self, sig: int) -> None:
        try:
            await drain.registry.finish(settings.OMNIROUTE_SHUTDOWN_GRACE_SECONDS)
        finally:
            self.server(sig, None)
