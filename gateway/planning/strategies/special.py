"""The four strategies that do not order survivors themselves (spec 03 §5, 04, 05 §3):
their declarations, so that every reader of ``Traits`` sees all 21.

* ``adaptive``: weighted power of two choices over live latency (05 §3), planned by
  the session-aware planner (``gateway.planning.affinity``);
* ``auto``: the auto engine (``gateway.auto``) scores its pool;
* ``fusion``, ``pipeline``: the combo runs as one unit (``gateway.slots``).
"""

from __future__ import annotations

from gateway.planning.strategies.traits import Family, Traits, choice, custom


class Adaptive:
    name = "adaptive"
    traits = Traits(
        family=Family.ADAPTIVE,
        pin_capable=True,
        expands=True,
        config=(choice("objective", "latency", "cost", "balanced"),),
    )


class Auto:
    name = "auto"
    traits = Traits(
        family=Family.AUTO, config=(custom("auto"), custom("routerStrategy"))
    )


class Fusion:
    name = "fusion"
    traits = Traits(
        family=Family.COMPOSITE, config=(custom("judgeModel"), custom("fusionTuning"))
    )


class Pipeline:
    name = "pipeline"
    traits = Traits(
        family=Family.COMPOSITE,
        config=(custom("stagePrompts"), custom("agenticOrchestration")),
    )
