"""Every Prometheus object of the gateway, defined once (spec 06 §2).

Label values come only from bounded sets; ``bounded()`` additionally folds label sets
beyond ``OMNIROUTE_METRICS_MAX_SERIES`` per family into ``other`` and counts the fold.
"""

from __future__ import annotations

import os
import re
from typing import Any

from prometheus_client import Counter, Gauge, Histogram

DURATION_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 20, 30, 60, 120, 300)
OVERHEAD_BUCKETS = (0.0005, 0.001, 0.002, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25)

REQUESTS = Counter(
    "omniroute_requests_total",
    "Client requests",
    ("endpoint", "route", "served_model", "status"),
)
REQUEST_DURATION = Histogram(
    "omniroute_request_duration_seconds",
    "Receipt to last byte",
    ("endpoint", "route", "stream"),
    buckets=DURATION_BUCKETS,
)
REQUEST_TTFT = Histogram(
    "omniroute_request_ttft_seconds",
    "Receipt to first content token sent",
    ("route",),
    buckets=DURATION_BUCKETS,
)
UPSTREAM_ATTEMPTS = Counter(
    "omniroute_upstream_attempts_total",
    "Upstream attempts",
    ("provider", "model", "connection", "result"),
)
UPSTREAM_LATENCY = Histogram(
    "omniroute_upstream_latency_seconds",
    "Attempt start to full body / first byte",
    ("provider", "model", "stream"),
    buckets=DURATION_BUCKETS,
)
UPSTREAM_TTFT = Histogram(
    "omniroute_upstream_ttft_seconds",
    "Streaming attempt start to first content token",
    ("provider", "model"),
    buckets=DURATION_BUCKETS,
)
FAILOVERS = Counter(
    "omniroute_failovers_total",
    "Moves from a failed attempt to the next target",
    ("reason",),
)
MODEL_FAILOVERS = Counter(
    "omniroute_model_failover_total",
    "Moves from one chain slot to the next",
    ("from_model", "to_model", "reason"),
)
# In-flight and buffered counts are summed over the live workers: a worker that
# died (kill -9) leaves no series behind (``forget_dead_workers``).
REQUESTS_IN_FLIGHT = Gauge(
    "omniroute_requests_in_flight",
    "Client requests in progress",
    ("stream",),
    multiprocess_mode="livesum",
)
UPSTREAM_IN_FLIGHT = Gauge(
    "omniroute_upstream_in_flight",
    "Upstream attempts in progress",
    ("provider",),
    multiprocess_mode="livesum",
)
OVERHEAD = Histogram(
    "omniroute_gateway_overhead_seconds",
    "Total time minus upstream waits",
    ("stream",),
    buckets=OVERHEAD_BUCKETS,
)
REFUSALS = Counter(
    "omniroute_refusals_total", "Gateway-side refusals by error code", ("code",)
)
CLIENT_DISCONNECTS = Counter(
    "omniroute_client_disconnects_total", "Clients gone before completion", ("route",)
)
TOKENS = Counter(
    "omniroute_tokens_total", "Tokens by kind", ("provider", "model", "kind")
)
COST = Counter(
    "omniroute_cost_usd_total", "Billable cost in USD", ("provider", "model")
)
LOG_ROWS_DROPPED = Counter(
    "omniroute_log_rows_dropped_total", "Log rows dropped", ("table", "reason")
)
LOG_BUFFER_ROWS = Gauge(
    "omniroute_log_buffer_rows",
    "Rows waiting to be written",
    ("table",),
    multiprocess_mode="livesum",
)
LOG_FLUSH_FAILURES = Counter(
    "omniroute_log_flush_failures_total", "Failed flush transactions"
)
CIRCUIT_STATE = Gauge(
    "omniroute_circuit_state", "0 closed, 1 half-open, 2 open", ("breaker",)
)
WEBHOOK_ENQUEUE_FAILURES = Counter(
    "omniroute_webhook_enqueue_failures_total",
    "Webhook deliveries not handed on (broker unreachable, buffer full, insert failed)",
)
CONFIG_VERSION = Gauge("omniroute_config_version", "Config snapshot version in use")
# --- smart routing and adaptive (spec 05 §2.4, §3.8) ---------------------------------
SMART_SCORE_BUCKETS = (0, 1, 2, 3, 4, 5, 6, 7, 8, 10, 12, 16, 22)
SMARTROUTE_REQUESTS = Counter(
    "omniroute_smartroute_requests_total",
    "Requests routed through a smart alias",
    ("alias", "tier", "source", "mode"),
)
SMARTROUTE_ESCALATIONS = Counter(
    "omniroute_smartroute_escalations_total",
    "Session tier pins moved from easy to hard",
    ("alias",),
)
SMARTROUTE_SCORE = Histogram(
    "omniroute_smartroute_score",
    "Smart routing classifier score",
    ("alias",),
    buckets=SMART_SCORE_BUCKETS,
)
SMARTROUTE_SIGNALS = Counter(
    "omniroute_smartroute_signals_total",
    "Classifier signals that fired",
    ("alias", "signal"),
)
ROUTING_SELECTIONS = Counter(
    "omniroute_routing_selections_total",
    "Adaptive selections",
    ("combo", "target", "reason"),
)
ROUTING_COOLDOWNS = Counter(
    "omniroute_routing_cooldowns_total",
    "Health penalties an attempt started",
    ("target", "trigger"),
)
ROUTING_COOLDOWN_ACTIVE = Gauge(
    "omniroute_routing_cooldown_active", "1 while the target is cooling", ("target",)
)
ROUTING_LATENCY_ESTIMATE = Gauge(
    "omniroute_routing_latency_estimate_ms",
    "Peak-EWMA latency estimate on this node",
    ("target",),
)
ROUTING_IN_FLIGHT = Gauge(
    "omniroute_routing_in_flight",
    "Attempts in flight on this node",
    ("target",),
    multiprocess_mode="livesum",
)
ROUTING_SESSION_AFFINITY = Counter(
    "omniroute_routing_session_affinity_total",
    "Session target pins honoured, released or bypassed",
    ("combo", "outcome"),
)
ROUTING_ALL_COOLING = Counter(
    "omniroute_routing_all_cooling_total",
    "Adaptive choices made while every eligible candidate was cooling",
    ("combo",),
)
LABEL_OVERFLOW = Counter(
    "omniroute_metrics_label_overflow_total",
    "Label sets folded into other",
    ("metric",),
)

_children: dict[tuple[int, tuple[str, ...]], Any] = {}
_counts: dict[int, int] = {}
_families: dict[int, Any] = {}


def _max_series() -> int:
    try:
        return int(os.environ.get("OMNIROUTE_METRICS_MAX_SERIES", "5000"))
    except ValueError:
        return 5000


_MAX_SERIES = _max_series()


def family_name(metric: Any) -> str:
    """The name spec 06 §2 gives the metric: a counter's keeps its ``_total``,
    which prometheus_client strips from ``_name``."""
    name = str(metric._name)
    return f"{name}_total" if metric._type == "counter" else name


def bounded(metric: Any, *values: str) -> Any:
    """``metric.labels(*values)``; label sets past the cap fold into ``other``.

    Children are cached, so the hot path pays one dict lookup per update.
    """
    key = (id(metric), values)
    child = _children.get(key)
    if child is not None:
        return child
    count = _counts.get(id(metric), 0)
    if count >= _MAX_SERIES:
        LABEL_OVERFLOW.labels(family_name(metric)).inc()
        return metric.labels(*("other" for _ in values))
    _counts[id(metric)] = count + 1
    _families[id(metric)] = metric
    child = _children[key] = metric.labels(*values)
    return child


def forget_labels(gone: set[str]) -> int:
    """Remove every series carrying one of ``gone`` as a whole label value or as
    its ``provider/`` or ``provider@`` part (spec 06 §2 rule 4: removed
    providers, combos and aliases lose their series at the next config reload)."""

    def stale(value: str) -> bool:
        if value in gone:
            return True
        head = value.split("/", 1)[0].split("@", 1)[0].removeprefix("combo:")
        return head in gone

    removed = 0
    for key in [k for k in _children if any(stale(v) for v in k[1])]:
        metric_id, values = key
        family = _families.get(metric_id)
        del _children[key]
        _counts[metric_id] = max(0, _counts.get(metric_id, 1) - 1)
        if family is not None:
            try:
                family.remove(*values)
            except KeyError:
                continue
            removed += 1
    return removed


def forget_series() -> None:
    """Drop cached children (series of removed providers go at the next reload)."""
    _children.clear()
    _counts.clear()


# --- live routing feed (spec 06 §4.2) ------------------------------------------------
FEED_MESSAGES_DROPPED = Counter(
    "omniroute_feed_messages_dropped_total",
    "Live-feed messages not delivered (layer error, over 50 ms, too many in flight)",
)
JOB_LAST_SUCCESS = Gauge(
    "omniroute_job_last_success_timestamp_seconds",
    "Unix time of each scheduled job's last successful run (read at scrape time)",
    ("job",),
)
# --- shared state (spec 08 §3.3) -----------------------------------------------------
REDIS_UP = Gauge(
    "omniroute_redis_up",
    "1 while this worker's shared state reaches Redis, 0 while it runs locally",
    multiprocess_mode="livemin",
)
SHARED_STATE_FALLBACKS = Counter(
    "omniroute_shared_state_fallbacks_total",
    "Shared state operations served by the worker's local state (Redis failed or "
    "backed off)",
    ("op",),
)


# --- multiprocess files of dead workers --------------------------------------------

_LIVE_FILE = re.compile(r"^gauge_live\w*?_(\d+)\.db$")


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process: alive
        return True
    return True


def forget_dead_workers(directory: str | None = None) -> list[int]:
    """Remove the live-gauge files of workers that are gone (a crash or kill -9
    leaves them; a clean exit removes its own with ``forget_worker``); returns
    their pids.  No-op outside multiprocess mode."""
    directory = directory or os.environ.get("PROMETHEUS_MULTIPROC_DIR")
    if not directory or not os.path.isdir(directory):
        return []
    from prometheus_client import multiprocess

    dead = sorted(
        {
            int(found.group(1))
            for name in os.listdir(directory)
            if (found := _LIVE_FILE.match(name)) is not None
        }
        - {os.getpid()}
    )
    dead = [pid for pid in dead if not _alive(pid)]
    for pid in dead:
        multiprocess.mark_process_dead(pid, directory)
    return dead


def forget_worker() -> None:
    """This worker is exiting: its live gauges go (multiprocess mode only)."""
    directory = os.environ.get("PROMETHEUS_MULTIPROC_DIR")
    if directory and os.path.isdir(directory):
        from prometheus_client import multiprocess

        multiprocess.mark_process_dead(os.getpid(), directory)
