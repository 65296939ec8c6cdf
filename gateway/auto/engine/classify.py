"""Task-type classifier of the auto engine (spec 04 §9.1).

Decides which of ``TASK_TYPES`` a chat request is about.  The input is the text of
the **last user message** (string content, or its ``text``/``input_text`` parts
joined with ``"\\n"``), cut to its first 20 000 characters.  The system prompt is
never read: a coding-assistant system prompt must not make every request ``coding``.

Steps:

1. The rows of ``task_keywords.yaml`` are tried in file order; the first row that
   matches wins, and ``default`` is the answer when none does.
2. A row matches on a structural signal or on a keyword.  Structural signals are
   checked on the raw text: literal phrases, regexes (``^`` is the start of any
   line) and, for ``coding``, the tokens of ``tools[].function.name``.
3. Keywords are checked on a normalised copy (lowercase, curly quotes -> ``'``,
   whitespace runs -> one space), each as ``(?<!\\w)`` + ``re.escape(kw)`` +
   ``(?!\\w)`` with Unicode ``\\w``.  There is no substring matching: "capital" does
   not contain "api", and "history" does not contain "story".

Task priors (``apply_prior``): on ``auto/coding[:tier]`` a result of ``default`` or
``analysis`` becomes ``coding``; on ``auto/reasoning[:tier]`` ``default`` becomes
``analysis``.

Where the spec is silent:

- The debugging phrases (``stack trace``, ``core dumped``, ...) are case-sensitive
  literal substrings of the raw text, like every structural signal.
- "Curly quotes" are the single and the double ones (U+2018-U+201F); every one of
  them becomes ``'``.
- A request with no user message is classified as if its text were empty, so only
  the tool-name signal of ``coding`` can still match.
- A tool name is split on ``_``, ``-``, ``.`` and camelCase boundaries
  (``runShellCommand`` -> run, shell, command; ``HTTPGet`` -> http, get); digits
  stay with the letters before them.

The rules are data (``task_keywords.yaml``), read and compiled once, when this
module is imported; every call after that is pure and does no I/O.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from gateway.auto.engine.types import TASK_TYPES
from gateway.kernel.text import message_text

__all__ = [
    "MAX_CLASSIFIER_CHARS",
    "apply_prior",
    "channel_prior",
    "classify_task",
    "last_user_text",
    "message_text",
]

MAX_CLASSIFIER_CHARS = 20_000  # spec 04 §9.1: only the first 20 000 characters count
DEFAULT_TASK = "default"
_RULES_FILE = Path(__file__).with_name("task_keywords.yaml")

_CURLY_QUOTES = str.maketrans(
    dict.fromkeys("\u2018\u2019\u201a\u201b\u201c\u201d\u201e\u201f", "'")
)
_NAME_SEPARATORS = re.compile(r"[_\-.]+")
# camelCase words: an acronym not followed by a lowercase letter, or an optional
# capital followed by lowercase letters/digits ("runShellCommand", "HTTPGet").
_CAMEL_WORD = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z0-9]+")


@dataclass(frozen=True, slots=True)
class _Row:
    task: str
    #: phrases and regexes, searched in the raw text
    structural: re.Pattern[str] | None
    #: the row's escaped keywords as one alternation ("" when it has none)
    keyword_alternation: str
    tool_name_tokens: frozenset[str]


def _whole_words(alternation: str) -> re.Pattern[str]:
    # spec 04 §9.1: a keyword matches only as a whole word or phrase (Unicode \w)
    return re.compile(rf"(?<!\w)(?:{alternation})(?!\w)")


def _strings(entry: Mapping[str, Any], field: str) -> list[str]:
    values = entry.get(field) or []
    if not isinstance(values, list) or not all(isinstance(v, str) for v in values):
        raise ValueError(f"{_RULES_FILE.name}: {field!r} must be a list of strings")
    return values


def _normalise(text: str) -> str:
    """Lowercase, curly quotes -> ', whitespace runs -> one space.

    ``str.split()`` splits on exactly the characters ``\\s`` matches; dropping the
    leading and trailing run changes no ``(?<!\\w)``/``(?!\\w)`` match.
    """
    text = text.lower()
    if not text.isascii():
        text = text.translate(_CURLY_QUOTES)
    return " ".join(text.split())


def _compile_row(entry: Mapping[str, Any]) -> _Row:
    task = entry.get("task")
    if task not in TASK_TYPES:
        raise ValueError(f"{_RULES_FILE.name}: unknown task {task!r}")
    structural = [re.escape(p) for p in _strings(entry, "phrases")]
    structural += [f"(?:{p})" for p in _strings(entry, "patterns")]
    keywords = _strings(entry, "keywords")
    for keyword in keywords:
        if _normalise(keyword) != keyword:
            raise ValueError(f"{_RULES_FILE.name}: keyword {keyword!r} not normalised")
    alternation = "|".join(map(re.escape, keywords))
    return _Row(
        task=task,
        structural=re.compile("|".join(structural), re.MULTILINE)
        if structural
        else None,
        keyword_alternation=alternation,
        tool_name_tokens=frozenset(_strings(entry, "tool_name_tokens")),
    )


def _load_rows() -> tuple[_Row, ...]:
    document = yaml.safe_load(_RULES_FILE.read_text(encoding="utf-8"))
    rows = tuple(_compile_row(entry) for entry in document["rows"])
    tasks = [row.task for row in rows]
    if len(set(tasks)) != len(tasks):
        raise ValueError(f"{_RULES_FILE.name}: a task has more than one row")
    return rows


_KeywordScan = tuple[re.Pattern[str], dict[int, int]]


def _keyword_scans(rows: Sequence[_Row]) -> tuple[_KeywordScan | None, ...]:
    """Entry ``k``: one regex over the keywords of ``rows[:k]``, one group per row.

    At any start position the alternation tries rows in order, so the group that
    matches there is the first row with a keyword at that position.  The
    lookarounds sit outside the groups: about 2x faster than one set per group.
    """
    scans: list[_KeywordScan | None] = [None]
    groups: list[str] = []
    group_row: dict[int, int] = {}
    for index, row in enumerate(rows):
        if row.keyword_alternation:
            groups.append(f"({row.keyword_alternation})")
            group_row[len(groups)] = index
        scan = (_whole_words("|".join(groups)), dict(group_row)) if groups else None
        scans.append(scan)
    return tuple(scans)


_ROWS = _load_rows()
_KEYWORD_SCANS = _keyword_scans(_ROWS)


def _first_keyword_row(normalised: str) -> int:
    """The index of the first row with a keyword in the text; ``len(_ROWS)`` if none.

    The leftmost hit names some matching row ``k``; a row before ``k`` can only
    match further right, so the search resumes there over the rows before ``k``.
    Each round drops at least one row, and one round usually settles it.
    """
    best, pos = len(_ROWS), 0
    while (scan := _KEYWORD_SCANS[best]) is not None:
        regex, group_row = scan
        hit = regex.search(normalised, pos)
        if hit is None:
            break
        best, pos = group_row[hit.lastindex or 0], hit.start() + 1
    return best


def last_user_text(messages: object) -> str | None:
    """The text of the last ``user`` message; ``None`` when there is none."""
    if not isinstance(messages, Sequence) or isinstance(messages, str):
        return None
    for message in reversed(messages):
        if isinstance(message, Mapping) and message.get("role") == "user":
            return message_text(message)
    return None


def _tool_name_tokens(tools: object) -> set[str]:
    if not isinstance(tools, Sequence) or isinstance(tools, str):
        return set()
    tokens: set[str] = set()
    for tool in tools:
        function = tool.get("function") if isinstance(tool, Mapping) else None
        name = function.get("name") if isinstance(function, Mapping) else None
        if not isinstance(name, str):
            continue
        for piece in _NAME_SEPARATORS.split(name):
            tokens.update(word.lower() for word in _CAMEL_WORD.findall(piece))
    return tokens


def classify_task(body: Mapping[str, Any]) -> str:
    """The task type of a chat request body (spec 04 §9.1); never raises on shape."""
    raw = (last_user_text(body.get("messages")) or "")[:MAX_CLASSIFIER_CHARS]
    keyword_row = _first_keyword_row(_normalise(raw))
    tool_tokens: set[str] | None = None  # computed only if a row needs them
    for row in _ROWS[:keyword_row]:
        if row.structural is not None and row.structural.search(raw):
            return row.task
        if row.tool_name_tokens:
            if tool_tokens is None:
                tool_tokens = _tool_name_tokens(body.get("tools"))
            if not row.tool_name_tokens.isdisjoint(tool_tokens):
                return row.task
    return _ROWS[keyword_row].task if keyword_row < len(_ROWS) else DEFAULT_TASK


def _route_family(route_id: str) -> str:
    """``auto/coding:fast`` -> ``auto/coding``; a combo id is returned unchanged."""
    return route_id.split(":", 1)[0] if route_id.startswith("auto/") else route_id


def apply_prior(task: str, route_id: str) -> str:
    """The task after the route's prior (spec 04 §9.1, "Task priors")."""
    family = _route_family(route_id)
    if family == "auto/coding" and task in ("default", "analysis"):
        return "coding"
    if family == "auto/reasoning" and task == "default":
        return "analysis"
    return task


def channel_prior(route_id: str) -> str:
    """The task of a request without messages on ``route_id`` (spec 04 §10)."""
    return apply_prior(DEFAULT_TASK, route_id)
