"""The pure routing engine: plain Python over plain data (style §1.2).

Nothing here imports Django, an HTTP client, asyncio, the clock or a global random
source; time and chance arrive as arguments.  ``tests/engine/test_purity.py`` keeps
it that way.
"""

from gateway.kernel.autoids import UnknownAutoVariant, parse_auto_id
from gateway.kernel.chain import (
    ChainError,
    build_chain,
    effective_options,
    plan_targets,
)
from gateway.kernel.errors import Classification, FailureDetail, FailureReason
from gateway.kernel.failover import Item, Terminal, should_continue, terminal
from gateway.kernel.resolve import ModelNotFound, Resolved, RouteKind, resolve
from gateway.kernel.types import RoutingTable, Target

__all__ = [
    "ChainError",
    "Classification",
    "FailureDetail",
    "FailureReason",
    "Item",
    "ModelNotFound",
    "Resolved",
    "RouteKind",
    "RoutingTable",
    "Target",
    "Terminal",
    "UnknownAutoVariant",
    "build_chain",
    "effective_options",
    "parse_auto_id",
    "plan_targets",
    "resolve",
    "should_continue",
    "terminal",
]
