"""The strategies that do not order survivors themselves (spec 03 §5, 04, 05 §3):
declarations only, so that every reader of ``Traits`` sees all 21.

* ``adaptive``: weighted power of two choices over live latency (05 §3), planned by
  the session-aware planner (``gateway.planning.affinity``);
* ``auto``: the auto engine (``gateway.auto``) scores its pool;
* ``fusion``, ``pipeline``: composite strategies; the combo runs as one unit, by the
  module its ``runner`` names (``gateway.slots``).
"""

from __future__ import annotations

from dataclasses import dataclass

from gateway.planning.strategies.traits import Family, Traits, choice, custom


@dataclass(frozen=True, slots=True)
class Declared:
    """A strategy known by its declaration alone."""

    name: str
    traits: Traits


#: the non-ordering strategies (spec 03 §5 order: auto, adaptive, fusion, pipeline);
#: a composite strategy is one entry here and the module its ``runner`` names
DECLARED: tuple[Declared, ...] = (
    Declared(
        "auto",
        Traits(
            summary="zero-config: score every model for the request and pick the best",
            family=Family.AUTO,
            config=(custom("auto"), custom("routerStrategy")),
        ),
    ),
    Declared(
        "adaptive",
        Traits(
            summary="learns live latency and price; the better of two drawn wins",
            family=Family.ADAPTIVE,
            pin_capable=True,
            expands=True,
            config=(choice("objective", "latency", "cost", "balanced"),),
        ),
    ),
    Declared(
        "fusion",
        Traits(
            summary="asks several models at once; a judge merges their answers",
            family=Family.COMPOSITE,
            runner="gateway.slots.fusion",
            config=(custom("judgeModel"), custom("fusionTuning")),
        ),
    ),
    Declared(
        "pipeline",
        Traits(
            summary="run the targets as stages, each one's answer feeding the next",
            family=Family.COMPOSITE,
            runner="gateway.slots.stages",
            config=(custom("stagePrompts"), custom("agenticOrchestration")),
        ),
    ),
)
