"""One gateway worker process for the multi-process limit tests (spawned, not forked).

``run_worker`` sets Django up in the fresh interpreter, builds its own Redis limiter
and, once every worker is at the barrier, sends ``count`` concurrent admissions.
"""

from __future__ import annotations

import asyncio
import os
import time
import uuid
from typing import Any


def run_worker(url: str, fields: dict[str, Any], count: int, barrier, results) -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "omniroute_site.settings_test")
    import django

    django.setup()
    asyncio.run(_admit_all(url, fields, count, barrier, results))


async def _admit_all(url, fields, count, barrier, results) -> None:
    from gateway.kernel.limits import budget_period
    from gateway.limits.admission import Limiter, Ticket
    from gateway.limits.shared import RedisLimits
    from gateway.limits.store import Demand, LocalLimits, SpentSeeds

    seed = fields.pop("seed", 0)
    timeout_s = fields.pop("timeout_s", 5.0)
    #: CPU milliseconds each request burns before it asks (a loaded event loop)
    busy_ms = fields.pop("busy_ms", 0)
    seeds = SpentSeeds(read=lambda key_id, period: seed)
    shared = RedisLimits(url, timeout_s=timeout_s, seeds=seeds)
    gate = Limiter(local=LocalLimits(seeds), shared=shared)
    now_ms = fields.pop("now_ms")
    period = budget_period("month", now_ms / 1000) if "budget" in fields else None
    demands = [
        Demand(request_id=uuid.uuid4().hex, now_ms=now_ms, period=period, **fields)
        for _ in range(count)
    ]
    await shared.admit(Demand(key_id=-1, request_id="warm-up", now_ms=now_ms))
    barrier.wait()

    async def admit(demand):
        if busy_ms:  # parsing, auth, planning: the loop is busy while Redis answers
            until = time.perf_counter() + busy_ms / 1000
            while time.perf_counter() < until:
                pass
            await asyncio.sleep(0)
        return await gate.admit(demand)

    verdicts = await asyncio.gather(*(admit(d) for d in demands))
    await shared.aclose()
    fallbacks = gate.monotonic() < gate._skip_until
    results.put((sum(isinstance(v, Ticket) for v in verdicts), fallbacks))
