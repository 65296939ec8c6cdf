"""Task fitness of a model (spec 04 §9.2): how well it suits a task type, in 0..1.

``fitness(model, task)`` takes the first source that answers:

1. **Arena ELO.** ``elo_fitness``, when the caller holds an unexpired Arena row for
   the model (the sync job stores it already leader-relative, see ``elo_fitness()``:
   the leader scores 0.98, a model 300 or more points behind 0.40).
2. **Static table.** ``task_fitness.yaml``: case-insensitive ``fnmatch`` globs on the
   bare model id.  The matching pattern with the most non-wildcard characters wins
   (wildcards: ``*`` and ``?``), ties go to the row first in the file, and a task a
   row does not list uses its ``default``.  So ``gpt-4o-mini`` takes the
   ``gpt-4o-mini*`` row, not ``gpt-4o*``.
3. **Model class.** The catalog tier when it is a class (premium, standard, fast,
   budget); otherwise derived from capabilities: ``reasoning`` -> premium;
   ``tools`` with a window >= 128 000 -> standard; ``tools`` -> fast; else budget.
4. **Otherwise** 0.5.

Where the spec is silent:

- A model with no class tier and *unknown* capabilities (``None``) has no class, so
  step 4 (0.5) applies; "otherwise budget" needs known capabilities, even an empty
  set.  A tier that is not a class name (e.g. ``pro``) is ignored and the class is
  derived.
- The model id is matched as given; the caller passes the bare id.
- A task outside ``TASK_TYPES`` gets the row's (or the class's) ``default``.

The table is data (``task_fitness.yaml``), read and compiled once, when this module
is imported; lookups are pure and cached per (model, task).
"""

from __future__ import annotations

import fnmatch
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from types import MappingProxyType
from typing import Any

import yaml

from gateway.auto.engine.types import TASK_TYPES

__all__ = [
    "CLASS_FITNESS",
    "MODEL_CLASSES",
    "NEUTRAL_FITNESS",
    "elo_fitness",
    "fitness",
    "model_class",
    "static_fitness",
]

NEUTRAL_FITNESS = 0.5  # spec 04 §9.2 step 4: no source knows the model
LARGE_CONTEXT_TOKENS = 128_000  # a `tools` model with this window is "standard"
ELO_FLOOR = 0.40  # fitness of a model ELO_WINDOW_POINTS or more behind the leader
ELO_SPAN = 0.58  # the leader scores ELO_FLOOR + ELO_SPAN = 0.98
ELO_WINDOW_POINTS = 300.0
_STATIC_CACHE_SIZE = 4096  # (model, task) pairs; catalogs hold a few hundred models
_TABLE_FILE = Path(__file__).with_name("task_fitness.yaml")
_WILDCARDS = frozenset("*?")


def _scores(*values: float) -> Mapping[str, float]:
    """Scores given in ``TASK_TYPES`` order, the column order of the spec tables."""
    return MappingProxyType(dict(zip(TASK_TYPES, values, strict=True)))


#: spec 04 §9.2 step 3, columns in TASK_TYPES order
CLASS_FITNESS: Mapping[str, Mapping[str, float]] = MappingProxyType(
    {
        "premium": _scores(0.92, 0.93, 0.94, 0.95, 0.90, 0.88, 0.85),
        "standard": _scores(0.85, 0.84, 0.85, 0.85, 0.82, 0.85, 0.78),
        "fast": _scores(0.78, 0.72, 0.70, 0.72, 0.75, 0.80, 0.72),
        "budget": _scores(0.65, 0.60, 0.55, 0.58, 0.60, 0.70, 0.55),
    }
)
MODEL_CLASSES = tuple(CLASS_FITNESS)


@dataclass(frozen=True, slots=True)
class _Pattern:
    glob: str
    regex: re.Pattern[str]
    #: non-wildcard characters: more means more specific
    specificity: int
    #: the row's position in the file; the tie-break
    row: int
    scores: Mapping[str, float]


def _row_scores(entry: Mapping[str, Any]) -> Mapping[str, float]:
    scores = entry.get("scores")
    if not isinstance(scores, Mapping) or "default" not in scores:
        raise ValueError(f"{_TABLE_FILE.name}: every row needs scores with a default")
    unknown = set(scores) - set(TASK_TYPES)
    if unknown:
        raise ValueError(f"{_TABLE_FILE.name}: unknown tasks {sorted(unknown)}")
    for value in scores.values():
        if not isinstance(value, float | int) or not 0 <= value <= 1:
            raise ValueError(f"{_TABLE_FILE.name}: score {value!r} is not in 0..1")
    return MappingProxyType({task: float(value) for task, value in scores.items()})


def _load_patterns() -> tuple[_Pattern, ...]:
    """Every pattern of the table, most specific first, then in file order."""
    document = yaml.safe_load(_TABLE_FILE.read_text(encoding="utf-8"))
    patterns: list[_Pattern] = []
    for row, entry in enumerate(document["rows"]):
        scores = _row_scores(entry)
        for glob in entry["patterns"]:
            patterns.append(
                _Pattern(
                    glob=glob,
                    regex=re.compile(fnmatch.translate(glob), re.IGNORECASE),
                    specificity=sum(char not in _WILDCARDS for char in glob),
                    row=row,
                    scores=scores,
                )
            )
    return tuple(sorted(patterns, key=lambda p: (-p.specificity, p.row)))


_PATTERNS = _load_patterns()


def _clamp01(value: float) -> float:
    """``min(1, max(0, value))``, with NaN and ±inf as 0 (spec 04 §3.2)."""
    return min(1.0, max(0.0, value)) if math.isfinite(value) else 0.0


def elo_fitness(rating: float, leader: float) -> float:
    """Leader-relative fitness from an Arena rating: 0.40 + 0.58 x closeness.

    ``closeness = clamp01(1 - (leader - rating) / 300)``: the leader scores 0.98, a
    model 300 or more points behind scores 0.40.
    """
    closeness = _clamp01(1 - (leader - rating) / ELO_WINDOW_POINTS)
    return ELO_FLOOR + ELO_SPAN * closeness


@lru_cache(maxsize=_STATIC_CACHE_SIZE)
def static_fitness(model_id: str, task: str) -> float | None:
    """The static table's score of ``model_id`` for ``task``; None if no row matches."""
    for pattern in _PATTERNS:
        if pattern.regex.match(model_id):
            return pattern.scores.get(task, pattern.scores["default"])
    return None


def model_class(
    tier: str | None,
    capabilities: frozenset[str] | None,
    context_window: int | None,
) -> str | None:
    """The model class for step 3; None when neither tier nor capabilities is known."""
    if tier in CLASS_FITNESS:
        return tier
    if capabilities is None:
        return None
    if "reasoning" in capabilities:
        return "premium"
    if "tools" in capabilities:
        if context_window is not None and context_window >= LARGE_CONTEXT_TOKENS:
            return "standard"
        return "fast"
    return "budget"


def fitness(
    model_id: str,
    task: str,
    *,
    elo_fitness: float | None = None,
    tier: str | None = None,
    capabilities: frozenset[str] | None = None,
    context_window: int | None = None,
) -> float:
    """``taskFit`` of a model for a task: the first source of §9.2 that answers."""
    if elo_fitness is not None:
        return elo_fitness
    static = static_fitness(model_id, task)
    if static is not None:
        return static
    klass = model_class(tier, capabilities, context_window)
    if klass is None:
        return NEUTRAL_FITNESS
    scores = CLASS_FITNESS[klass]
    return scores.get(task, scores["default"])
