"""Start-up freezes its heap: full collections while serving skip what start-up
allocated (the modules, Django's registries, the routing table)."""

from __future__ import annotations

import gc

from gateway.edge import lifecycle


def test_startup_objects_leave_the_collectors_generations():
    survivor = [["allocated at start-up"]]  # a container the collector tracks
    try:
        lifecycle.freeze_startup_heap()
        frozen = gc.get_freeze_count()
        assert frozen > 0
        assert not any(o is survivor for o in gc.get_objects(generation=2))
        # what serving allocates afterwards is collected as usual
        later = [["allocated while serving"]]
        gc.collect()
        assert any(o is later for o in gc.get_objects(generation=2))
        assert gc.get_freeze_count() == frozen
    finally:
        gc.unfreeze()
