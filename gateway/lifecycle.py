"""Process start-up and shutdown for the gateway (ASGI lifespan or first request)."""

from __future__ import annotations

import asyncio
import logging

from django.conf import settings

from gateway.arena_cache import cache as arena_cache
from gateway.state import tables
from gateway.stats_cache import cache as stats_cache
from providers.http import close_upstream_clients
from telemetry import recorder, webhooks

logger = logging.getLogger(__name__)


async def startup() -> None:
    await tables.ensure()
    # Spec 04 §3.1: the 24 h statistics, loaded and then refreshed off the request path.
    stats_cache.start()
    # Spec 04 §9.2: Arena fitness, the same way; unused while the sync is off.
    if settings.OMNIROUTE_ARENA_ELO_SYNC_ENABLED:
        arena_cache.start()
    # Without a broker, pending webhook deliveries are rows this process resumes.
    webhooks.start()
    try:
        imported = await asyncio.to_thread(recorder.import_spill_files)
    except Exception:
        # Spill files are retried at the next start; serving must not wait on them.
        logger.exception("could not import spilled log rows")
    else:
        if imported:
            logger.info("imported %d spilled request log rows", imported)


async def shutdown() -> None:
    tables.stop()
    stats_cache.stop()
    arena_cache.stop()
    await asyncio.to_thread(recorder.recorder.shutdown)
    await asyncio.to_thread(webhooks.shutdown)
    await close_upstream_clients()
