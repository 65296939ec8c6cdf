"""Arena fitness for the auto engine (spec 04 §9.2): the in-memory cache of
unexpired ``ArenaScore`` rows, and ``environment().elo`` reading it (coding board for
coding and debugging, overall for the rest; nothing while the sync is off)."""

from __future__ import annotations

import time
from datetime import UTC, date, datetime, timedelta

import pytest
from django.utils import timezone

from gateway.auto import live as auto
from gateway.auto.arena import ArenaCache, build_map, category_for
from gateway.auto.engine.fitness import fitness
from gateway.auto.engine.pool import AutoRoute
from gateway.kernel.types import KeyPolicy, RoutingTable
from providers.models import ArenaScore

NOW = datetime(2026, 8, 20, 12, 0, tzinfo=UTC)
LATER = NOW + timedelta(days=7)
SNAPSHOT = date(2026, 8, 19)


def row(
    model: str | None,
    fitness: float,
    *,
    category: str = "overall",
    source: str = "hf:a/b/c/latest",
    published: date = SNAPSHOT,
    expires: datetime = LATER,
) -> tuple[object, ...]:
    return (source, category, published, model, fitness, expires)


@pytest.fixture
def cache(monkeypatch: pytest.MonkeyPatch) -> ArenaCache:
    """A fresh cache behind ``environment()``, with no refresher thread."""
    fresh = ArenaCache()
    monkeypatch.setattr(fresh, "start", lambda: None)
    monkeypatch.setattr(auto, "arena_cache", fresh)
    return fresh


def env_elo(now: float) -> object:
    env = auto.environment(
        RoutingTable(),
        KeyPolicy(id=1, name="k", prefix="sk-or"),
        AutoRoute(route_id="auto"),
        now,
        None,
    )
    return env.elo


# The map.


def test_the_best_fitness_of_a_model_wins() -> None:
    found = build_map(
        [
            row("gpt-5", 0.8267),  # gpt-5-high via its alias
            row("gpt-5", 0.7512),  # a plain gpt-5 row
            row("gpt-5", 0.9, category="coding"),
        ]
    )

    assert found[("overall", "gpt-5")][0][0] == 0.8267
    assert found[("coding", "gpt-5")][0][0] == 0.9


def test_only_the_latest_snapshot_of_a_board_counts() -> None:
    found = build_map(
        [
            row("gpt-5", 0.95, published=date(2026, 8, 12)),
            row("gpt-5", 0.70),
            row("gemini-2.5-pro", 0.90, published=date(2026, 8, 12)),
            row("gemini-2.5-pro", 0.99, source="arena-catalog", published=NOW.date()),
        ]
    )

    assert found[("overall", "gpt-5")] == ((0.70, LATER.timestamp()),)
    # superseded on its own board; the other source's board still has it
    assert found[("overall", "gemini-2.5-pro")] == ((0.99, LATER.timestamp()),)


def test_unmatched_rows_are_left_out_but_still_date_their_board() -> None:
    found = build_map(
        [
            row("gpt-5", 0.95, published=date(2026, 8, 12)),
            row(None, 0.98),  # the newer snapshot matched nothing
        ]
    )

    assert found == {}


def test_lookup_is_case_insensitive_and_skips_expired_entries() -> None:
    cache = ArenaCache()
    cache.load(
        build_map(
            [
                row("GPT-5", 0.9, expires=NOW),
                row("gpt-5", 0.8, source="other"),
            ]
        )
    )

    assert cache.fitness("gpt-5", "overall", NOW.timestamp() - 1) == 0.9
    assert cache.fitness("Gpt-5", "overall", NOW.timestamp()) == 0.8
    assert cache.fitness("gpt-5", "overall", LATER.timestamp()) is None
    assert cache.fitness("gpt-5", "coding", NOW.timestamp()) is None


@pytest.mark.parametrize(
    ("task", "board"),
    [
        ("coding", "coding"),
        ("debugging", "coding"),
        ("review", "overall"),
        ("planning", "overall"),
        ("analysis", "overall"),
        ("documentation", "overall"),
        ("default", "overall"),
    ],
)
def test_coding_and_debugging_read_the_coding_board(task: str, board: str) -> None:
    assert category_for(task) == board


# The refresh.


def _score(name: str, matched: str | None, fitness: float, **fields: object) -> None:
    values: dict[str, object] = {
        "source": "hf:a/b/c/latest",
        "category": "overall",
        "model_name": name,
        "publish_date": SNAPSHOT,
        "rating": 1400.0,
        "confidence": "high",
        "fitness": fitness,
        "matched_model": matched,
        "synced_at": timezone.now(),
        "expires_at": timezone.now() + timedelta(days=7),
    }
    values.update(fields)
    ArenaScore.objects.create(**values)


@pytest.mark.django_db
def test_refresh_loads_the_unexpired_rows_with_one_query(
    django_assert_num_queries: object,
) -> None:
    _score("gpt-5-high", "gpt-5", 0.8267)
    _score("claude-haiku-4-5-20251001", "claude-haiku-4-5", 0.8502, category="coding")
    _score("kimi-k2.6", None, 0.9)
    _score(
        "gemini-2.5-pro",
        "gemini-2.5-pro",
        0.8855,
        expires_at=timezone.now() - timedelta(seconds=1),
    )
    fresh = ArenaCache()

    with django_assert_num_queries(1):  # type: ignore[operator]
        assert fresh.refresh() == 2

    now = time.time()
    assert fresh.fitness("gpt-5", "overall", now) == 0.8267
    assert fresh.fitness("claude-haiku-4-5", "coding", now) == 0.8502
    assert fresh.fitness("gemini-2.5-pro", "overall", now) is None


# The auto engine (spec 04 §9.2 source 1).


def test_environment_elo_reads_the_cache_by_task(cache: ArenaCache, settings) -> None:
    settings.OMNIROUTE_ARENA_ELO_SYNC_ENABLED = True
    cache.load(
        build_map(
            [
                row("claude-haiku-4-5", 0.7446),
                row("claude-haiku-4-5", 0.8502, category="coding"),
            ]
        )
    )
    elo = env_elo(NOW.timestamp())

    assert elo("claude-haiku-4-5", "coding") == 0.8502
    assert elo("claude-haiku-4-5", "debugging") == 0.8502
    assert elo("claude-haiku-4-5", "review") == 0.7446
    assert elo("claude-haiku-4-5", "default") == 0.7446
    assert elo("gpt-4o-mini", "coding") is None
    # the stored score beats the static table (*claude*haiku* coding .78)
    assert (
        fitness(
            "claude-haiku-4-5", "coding", elo_fitness=elo("claude-haiku-4-5", "coding")
        )
        == 0.8502
    )
    assert (
        fitness("claude-haiku-4-5", "coding", elo_fitness=elo("unknown", "coding"))
        == 0.78
    )


def test_environment_elo_ignores_an_expired_entry(cache: ArenaCache, settings) -> None:
    settings.OMNIROUTE_ARENA_ELO_SYNC_ENABLED = True
    cache.load(build_map([row("gpt-5", 0.8267)]))

    assert env_elo(LATER.timestamp())("gpt-5", "review") is None


def test_a_disabled_sync_ignores_stored_scores(cache: ArenaCache, settings) -> None:
    settings.OMNIROUTE_ARENA_ELO_SYNC_ENABLED = False
    cache.load(build_map([row("gpt-5", 0.8267), row("gpt-5", 0.9, category="coding")]))
    started: list[bool] = []
    cache.start = lambda: started.append(True)  # type: ignore[method-assign]

    elo = env_elo(NOW.timestamp())

    assert elo("gpt-5", "review") is None
    assert elo("gpt-5", "coding") is None
    assert started == []
