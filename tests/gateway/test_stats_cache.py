"""The auto engine's statistics source (spec 04 §3.1): 24 h rows from the in-memory
cache first, per connection then per model, then the live window."""

from __future__ import annotations

import time
from datetime import UTC, datetime

import pytest

from gateway.auto import live as auto
from gateway.auto.engine.decide import Stats
from gateway.auto.stats import StatsCache, build_map, stats_of
from gateway.kernel.types import ConnectionInfo, ModelInfo, ProviderInfo
from gateway.kernel.types import Target as EngineTarget
from providers.live_window import LiveWindow
from telemetry.models import ReliabilityStat

NOW = datetime(2025, 6, 2, 12, 0, tzinfo=UTC)


def target(connection: str = "main") -> EngineTarget:
    return EngineTarget(
        provider=ProviderInfo(
            slug="openai", kind="openai", base_url="http://openai.test/v1"
        ),
        model=ModelInfo(provider="openai", model_id="gpt-4o-mini"),
        connection=ConnectionInfo(provider="openai", name=connection),
    )


@pytest.fixture
def cache(monkeypatch: pytest.MonkeyPatch) -> StatsCache:
    """A fresh cache behind ``live_stats``, with no refresher thread."""
    fresh = StatsCache()
    monkeypatch.setattr(fresh, "start", lambda: None)
    monkeypatch.setattr(auto, "stats_cache", fresh)
    return fresh


@pytest.fixture
def live(monkeypatch: pytest.MonkeyPatch) -> LiveWindow:
    fresh = LiveWindow()
    monkeypatch.setattr(auto, "window", fresh)
    return fresh


CONN_ROW = Stats(p95_ms=900.0, std_ms=100.0, failure_rate=0.1, good_rate=0.9)
STAR_ROW = Stats(p95_ms=800.0, std_ms=50.0, failure_rate=0.2, good_rate=0.8)


def test_the_connection_row_comes_first(cache: StatsCache, live: LiveWindow) -> None:
    cache.load(
        {
            ("openai", "gpt-4o-mini", "main"): CONN_ROW,
            ("openai", "gpt-4o-mini", "*"): STAR_ROW,
        }
    )
    for _ in range(5):
        live.record("openai/gpt-4o-mini", "success", 100.0)

    assert auto.live_stats(target("main")) is CONN_ROW


def test_the_model_row_serves_a_connection_without_one(
    cache: StatsCache, live: LiveWindow
) -> None:
    cache.load(
        {
            ("openai", "gpt-4o-mini", "main"): CONN_ROW,
            ("openai", "gpt-4o-mini", "*"): STAR_ROW,
        }
    )

    assert auto.live_stats(target("backup")) is STAR_ROW


def test_the_live_window_serves_when_no_row_has_data(
    cache: StatsCache, live: LiveWindow
) -> None:
    cache.load({("openai", "other-model", "*"): STAR_ROW})
    for latency in (100.0, 200.0, 300.0):
        live.record("openai/gpt-4o-mini", "success", latency)

    found = auto.live_stats(target())

    assert found is not None
    assert found.p95_ms == 300.0
    assert found.failure_rate == 0.0


def test_no_source_with_data_gives_none(cache: StatsCache, live: LiveWindow) -> None:
    live.record("openai/gpt-4o-mini", "success", 100.0)  # below 3 samples

    assert auto.live_stats(target()) is None


def test_std_is_derived_from_the_percentiles() -> None:
    stats = stats_of(0.1, 0.9, 500, 1000)

    assert stats == Stats(
        p95_ms=1000.0,
        std_ms=pytest.approx(500 / 1.645),
        failure_rate=0.1,
        good_rate=0.9,
    )
    narrow = stats_of(None, None, 500, 505)
    assert narrow is not None
    assert narrow.std_ms == 10.0


def test_a_row_with_only_nulls_has_no_data() -> None:
    rows = [
        ("openai", "gpt-4o-mini", "main", None, None, None, None),
        ("openai", "gpt-4o-mini", "*", 0.1, None, None, None),
    ]

    assert build_map(rows) == {
        ("openai", "gpt-4o-mini", "*"): Stats(failure_rate=0.1),
    }


def test_an_all_null_connection_row_gives_way_to_the_model_row(
    cache: StatsCache, live: LiveWindow
) -> None:
    cache.load(
        build_map(
            [
                ("openai", "gpt-4o-mini", "main", None, None, None, None),
                ("openai", "gpt-4o-mini", "*", 0.25, 0.75, 100, 200),
            ]
        )
    )

    found = auto.live_stats(target("main"))

    assert found is not None
    assert (found.failure_rate, found.good_rate, found.p95_ms) == (0.25, 0.75, 200.0)


def _stat(connection: str, **fields: object) -> ReliabilityStat:
    values: dict[str, object] = {
        "provider": "openai",
        "model": "gpt-4o-mini",
        "connection": connection,
        "samples": 20,
        "failures": 2,
        "failure_rate": 0.1,
        "reliability": 0.9,
        "good_rate": 0.95,
        "p50_latency_ms": 400,
        "p95_latency_ms": 729,
        "p95_ttft_ms": 150,
        "window_start": NOW,
        "window_end": NOW,
        "computed_at": NOW,
    }
    values.update(fields)
    return ReliabilityStat.objects.create(**values)


@pytest.mark.django_db
def test_refresh_loads_every_row_with_one_query(
    django_assert_num_queries: object,
) -> None:
    _stat("main")
    _stat("*", failure_rate=None, reliability=None, good_rate=None)
    _stat(
        "backup",
        failure_rate=None,
        reliability=None,
        good_rate=None,
        p50_latency_ms=None,
        p95_latency_ms=None,
    )
    fresh = StatsCache()

    with django_assert_num_queries(1):  # type: ignore[operator]
        assert fresh.refresh() == 2

    assert fresh.lookup("openai", "gpt-4o-mini", "main") == Stats(
        p95_ms=729.0, std_ms=pytest.approx(200.0), failure_rate=0.1, good_rate=0.95
    )
    star = Stats(p95_ms=729.0, std_ms=pytest.approx(200.0))
    assert fresh.lookup("openai", "gpt-4o-mini", "backup") == star
    assert fresh.lookup("anthropic", "claude", "main") is None


@pytest.mark.django_db
def test_refresh_swaps_the_map_whole() -> None:
    _stat("main")
    fresh = StatsCache()
    fresh.refresh()
    before = fresh.lookup("openai", "gpt-4o-mini", "main")

    ReliabilityStat.objects.all().delete()
    fresh.refresh()

    assert before is not None
    assert fresh.lookup("openai", "gpt-4o-mini", "main") is None


@pytest.mark.django_db(transaction=True)
def test_the_refresher_thread_loads_at_start() -> None:
    _stat("main")
    fresh = StatsCache()
    try:
        fresh.start()
        for _ in range(500):
            if fresh.lookup("openai", "gpt-4o-mini", "main") is not None:
                break
            time.sleep(0.01)
        assert fresh.lookup("openai", "gpt-4o-mini", "main") is not None
        assert fresh.is_running
    finally:
        fresh.stop()
        thread = fresh._thread
        assert thread is not None
        thread.join(timeout=5)
    assert not fresh.is_running
