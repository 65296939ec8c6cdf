"""The auto engine (spec 04): pool, scoring, strategies, self-healing.

Plain Python over plain data; the clock and the random source are passed in.
Custom router strategies register here::

    from gateway.auto.engine import RouterStrategy, register_router_strategy
"""

from gateway.auto.engine.routers import (
    RouterStrategy,
    get_router_strategy,
    register_router_strategy,
)
from gateway.auto.engine.weights import (
    DEFAULT_WEIGHTS,
    MODE_PACKS,
    normalize_scoring_weights,
)

__all__ = [
    "DEFAULT_WEIGHTS",
    "MODE_PACKS",
    "RouterStrategy",
    "get_router_strategy",
    "normalize_scoring_weights",
    "register_router_strategy",
]
