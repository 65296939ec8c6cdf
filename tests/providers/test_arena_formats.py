"""Reading Arena payloads (spec 06 §3.3): format detection, paging URLs, sources.
Pure functions; no database."""

from __future__ import annotations

import json
from datetime import date
from pathlib import Path

import pytest

from providers.arena import confidence_of, fitness_of
from providers.arena_formats import (
    Format,
    FormatError,
    detect,
    page_url,
    parse,
    peek_envelope,
    source_label,
)
from providers.arena_names import normalise, strip_date

FIXTURES = Path(__file__).parents[1] / "fixtures"
ARENA = (FIXTURES / "arena-sample.json").read_bytes()
CATALOG = (FIXTURES / "arena-catalog-sample.json").read_bytes()
TODAY = date(2026, 9, 1)
BASE = "https://datasets-server.huggingface.co/rows?dataset=a%2Fb&config=c&split=latest"


def test_auto_detects_each_format() -> None:
    rows = [entry["row"] for entry in json.loads(ARENA)["rows"]]

    assert detect(json.loads(ARENA)) is Format.HF_ROWS
    assert detect(rows) is Format.HF_ROWS
    assert detect(rows[0]) is Format.HF_ROWS  # one JSON Lines row
    assert detect(json.loads(CATALOG)) is Format.ARENA_CATALOG
    for other in ({"a": 1}, {}, "text", 3, {"full": {"m": {"score": 1}}}):
        with pytest.raises(FormatError):
            detect(other)


def test_the_envelope_page_reports_its_total() -> None:
    page = parse(ARENA, today=TODAY)

    assert (page.format, len(page.rows), page.rejected) == (Format.HF_ROWS, 22, 0)
    assert (page.total_rows, page.page_rows) == (22, 22)
    assert peek_envelope(ARENA) == (22, 22)
    assert peek_envelope(CATALOG) is None


def test_the_catalog_maps_full_to_overall_with_ranks_and_the_fetch_date() -> None:
    page = parse(CATALOG, today=TODAY)

    assert page.format is Format.ARENA_CATALOG
    overall = {row.model_name: row for row in page.rows if row.category == "overall"}
    assert len(overall) == 9
    assert [overall[name].rank for name in ("gemini-3-pro", "gpt-5-high")] == [1, 6]
    assert {row.publish_date for row in page.rows} == {TODAY}
    assert {row.votes for row in page.rows} == {None}
    assert overall["gemini-3-pro"].rating_lower == 1480.4026895976556
    assert overall["gemini-3-pro"].rating_upper == 1492.8027344568852


def test_equal_ratings_share_a_rank() -> None:
    data = {"full": {"a": {"rating": 1300}, "b": {"rating": 1300}, "c": {"rating": 1}}}

    page = parse(json.dumps(data).encode(), today=TODAY)

    assert [row.rank for row in page.rows] == [1, 1, 3]


def test_a_forced_format_must_fit() -> None:
    with pytest.raises(FormatError, match="not arena-catalog"):
        parse(ARENA, fmt=Format.ARENA_CATALOG, today=TODAY)
    assert len(parse(CATALOG, fmt=Format.ARENA_CATALOG, today=TODAY).rows) == 18


def test_garbage_is_neither_json_nor_json_lines() -> None:
    with pytest.raises(FormatError, match="neither JSON nor JSON Lines"):
        parse(b"<html>rate limited</html>\n<p>", today=TODAY)


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        (BASE, f"{BASE}&offset=200&length=100"),
        (f"{BASE}&offset=0&length=10", f"{BASE}&offset=200&length=100"),
        (
            "https://datasets-server.huggingface.co/rows?offset=5&dataset=a",
            "https://datasets-server.huggingface.co/rows?dataset=a&offset=200&length=100",
        ),
        (
            "https://datasets-server.huggingface.co/rows",
            "https://datasets-server.huggingface.co/rows?offset=200&length=100",
        ),
    ],
)
def test_page_url(url: str, expected: str) -> None:
    assert page_url(url, 200) == expected


def test_a_datasets_server_source_is_its_dataset_config_and_split() -> None:
    assert source_label(f"{BASE}&where=x") == "hf:a/b/c/latest"
    assert source_label("https://example.test/board.json") == (
        "https://example.test/board.json"
    )
    assert source_label("/data/board.json") == "/data/board.json"


@pytest.mark.parametrize(
    ("rating", "expected"),
    [(1500.0, 0.98), (1350.0, 0.69), (1200.0, 0.40), (900.0, 0.40), (1600.0, 0.98)],
)
def test_fitness_of(rating: float, expected: float) -> None:
    assert fitness_of(rating, 1500.0) == expected


def test_confidence_and_name_helpers() -> None:
    assert [confidence_of(v) for v in (5000, 1000, 999, None)] == [
        "high",
        "medium",
        "low",
        "unknown",
    ]
    assert normalise(" Anthropic/Claude Sonnet 4.5 ") == "claude-sonnet-4.5"
    assert strip_date("claude-haiku-4-5-20251001") == "claude-haiku-4-5"
    assert strip_date("gpt-4o-mini-2024-07-18") == "gpt-4o-mini"
    assert strip_date("gpt-4o-mini-2024-07") == "gpt-4o-mini-2024-07"
