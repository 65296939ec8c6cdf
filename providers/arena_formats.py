"""Reading LMArena leaderboard payloads (spec 06 §3.3): pure, bytes -> rows.

Two formats, chosen by ``OMNIROUTE_ARENA_FORMAT`` or detected (``auto``):

``hf-rows``
    The Hugging Face datasets-server envelope (an object with a ``rows`` list of
    ``{row_idx, row, truncated_cells}``), a JSON array of row objects, or JSON Lines
    of row objects.  Columns read: ``model_name``, ``rating``, ``rating_lower``,
    ``rating_upper`` (both may be null), ``vote_count``, ``rank``, ``category``,
    ``leaderboard_publish_date``.  An entry with a non-empty ``truncated_cells``
    is rejected.
``arena-catalog``
    ``{category: {model: {rating, rating_q975, rating_q025}}}``.  ``full`` is the
    overall board; ``rank`` = 1 + the number of models rated higher on the board;
    no vote counts; the publish date is the fetch date (UTC), given as ``today``.

Every row of a category other than ``overall`` and ``coding`` is skipped, not
rejected.  A row failing validation (wrong type, non-finite rating, bad date) is
counted ``rejected``; a payload that is not one of the formats raises
``FormatError``.  Where the spec is silent: an absent bound or vote count reads as
null; a JSON array may hold envelope entries (``{row, truncated_cells}``) as well
as bare rows; a JSON Lines line that is not a JSON object is a rejected row.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import date, datetime
from enum import StrEnum
from typing import Any
from urllib.parse import parse_qs, urlsplit

from providers.payload import Invalid

KEPT_CATEGORIES = frozenset({"overall", "coding"})
CATALOG_CATEGORIES = {"full": "overall", "coding": "coding"}
MAX_NAME_CHARS = 256  # ArenaScore.model_name
DATASETS_SERVER_HOST = "datasets-server.huggingface.co"
PAGE_ROWS = 100  # spec 06 §3.3: &offset=N&length=100
_PAGING_PARAM = re.compile(r"[?&](?:offset|length)=[^&]*")


class Format(StrEnum):
    AUTO = "auto"
    HF_ROWS = "hf-rows"
    ARENA_CATALOG = "arena-catalog"


class FormatError(ValueError):
    """The payload as a whole cannot be read in the asked (or any) format."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ArenaRow:
    """One valid leaderboard row of a kept category."""

    category: str
    model_name: str
    rating: float
    rating_lower: float | None
    rating_upper: float | None
    votes: int | None
    rank: int | None
    publish_date: date


@dataclass(frozen=True, slots=True, kw_only=True)
class Page:
    """What one payload yields."""

    format: Format
    rows: tuple[ArenaRow, ...]
    rejected: int
    #: datasets-server envelope only: ``num_rows_total`` and the entries on this page
    total_rows: int | None = None
    page_rows: int = 0


# Sources.


def is_datasets_server(url: str) -> bool:
    parts = urlsplit(url)
    return parts.scheme == "https" and parts.hostname == DATASETS_SERVER_HOST


def page_url(url: str, offset: int) -> str:
    """``url`` with ``&offset=<offset>&length=100`` (replacing any it had)."""
    base = url
    while match := _PAGING_PARAM.search(base):
        start, end = match.span()
        lead = base[start]
        rest = base[end:]
        if lead == "?" and rest.startswith("&"):
            rest = "?" + rest[1:]
        base = base[:start] + rest
    joiner = "&" if "?" in base else "?"
    return f"{base}{joiner}offset={offset}&length={PAGE_ROWS}"


def source_label(url: str) -> str:
    """The ``ArenaScore.source`` of a URL or file: ``hf:<dataset>/<config>/<split>``
    for a datasets-server URL (its per-category filters are one source), else the
    URL or path as given."""
    if not is_datasets_server(url):
        return url
    query = parse_qs(urlsplit(url).query)
    parts = [query.get(name, [""])[0] for name in ("dataset", "config", "split")]
    if not parts[0]:
        return url
    return "hf:" + "/".join(parts)


def peek_envelope(payload: bytes) -> tuple[int, int] | None:
    """``(num_rows_total, rows on this page)`` of a datasets-server envelope, else
    None; for paging, which must know the total before parsing every page."""
    try:
        data = json.loads(payload)
    except ValueError:
        return None
    if not (isinstance(data, dict) and isinstance(data.get("rows"), list)):
        return None
    total = data.get("num_rows_total")
    if isinstance(total, bool) or not isinstance(total, int):
        return None
    return total, len(data["rows"])


# Field readers.


def _bound(row: Mapping[str, Any], key: str) -> float | None:
    """A finite number, or None when null or absent."""
    return None if row.get(key) is None else _rating(row, key)


def _rating(row: Mapping[str, Any], key: str) -> float:
    value = row.get(key)
    if value is None:
        raise Invalid(f"{key} is missing")
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise Invalid(f"{key} is not a number")
    if not math.isfinite(value):
        raise Invalid(f"{key} is not finite")
    return float(value)


def _count(row: Mapping[str, Any], key: str) -> int | None:
    value = row.get(key)
    if value is None:
        return None
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise Invalid(f"{key} is not a non-negative integer")
    return value


def _name(value: Any) -> str:
    if not isinstance(value, str) or not value.strip():
        raise Invalid("model_name is not a non-empty string")
    if len(value) > MAX_NAME_CHARS:
        raise Invalid("model_name is longer than 256 characters")
    return value


def _date(value: Any) -> date:
    if not isinstance(value, str):
        raise Invalid("leaderboard_publish_date is not a string")
    try:
        return date.fromisoformat(value)
    except ValueError:
        pass
    try:
        return datetime.fromisoformat(value).date()
    except ValueError as exc:
        raise Invalid(f"leaderboard_publish_date {value!r} is not a date") from exc


# hf-rows.


def _hf_row(raw: Mapping[str, Any]) -> ArenaRow:
    return ArenaRow(
        category=str(raw["category"]),
        model_name=_name(raw.get("model_name")),
        rating=_rating(raw, "rating"),
        rating_lower=_bound(raw, "rating_lower"),
        rating_upper=_bound(raw, "rating_upper"),
        votes=_count(raw, "vote_count"),
        rank=_count(raw, "rank"),
        publish_date=_date(raw.get("leaderboard_publish_date")),
    )


def _unwrap(entry: Any) -> Mapping[str, Any]:
    """The row of an envelope entry or of a bare row object; raises ``Invalid``."""
    if not isinstance(entry, dict):
        raise Invalid("entry is not an object")
    if "row" in entry and isinstance(entry["row"], dict):
        if entry.get("truncated_cells"):
            raise Invalid("row has truncated cells")
        return entry["row"]
    return entry


def _kept_row(entry: Any) -> ArenaRow | None:
    """The row of an entry; None for a category that is not kept."""
    raw = _unwrap(entry)
    category = raw.get("category")
    if not isinstance(category, str):
        raise Invalid("category is not a string")
    return _hf_row(raw) if category in KEPT_CATEGORIES else None


def _hf_rows(entries: Iterable[Any]) -> tuple[tuple[ArenaRow, ...], int]:
    rows: list[ArenaRow] = []
    rejected = 0
    for entry in entries:
        try:
            row = _kept_row(entry)
        except Invalid:
            rejected += 1
            continue
        if row is not None:
            rows.append(row)
    return tuple(rows), rejected


def _json_lines(payload: bytes) -> list[Any] | None:
    """The objects of a JSON Lines payload; None when no line is a JSON object."""
    entries: list[Any] = []
    seen_object = False
    for line in payload.splitlines():
        if not line.strip():
            continue
        try:
            value = json.loads(line)
        except ValueError:
            value = None  # rejected as a row below
        seen_object = seen_object or isinstance(value, dict)
        entries.append(value)
    return entries if seen_object else None


# arena-catalog.


def _is_catalog(data: Any) -> bool:
    if not isinstance(data, dict) or not data or "rows" in data:
        return False
    boards = list(data.values())
    if not all(isinstance(board, dict) for board in boards):
        return False
    entries = [entry for board in boards for entry in board.values()]
    return bool(entries) and all(
        isinstance(entry, dict) and "rating" in entry for entry in entries
    )


_CatalogEntry = tuple[str, float, float | None, float | None]


def _catalog_entry(name: str, entry: Any) -> _CatalogEntry:
    """``(name, rating, lower, upper)``; raises ``Invalid``."""
    if not isinstance(entry, dict):
        raise Invalid("entry is not an object")
    return (
        _name(name),
        _rating(entry, "rating"),
        _bound(entry, "rating_q025"),
        _bound(entry, "rating_q975"),
    )


def _catalog_rows(
    data: Mapping[str, Any], today: date
) -> tuple[tuple[ArenaRow, ...], int]:
    rows: list[ArenaRow] = []
    rejected = 0
    for board_name, board in data.items():
        category = CATALOG_CATEGORIES.get(board_name)
        if category is None or not isinstance(board, dict):
            continue
        valid: list[_CatalogEntry] = []
        for name, entry in board.items():
            try:
                valid.append(_catalog_entry(name, entry))
            except Invalid:
                rejected += 1
        ratings = [rating for _, rating, _, _ in valid]
        rows.extend(
            ArenaRow(
                category=category,
                model_name=name,
                rating=rating,
                rating_lower=lower,
                rating_upper=upper,
                votes=None,
                rank=1 + sum(other > rating for other in ratings),
                publish_date=today,
            )
            for name, rating, lower, upper in valid
        )
    return tuple(rows), rejected


# Detection and parsing.


def _decode(payload: bytes) -> tuple[Any, bool]:
    """``(data, is_json_lines)``; raises ``FormatError`` for neither."""
    try:
        return json.loads(payload), False
    except ValueError:
        lines = _json_lines(payload)
        if lines is None:
            raise FormatError("payload is neither JSON nor JSON Lines") from None
        return lines, True


def detect(data: Any) -> Format:
    """The format of decoded JSON; raises ``FormatError`` when it is neither."""
    if isinstance(data, dict) and isinstance(data.get("rows"), list):
        return Format.HF_ROWS
    if isinstance(data, list):
        return Format.HF_ROWS
    if isinstance(data, dict) and "model_name" in data:  # one JSON Lines row
        return Format.HF_ROWS
    if _is_catalog(data):
        return Format.ARENA_CATALOG
    raise FormatError(
        "payload is not hf-rows (rows envelope, array, JSON Lines) "
        "nor arena-catalog ({category: {model: {rating, …}}})"
    )


def parse(payload: bytes, *, fmt: str = Format.AUTO, today: date) -> Page:
    """One payload -> its kept, valid rows.  Pure; raises ``FormatError``."""
    data, is_lines = _decode(payload)
    found = Format.HF_ROWS if is_lines else detect(data)
    if fmt not in (Format.AUTO, found):
        raise FormatError(f"payload is not {fmt} (it reads as {found})")
    if found == Format.ARENA_CATALOG:
        rows, rejected = _catalog_rows(data, today)
        return Page(format=found, rows=rows, rejected=rejected)
    if isinstance(data, dict) and "rows" in data:
        rows, rejected = _hf_rows(data["rows"])
        total = data.get("num_rows_total")
        return Page(
            format=found,
            rows=rows,
            rejected=rejected,
            total_rows=total if isinstance(total, int) else None,
            page_rows=len(data["rows"]),
        )
    entries = data if isinstance(data, list) else [data]
    rows, rejected = _hf_rows(entries)
    return Page(format=found, rows=rows, rejected=rejected)
