"""Task fitness: spec 04 §9.2 (ELO, static table, model class, 0.5)."""

import math

import pytest

from gateway.auto.engine.fitness import (
    CLASS_FITNESS,
    NEUTRAL_FITNESS,
    elo_fitness,
    fitness,
    model_class,
    static_fitness,
)
from gateway.auto.engine.types import TASK_TYPES

# columns: coding, review, planning, analysis, debugging, documentation, default
STATIC_ROWS = [
    ("gpt-5-codex", (0.98, 0.90, 0.85, 0.85, 0.92, 0.85, 0.80)),
    ("claude-opus-4-1", (0.92, 0.95, 0.95, 0.95, 0.90, 0.88, 0.85)),
    ("claude-sonnet-4", (0.95, 0.92, 0.90, 0.92, 0.93, 0.90, 0.85)),
    ("claude-3-5-haiku-latest", (0.78, 0.70, 0.70, 0.72, 0.72, 0.80, 0.72)),
    ("gpt-4o-2024-08-06", (0.90, 0.88, 0.88, 0.85, 0.88, 0.92, 0.85)),
    ("gpt-4o-mini", (0.80, 0.72, 0.75, 0.75, 0.75, 0.85, 0.78)),
    ("o1-preview", (0.93, 0.90, 0.92, 0.90, 0.85, 0.82, 0.83)),
    ("o3-mini", (0.95, 0.92, 0.95, 0.93, 0.88, 0.85, 0.85)),
    ("gemini-2.5-pro", (0.92, 0.93, 0.93, 0.95, 0.88, 0.88, 0.85)),
    ("gemini-2.5-flash", (0.82, 0.75, 0.75, 0.78, 0.78, 0.82, 0.72)),
    ("deepseek-r1", (0.88, 0.85, 0.85, 0.88, 0.85, 0.78, 0.80)),
    ("deepseek-v3.1", (0.85, 0.80, 0.78, 0.80, 0.82, 0.78, 0.75)),
    ("deepseek-chat", (0.85, 0.80, 0.78, 0.80, 0.82, 0.78, 0.75)),
    ("deepseek-coder-v2", (0.85, 0.75, 0.60, 0.60, 0.80, 0.65, 0.60)),
    ("kimi-k2-thinking", (0.70, 0.75, 0.80, 0.80, 0.72, 0.65, 0.65)),
    ("phi-4-reasoning", (0.70, 0.75, 0.80, 0.80, 0.72, 0.65, 0.65)),
    ("qwen3-235b", (0.75, 0.68, 0.66, 0.68, 0.70, 0.72, 0.70)),
    ("mistral-large-latest", (0.75, 0.68, 0.66, 0.68, 0.70, 0.72, 0.70)),
    ("mixtral-8x7b", (0.75, 0.68, 0.66, 0.68, 0.70, 0.72, 0.70)),
    ("llama-3.3-70b", (0.75, 0.68, 0.66, 0.68, 0.70, 0.72, 0.70)),
]

CLASS_ROWS = [
    ("premium", (0.92, 0.93, 0.94, 0.95, 0.90, 0.88, 0.85)),
    ("standard", (0.85, 0.84, 0.85, 0.85, 0.82, 0.85, 0.78)),
    ("fast", (0.78, 0.72, 0.70, 0.72, 0.75, 0.80, 0.72)),
    ("budget", (0.65, 0.60, 0.55, 0.58, 0.60, 0.70, 0.55)),
]


def _per_task(rows):
    return [
        (name, task, score)
        for name, scores in rows
        for task, score in zip(TASK_TYPES, scores, strict=True)
    ]


# --- static table -------------------------------------------------------------------


@pytest.mark.parametrize(("model", "task", "expected"), _per_task(STATIC_ROWS))
def test_every_static_row_scores_every_task(model, task, expected):
    assert static_fitness(model, task) == expected
    assert fitness(model, task) == expected


@pytest.mark.parametrize(
    ("model", "coding"),
    [
        ("gpt-4o-mini", 0.80),  # gpt-4o-mini* (11 literal chars) beats gpt-4o* (6)
        ("gpt-4o", 0.90),
        ("claude-3-5-sonnet", 0.95),  # *claude*sonnet*
        ("claude-3-opus-20240229", 0.92),
        ("claude-sonnet-4-thinking", 0.95),  # *claude*sonnet* beats *thinking*
        ("qwen2.5-coder-32b", 0.85),  # *-coder* beats *qwen*
        ("deepseek-r1-distill-llama-70b", 0.88),  # *deepseek-r1* beats *llama*
        ("gemini-2.5-flash-thinking", 0.82),  # *gemini-2.5-flash* beats *thinking*
    ],
)
def test_the_most_specific_matching_pattern_wins(model, coding):
    assert static_fitness(model, "coding") == coding


@pytest.mark.parametrize("model", ["llama-codex", "codex-llama"])
def test_a_specificity_tie_goes_to_the_row_first_in_the_file(model):
    # *codex* and *llama* both have 5 literal characters; *codex* comes first
    assert static_fitness(model, "coding") == 0.98


@pytest.mark.parametrize(
    ("model", "coding"),
    [
        ("GPT-4O-MINI", 0.80),
        ("Claude-3-Opus", 0.92),
        ("DeepSeek-Chat", 0.85),
        ("O1", 0.93),
    ],
)
def test_patterns_ignore_case(model, coding):
    assert static_fitness(model, "coding") == coding


@pytest.mark.parametrize(
    "model", ["chatgpt-4o-latest", "gpt-5-nano", "pro1", "my-o3", "coder", "claude-2"]
)
def test_a_model_no_pattern_matches_has_no_static_score(model):
    # globs span the whole id: gpt-4o*, o1* and o3* are anchored at the start,
    # and *-coder* needs its hyphen
    assert static_fitness(model, "coding") is None


def test_a_task_the_row_does_not_list_uses_the_row_default():
    assert static_fitness("gpt-4o", "translation") == 0.85
    assert static_fitness("gpt-4o-mini", "translation") == 0.78


def test_static_lookups_are_cached_per_model_and_task():
    static_fitness("o3-pro", "review")
    hits = static_fitness.cache_info().hits

    assert static_fitness("o3-pro", "review") == 0.92
    assert static_fitness.cache_info().hits == hits + 1


# --- model class --------------------------------------------------------------------


@pytest.mark.parametrize(("klass", "task", "expected"), _per_task(CLASS_ROWS))
def test_every_class_scores_every_task(klass, task, expected):
    assert CLASS_FITNESS[klass][task] == expected
    assert fitness("no-such-model", task, tier=klass) == expected


@pytest.mark.parametrize(
    ("tier", "capabilities", "window", "expected"),
    [
        ("premium", None, None, "premium"),
        ("budget", frozenset({"reasoning"}), None, "budget"),  # the tier wins
        ("fast", frozenset(), 200_000, "fast"),
        ("standard", None, None, "standard"),
        ("pro", frozenset({"reasoning"}), None, "premium"),  # not a class: derived
        (None, frozenset({"reasoning", "tools"}), 8_000, "premium"),
        (None, frozenset({"tools"}), 128_000, "standard"),
        (None, frozenset({"tools", "json"}), 127_999, "fast"),
        (None, frozenset({"tools"}), None, "fast"),
        (None, frozenset({"json", "vision"}), 1_000_000, "budget"),
        (None, frozenset(), None, "budget"),
        (None, None, 200_000, None),  # nothing known: no class
    ],
)
def test_model_class(tier, capabilities, window, expected):
    assert model_class(tier, capabilities, window) == expected


def test_derived_classes_feed_the_class_table():
    tools = frozenset({"tools"})
    assert fitness("x", "coding", capabilities=frozenset({"reasoning"})) == 0.92
    assert fitness("x", "coding", capabilities=tools, context_window=200_000) == 0.85
    assert fitness("x", "coding", capabilities=tools) == 0.78
    assert fitness("x", "coding", capabilities=frozenset()) == 0.65


def test_pool_p_fitness_values_of_section_11():
    caps = frozenset({"tools", "json"})
    # A has the catalog tier budget; B and C come from the static table
    assert fitness("gpt-5-nano", "coding", tier="budget", capabilities=caps) == 0.65
    assert fitness("claude-sonnet-4", "coding", capabilities=caps) == 0.95
    assert fitness("gemini-2.5-flash", "coding", capabilities=caps) == 0.82


def test_a_task_outside_the_class_table_uses_the_class_default():
    assert fitness("x", "translation", tier="standard") == 0.78


# --- source precedence --------------------------------------------------------------


def test_elo_fitness_beats_every_other_source():
    assert fitness("gpt-4o", "coding", elo_fitness=0.61, tier="budget") == 0.61
    assert fitness("unknown", "coding", elo_fitness=0.40) == 0.40


def test_the_static_table_beats_the_model_class():
    assert fitness("gpt-4o", "coding", tier="budget") == 0.90


def test_an_unknown_model_without_class_data_is_neutral():
    assert fitness("unknown", "coding") == NEUTRAL_FITNESS == 0.5
    assert fitness("unknown", "review", tier="pro") == 0.5
    assert fitness("unknown", "review", context_window=200_000) == 0.5


# --- elo_fitness --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("rating", "leader", "expected"),
    [
        (1300, 1300, 0.98),  # the leader
        (1000, 1300, 0.40),  # 300 behind
        (800, 1300, 0.40),  # further behind is clamped
        (1150, 1300, 0.69),  # half way: 0.40 + 0.58 x 0.5
        (1270, 1300, 0.922),  # 30 behind: 0.40 + 0.58 x 0.9
        (1400, 1300, 0.98),  # above the leader is clamped
    ],
)
def test_elo_fitness_is_leader_relative(rating, leader, expected):
    assert elo_fitness(rating, leader) == pytest.approx(expected)


def test_elo_fitness_of_a_non_finite_gap_is_the_floor():
    assert elo_fitness(math.nan, 1300) == pytest.approx(0.40)
    assert elo_fitness(1300, math.inf) == pytest.approx(0.40)
