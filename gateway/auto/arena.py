"""Arena fitness in memory: ``ArenaScore`` rows for the auto engine (spec 04 §9.2).

A request must never query the database, so a daemon thread loads the unexpired
rows with one query at start-up and then every ``REFRESH_SECONDS``, and swaps the
whole map in (one assignment); a failed refresh keeps the previous map.

The map is ``(category, lower-cased model id) -> ((fitness, expires_at), …)``, best
fitness first:

- only each (source, category)'s latest unexpired snapshot counts (an older one
  waits out its 7 days in the table, but a newer board supersedes it);
- several rows matching one model (aliases, sources) -> the highest fitness wins;
- a row that expires between two refreshes is skipped at lookup time, so an expired
  score is never served.

Model ids are compared case-insensitively, as the sync job matches them.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from datetime import date, datetime
from typing import Any

from django.utils import timezone

from gateway.config.refreshed import RefreshedCache

logger = logging.getLogger(__name__)

REFRESH_SECONDS = 60.0
CODING_TASKS = frozenset({"coding", "debugging"})  # spec 04 §9.2: the coding board
OVERALL = "overall"
CODING = "coding"
COLUMNS = (
    "source",
    "category",
    "publish_date",
    "matched_model",
    "fitness",
    "expires_at",
)

ArenaKey = tuple[str, str]  # (category, lower-cased model id)
Entries = tuple[tuple[float, float], ...]  # ((fitness, expires_at unix s), …)


def category_for(task: str) -> str:
    return CODING if task in CODING_TASKS else OVERALL


def build_map(rows: Iterable[tuple[Any, ...]]) -> dict[ArenaKey, Entries]:
    """``COLUMNS``-ordered unexpired rows -> the lookup map."""
    rows = list(rows)
    latest: dict[tuple[str, str], date] = {}
    for source, category, published, *_ in rows:
        board = (source, category)
        if board not in latest or published > latest[board]:
            latest[board] = published
    found: dict[ArenaKey, list[tuple[float, float]]] = {}
    for source, category, published, model, fitness, expires in rows:
        if model is None or published != latest[(source, category)]:
            continue
        expires_s = expires.timestamp() if isinstance(expires, datetime) else expires
        found.setdefault((category, model.lower()), []).append(
            (float(fitness), float(expires_s))
        )
    return {
        key: tuple(sorted(entries, key=lambda entry: entry[0], reverse=True))
        for key, entries in found.items()
    }


class ArenaCache(RefreshedCache[ArenaKey, Entries]):
    label = "arena"
    refresh_seconds = REFRESH_SECONDS

    def fitness(self, model_id: str, category: str, now: float) -> float | None:
        """The best unexpired fitness of the model on the board; None when none."""
        for fitness, expires_at in self._rows.get((category, model_id.lower()), ()):
            if expires_at > now:
                return fitness
        return None

    def refresh(self) -> int:
        """Reload the unexpired rows now (sync ORM; never on the event loop thread)."""
        from providers.models import ArenaScore

        found = build_map(
            ArenaScore.objects.filter(expires_at__gt=timezone.now()).values_list(
                *COLUMNS
            )
        )
        self.load(found)
        return len(found)


cache = ArenaCache()
