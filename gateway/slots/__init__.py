"""How one chain slot runs (spec 02 §5, 03 §6-7, 04 §1.4): one module per way, one
registry line each.

* ``sequential``: plan the slot, then call its units one after another (every
  ordering strategy, ``adaptive``, ``auto``);
* ``chaos``: an auto decision's fan-out, first good answer wins (chosen by the
  decision inside ``sequential``);
* ``fusion`` and ``pipeline``: composite strategies; the combo runs as ONE unit
  (``gateway.slots.composite``), as a chain slot or as a unit inside another plan.

Every way runs its calls on the attempt runner (``gateway.pipeline.attempt``).
"""

from __future__ import annotations

import importlib
import types
from collections.abc import Mapping

from gateway.kernel.chain import Slot
from gateway.kernel.types import ComboInfo
from gateway.pipeline import report
from gateway.pipeline.result import Result
from gateway.pipeline.run import CompositeDone, Run
from gateway.planning.strategies import COMPOSITE, traits
from gateway.slots import sequential
from gateway.slots.composite import Body, Composite, is_composite


def _runner(strategy: str) -> Body:
    module = traits(strategy).runner
    assert module is not None, f"composite strategy {strategy!r} names no runner"
    run: Body = importlib.import_module(module).run
    return run


#: composite strategy -> how its combo runs as one unit (the module its declaration
#: names as ``runner``)
COMPOSITES: Mapping[str, Body] = types.MappingProxyType(
    {name: _runner(name) for name in sorted(COMPOSITE)}
)


async def run_slot(
    run: Run, slot: Slot, index: int, warnings: list[str]
) -> Result | None:
    """Slot ``index`` of the chain: its result, or None to try the next one."""
    combo = slot.resolved.combo
    if is_composite(combo):
        done = await run_composite(run, slot, index, combo, False)
        if (
            done.result is None
            and done.target is not None
            and run.stops(slot, done.target)
        ):
            return report.all_failed(run)
        return done.result
    return await sequential.run(run, slot, index, warnings)


async def run_composite(
    run: Run, slot: Slot, index: int, combo: ComboInfo | None, in_plan: bool
) -> CompositeDone:
    """A fusion or pipeline combo as one unit: a chain slot, or (``in_plan``) a unit
    of another combo's plan (03 §4.4)."""
    combo = combo or slot.resolved.combo
    assert combo is not None
    c = Composite(
        run=run, slot=slot, index=index, combo=combo, bodies=COMPOSITES, in_plan=in_plan
    )
    done = await COMPOSITES[combo.strategy](c)
    return CompositeDone(result=done.result, target=done.target)
