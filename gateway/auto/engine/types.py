"""Plain data shared by the auto engine's parts (spec 04).

``CandidateInput`` is what the pool builder knows about one (provider, model,
connection) before scoring; ``Scored`` is a candidate after scoring and is also the
read-only *pool item* handed to router strategies (04 §8, "Pool items").
Everything here is immutable and free of I/O.
"""

from __future__ import annotations

import random
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

_EMPTY: Mapping[str, Any] = MappingProxyType({})

TASK_TYPES = (
    "coding",
    "review",
    "planning",
    "analysis",
    "debugging",
    "documentation",
    "default",
)


@dataclass(frozen=True, slots=True, kw_only=True)
class CandidateInput:
    """One candidate with every scoring input already resolved to its source."""

    key: str  # provider/model@connection
    provider: str
    model: str  # bare model id
    connection: str
    #: configured order (0-based); the last tie-break of the ranking
    order: int
    input_cost: float | None = None  # USD per 1M tokens
    output_cost: float | None = None
    #: latency stats from the first source with data (24 h row, live window), ms
    p95_ms: float | None = None
    std_ms: float | None = None  # already derived as 04 §3.1 says
    failure_rate: float | None = None  # 0..1; None = no data
    good_rate: float | None = None  # 0..1; None = no data
    circuit: str = "closed"  # closed | half_open | open
    quota_pct: float | None = None  # 0..100
    resets_at: float | None = None  # unix seconds
    window_s: float | None = None  # quota window
    account_tier: str = "standard"  # ultra | pro | standard | free
    context_window: int | None = None
    max_output_tokens: int | None = None
    capabilities: frozenset[str] | None = None
    model_tier: str | None = None  # catalog tier (model class), if any
    n_conn: int = 1  # active usable connections of the provider
    in_flight: int = 0
    max_concurrency: int = 0  # 0 = unlimited
    fitness: float | None = None  # taskFit for the request's task; None -> 0.5


@dataclass(frozen=True, slots=True, kw_only=True)
class RequestFeatures:
    """What scoring needs to know about the request."""

    task_type: str = "default"
    #: R of spec 03 §3 (input + requested output tokens)
    need_tokens: int = 0
    est_in: int = 0
    est_out: int = 1000
    cache_key: str | None = None
    promptcache_affinity: bool = True
    #: the tierAffinity hint: free | cheap | premium | None
    tier_hint: str | None = None
    complexity_aware: bool = False
    #: low | medium | high (04 §5.3 signals)
    complexity: str = "medium"
    now: float = 0.0


@dataclass(frozen=True, slots=True, kw_only=True)
class Scored:
    """A scored candidate; also the read-only pool item of router strategies."""

    key: str
    provider: str
    model: str
    connection: str
    order: int
    score: float
    default_score: float
    factors: Mapping[str, float]
    cost: float  # blended USD/1M actually used (unknown -> 1.0)
    est_cost_usd: float  # estimated cost of this request (04 §5.2)
    p95: float  # ms actually used (unknown -> 1500)
    std: float
    error_rate: float | None
    circuit: str
    capabilities: frozenset[str] | None
    window: int | None
    candidate: CandidateInput


@dataclass(slots=True, kw_only=True)
class RouterContext:
    """The ``ctx`` of a router strategy (04 §8)."""

    route_id: str
    task_type: str = "default"
    has_tools: bool = False
    has_images: bool = False
    est_in: int = 0
    est_out: int = 1000
    last_user_text: str | None = None
    session_key: str | None = None
    #: the store key of this session's LKGP record, and the record read from it
    lkgp_key: str | None = None
    lkgp_record: str | None = None
    sla: Mapping[str, Any] = field(default_factory=lambda: _EMPTY)
    weights: Mapping[str, float] = field(default_factory=lambda: _EMPTY)
    rng: random.Random = field(default_factory=random.Random)
    now: float = 0.0
    #: nadir settings ({apiKey, baseUrl, timeoutMs}) when configured
    nadir: Mapping[str, Any] | None = None
