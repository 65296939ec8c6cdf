"""The slot loop (spec 02 §5, §7): the chain's slots in order until one answers.

Each slot runs as its strategy says (``gateway.slots.run_slot``); between two slots a
``model_failover`` event is recorded (02 §12), and when no slot answered the terminal
error says why (02 §9).  A client that leaves while the loop runs ends the request
as ``client_closed`` (499), logged with every attempt made so far.
"""

from __future__ import annotations

import asyncio
import logging

from gateway.auto.live import auto_route
from gateway.pipeline import report
from gateway.pipeline.result import Result
from gateway.pipeline.run import Run
from gateway.slots import run_composite, run_slot

logger = logging.getLogger("omniroute.gateway")


async def run_chain(run: Run) -> Result:
    run.rec.route = run.route
    run.rec.items = run.items
    run.composite = run_composite
    if any(auto_route(slot) is not None for slot in run.chain):
        # spec 02 §6.4: header validation ends a request before any call
        error = run.read_controls()
        if error is not None:
            return report.refusal(run.ctx, error, run.rec)
    try:
        return await _slots(run)
    except asyncio.CancelledError:
        run.rec.client_closed(499, run.failover)
        run.ctx.record(run.rec)
        raise


async def _slots(run: Run) -> Result:
    warnings: list[str] = []
    for index, slot in enumerate(run.chain):
        result = await run_slot(run, slot, index, warnings)
        if result is not None:
            return result
        if index + 1 < len(run.chain):
            report.model_failover(run, index)
    for warning in warnings:
        logger.warning("%s", warning)
    return report.all_failed(run)
