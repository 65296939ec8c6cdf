"""Smart tier routing: classifier ``v1`` and the session tier pin (spec 05 §2.2-2.4).

``classify(body, threshold)`` scores one validated chat body, in process and without
a model call:

1. **Explicit reasoning** (``reasoning_effort`` / ``reasoning.effort`` in medium, high,
   xhigh, max, or ``thinking.type`` enabled / adaptive; any case) makes the verdict
   ``hard`` whatever the score.  The score is computed anyway (headers, log, histogram).
2. **Points**, each signal at most once, recorded as ``name:+points`` in this order:
   ``effort_keyword`` +4 (a phrase of ``EFFORT_PHRASES`` in the last user message,
   recorded ``effort_keyword:+4:<phrase>``), ``code`` +3 (the current turn = the last
   user message and every message after it), ``tools`` +2 / +4, ``structured_output``
   +2, ``attachments`` +2, ``context`` +1 / +3 / +6, ``thread_depth`` +1.  Maximum 22.
3. The verdict is ``hard`` if explicit reasoning applies or ``score >= threshold``.

The keyword and code scans read at most ``SCAN_LIMIT_CHARS`` characters of their text,
through one precompiled pattern for all phrases and five literal-led patterns for the
code markers, so a 32 000-character request classifies well under a millisecond (the
phrase scan dominates: one match attempt per word start).

``header_mode`` reads ``X-OmniRoute-Smart-Routing`` / ``X-OmniRoute-Tier`` and
``decide_tier`` applies the §2.3 table.  Invariants: a pin only ever moves upward
(easy -> hard); only expiry (``live_pin``) returns a session to easy; a forced or
bypassed request never writes or renews a pin; without a session no pin is read or
written.  Nothing here does I/O: the pin store and the clock belong to the caller.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, Literal

from gateway.kernel.text import message_text

__all__ = [
    "CLASSIFIER_VERSION",
    "EFFORT_PHRASES",
    "SCAN_LIMIT_CHARS",
    "SCORE_BUCKETS",
    "HeaderMode",
    "Tier",
    "TierDecision",
    "TierPin",
    "TierSource",
    "Verdict",
    "classify",
    "decide_tier",
    "header_mode",
    "live_pin",
    "message_text",
    "signal_name",
]

Tier = Literal["easy", "hard"]
TierSource = Literal[
    "bypass", "forced", "explicit_reasoning", "classifier", "session_pin"
]

#: Changing this list is a code change and bumps ``CLASSIFIER_VERSION`` (spec 05 §2.2).
CLASSIFIER_VERSION = "v1"
EFFORT_PHRASES: tuple[str, ...] = (
    "think hard",
    "think harder",
    "think deeply",
    "think carefully",
    "think it through",
    "ultrathink",
    "step by step",
    "root cause",
    "in depth",
    "deep dive",
    "thoroughly",
    "carefully analyze",
    "carefully analyse",
    "analyze in detail",
    "analyse in detail",
    "reason through",
    "first principles",
    "rigorous",
    "rigorously",
    "prove that",
    "formal proof",
    "edge cases",
    "trade offs",
    "tradeoffs",
    "pros and cons",
    "race condition",
    "deadlock",
    "memory leak",
    "debug this",
    "why does this fail",
)
#: ``omniroute_smartroute_score`` histogram buckets (spec 05 §2.4); 22 is the maximum
SCORE_BUCKETS = (0, 1, 2, 3, 4, 5, 6, 7, 8, 10, 12, 16, 22)
#: the keyword and code scans read at most this much of their text (spec 05 §2.2)
SCAN_LIMIT_CHARS = 200_000

EFFORT_KEYWORD_POINTS = 4
CODE_POINTS = 3
TOOLS_POINTS = 2
TOOLS_MANY_POINTS = 4
TOOLS_MANY = 5  # entries of ``tools`` / ``functions`` for the higher score
STRUCTURED_OUTPUT_POINTS = 2
ATTACHMENTS_POINTS = 2
#: (code points over all messages, points), highest first; decimal thresholds
CONTEXT_POINTS = ((32_000, 6), (8_000, 3), (2_000, 1))
THREAD_DEPTH_POINTS = 1
THREAD_DEPTH_MESSAGES = 7
#: the highest score (spec 05 §2.2: 22): a threshold above it sends every request
#: without explicit reasoning to ``easy``
MAX_SCORE = (
    EFFORT_KEYWORD_POINTS
    + CODE_POINTS
    + TOOLS_MANY_POINTS
    + STRUCTURED_OUTPUT_POINTS
    + ATTACHMENTS_POINTS
    + CONTEXT_POINTS[0][1]
    + THREAD_DEPTH_POINTS
)

_EXPLICIT_EFFORTS = frozenset({"medium", "high", "xhigh", "max"})
_EXPLICIT_THINKING = frozenset({"enabled", "adaptive"})
_STRUCTURED_TYPES = frozenset({"json_schema", "json_object"})
_ATTACHMENT_TYPES = frozenset({"image_url", "input_audio", "file"})
_HEADER_TIERS: Mapping[str, Tier] = {"easy": "easy", "hard": "hard"}


_SEPARATOR = r"[\s\-]+"  # what one space of a phrase matches


def _trie_pattern(phrases: Iterable[str]) -> str:
    """One regex alternation for ``phrases``, factored on shared prefixes.

    Each space becomes ``_SEPARATOR``, so "ROOT-CAUSE" and "root   cause" match
    "root cause".  Factoring keeps a failed attempt to one or two comparisons.
    """
    root: dict[str, Any] = {}
    for phrase in phrases:
        node = root
        for char in phrase:
            node = node.setdefault(char, {})
        node[""] = {}  # a phrase ends here

    def emit(node: Mapping[str, Any]) -> str:
        branches = [
            (_SEPARATOR if char == " " else re.escape(char)) + emit(child)
            for char, child in sorted(node.items())
            if char
        ]
        if "" in node and branches:
            branches.append("")  # tried last; the trailing (?!\w) backtracks here
        if len(branches) == 1:
            return branches[0]
        return "(?:" + "|".join(branches) + ")"

    return emit(root)


# Searched in " " + lower-cased text.  Word boundaries: no letter, digit or "_" (``\w``)
# directly before or after, so "steppe" never matches "step" nor "root_cause" "root
# cause".  The leading class is an explicit ASCII set (a fast skip loop that tries a
# match only after a non-word ASCII character or any non-ASCII one); ``_keyword``
# rejects a non-ASCII letter or digit found there.
_EFFORT = re.compile(r"[^0-9a-z_](" + _trie_pattern(EFFORT_PHRASES) + r")(?!\w)")
_SEPARATORS = re.compile(_SEPARATOR)

# The code markers, each searched in "\n" + text.  Each pattern opens with a literal,
# which the regex engine finds with a fast scan, so a marker-free text costs a few
# microseconds per pattern instead of a match attempt at every position.  Runs are
# bounded or possessive, so a long token (a base64 blob) cannot make backtracking
# quadratic.  A JS/TS file ends in a non-digit, so a time ("at 10:30:45") is no frame.
_JS_FILE = r"[^\s()]{0,300}[^\s()\d:]:\d+:\d+"
_CODE_MARKERS = (
    re.compile(
        r"\n(?:"  # a line starting with
        r" {0,3}(?:```|~~~)"  # a fence, indented by at most 3 spaces
        r"|@@ -\d+(?:,\d+)? \+\d+(?:,\d+)? @@"  # a unified-diff hunk header
        r"|panic: "  # Go
        r"|goroutine \d+ \["  # Go
        r'|Exception in thread "'  # JVM
        r")"
    ),
    re.compile(re.escape("diff --git ")),
    re.compile(re.escape("Traceback (most recent call last):")),  # Python
    re.compile(r"thread '[^'\n]{0,300}+' panicked at"),  # Rust
    re.compile(
        r"at (?<!\wat )"  # a stack frame; "at" is a whole word
        # Every frame's first token ends at "(", ":", " (" or " [as": a cheap
        # rejection of prose ("at noon", "look at foo.bar").
        r"(?=(?:async |new )?[^\s():]{0,300}+(?:[(:]| \(| \[as ))(?:"
        # Java / Kotlin / Scala: at pkg.Class.method(File.java:42)
        r"(?:[\w$]{1,300}+\.){1,100}+[\w$<>]{1,300}+"
        r"\([\w$.\-]{1,300}\.(?:java|kt|scala):\d+\)"
        # JS / TS: at fn (file:line:col), at async fn [as x] (file:line:col)
        r"|(?:async |new )?[^\s()]{1,300}+(?: \[as [^\]\n]{0,300}+\])? \("
        + _JS_FILE
        + r"\)"
        # JS / TS: at file:line:col
        + r"|"
        + _JS_FILE
        # .NET: at Ns.Type.Method(args) in path:line N
        + r"|[\w$.`<>\[\],]{1,300}+\([^\n)]{0,300}+\) in [^\n]{1,300}?:line \d+"
        r")"
    ),
)


@dataclass(frozen=True, slots=True, kw_only=True)
class Verdict:
    """The classifier's output: ``signals`` are ``name:+points`` in table order."""

    tier: Tier
    score: int
    signals: tuple[str, ...]
    explicit_reasoning: bool
    version: str = CLASSIFIER_VERSION


@dataclass(frozen=True, slots=True, kw_only=True)
class TierPin:
    """A stored tier pin for (API key, session, ``tier:<alias>``) (spec 05 §1.3)."""

    tier: Tier
    score: int
    updated_at: float  # unix seconds of the last write; the TTL slides from here


@dataclass(frozen=True, slots=True, kw_only=True)
class HeaderMode:
    """What the two request headers ask for (spec 05 §2.3)."""

    bypass: bool  # ``X-OmniRoute-Smart-Routing: off``
    forced: Tier | None  # ``X-OmniRoute-Tier: easy|hard`` (ignored under bypass)
    ignored: bool  # an unexpected value of either header -> signal ``header_ignored``

    @property
    def classify(self) -> bool:
        """Whether the classifier runs: always, except under bypass."""
        return not self.bypass


@dataclass(frozen=True, slots=True, kw_only=True)
class TierDecision:
    """The tier a request uses and what happens to its session pin."""

    tier: Tier
    source: TierSource
    #: the pin to store (renewed, ``updated_at = now``); None leaves the store untouched
    write_pin: TierPin | None
    #: a live pin moved easy -> hard (``omniroute_smartroute_escalations_total``)
    escalated: bool
    #: whether the classifier runs (False only for ``Smart-Routing: off``)
    classify: bool
    #: an unexpected header value: the caller records the signal ``header_ignored``
    ignored_header: bool


# --- classifier -----------------------------------------------------------------------


def _is_explicit(body: Mapping[str, Any]) -> bool:
    reasoning = body.get("reasoning")
    thinking = body.get("thinking")
    efforts = (
        body.get("reasoning_effort"),
        reasoning.get("effort") if isinstance(reasoning, Mapping) else None,
    )
    if any(
        isinstance(e, str) and e.strip().lower() in _EXPLICIT_EFFORTS for e in efforts
    ):
        return True
    kind = thinking.get("type") if isinstance(thinking, Mapping) else None
    return isinstance(kind, str) and kind.strip().lower() in _EXPLICIT_THINKING


def _head(texts: Iterable[str], limit: int = SCAN_LIMIT_CHARS) -> str:
    """The texts joined by \\n, cut to ``limit`` characters (no huge copy first)."""
    parts: list[str] = []
    size = 0
    for text in texts:
        if size >= limit:
            break
        parts.append(text)
        size += len(text) + 1
    return "\n".join(parts)[:limit]


def _keyword(text: str) -> str | None:
    """The first effort phrase in ``text`` (its first ``SCAN_LIMIT_CHARS``), if any."""
    lowered = " " + text[:SCAN_LIMIT_CHARS].lower()
    found = _EFFORT.search(lowered)
    while found and _is_word_char(found.group()[0]):
        found = _EFFORT.search(lowered, found.start() + 1)
    return _SEPARATORS.sub(" ", found.group(1)) if found else None


def _is_word_char(char: str) -> bool:
    return char.isalnum() or char == "_"


def _has_code(turn_texts: Sequence[str]) -> bool:
    text = "\n" + _head(turn_texts)
    return any(marker.search(text) for marker in _CODE_MARKERS)


def _entries(value: Any) -> int:
    return len(value) if isinstance(value, list) else 0


def _tools_points(body: Mapping[str, Any]) -> int:
    count = _entries(body.get("tools")) or _entries(body.get("functions"))
    if count >= TOOLS_MANY:
        return TOOLS_MANY_POINTS
    return TOOLS_POINTS if count else 0


def _has_structured_output(body: Mapping[str, Any]) -> bool:
    response_format = body.get("response_format")
    return (
        isinstance(response_format, Mapping)
        and response_format.get("type") in _STRUCTURED_TYPES
    )


def _has_attachment(messages: Sequence[Any]) -> bool:
    return any(
        isinstance(part, Mapping) and part.get("type") in _ATTACHMENT_TYPES
        for message in messages
        if isinstance(message, Mapping) and isinstance(message.get("content"), list)
        for part in message["content"]
    )


def _tool_call_chars(message: Any) -> int:
    if not isinstance(message, Mapping) or message.get("role") != "assistant":
        return 0
    calls = message.get("tool_calls")
    if not isinstance(calls, list):
        return 0
    total = 0
    for call in calls:
        function = call.get("function") if isinstance(call, Mapping) else None
        arguments = function.get("arguments") if isinstance(function, Mapping) else None
        if isinstance(arguments, str):
            total += len(arguments)
    return total


def _context_points(messages: Sequence[Any], texts: Sequence[str]) -> int:
    size = sum(map(len, texts)) + sum(map(_tool_call_chars, messages))
    return next((points for floor, points in CONTEXT_POINTS if size >= floor), 0)


def classify(body: Mapping[str, Any], threshold: int) -> Verdict:
    """Classify one validated chat body as ``easy`` or ``hard`` (spec 05 §2.2, v1)."""
    raw = body.get("messages")
    messages: Sequence[Any] = raw if isinstance(raw, list) else ()
    texts = [message_text(m) for m in messages]
    last_user = next(
        (
            i
            for i in range(len(messages) - 1, -1, -1)
            if isinstance(messages[i], Mapping) and messages[i].get("role") == "user"
        ),
        None,
    )
    signals: list[str] = []
    score = 0

    def hit(name: str, points: int, detail: str = "") -> None:
        nonlocal score
        if points:
            score += points
            signals.append(f"{name}:+{points}{detail}")

    phrase = _keyword(texts[last_user]) if last_user is not None else None
    if phrase is not None:
        hit("effort_keyword", EFFORT_KEYWORD_POINTS, f":{phrase}")
    if last_user is not None and _has_code(texts[last_user:]):
        hit("code", CODE_POINTS)
    hit("tools", _tools_points(body))
    hit("structured_output", STRUCTURED_OUTPUT_POINTS * _has_structured_output(body))
    hit("attachments", ATTACHMENTS_POINTS * _has_attachment(messages))
    hit("context", _context_points(messages, texts))
    hit("thread_depth", THREAD_DEPTH_POINTS * (len(messages) >= THREAD_DEPTH_MESSAGES))
    explicit = _is_explicit(body)
    return Verdict(
        tier="hard" if explicit or score >= threshold else "easy",
        score=score,
        signals=tuple(signals),
        explicit_reasoning=explicit,
    )


def signal_name(signal: str) -> str:
    """The label of ``omniroute_smartroute_signals_total``: no points, no phrase."""
    return signal.partition(":")[0]


# --- session tier pin -----------------------------------------------------------------


def header_mode(smart_header: str | None, tier_header: str | None) -> HeaderMode:
    """Read ``X-OmniRoute-Smart-Routing`` and ``X-OmniRoute-Tier`` (None = absent).

    Values are trimmed and case-insensitive.  ``Smart-Routing: on`` is the same as no
    header; ``off`` wins over a valid ``Tier`` header.  Any other value of either
    header (the empty string included) is ignored and reported in ``ignored``.
    """
    ignored = False
    bypass = False
    if smart_header is not None:
        smart = smart_header.strip().lower()
        bypass = smart == "off"
        ignored = smart not in ("on", "off")
    forced: Tier | None = None
    if tier_header is not None:
        forced = _HEADER_TIERS.get(tier_header.strip().lower())
        ignored = ignored or forced is None
    return HeaderMode(bypass=bypass, forced=None if bypass else forced, ignored=ignored)


def live_pin(pin: TierPin | None, *, now: float, ttl_seconds: float) -> TierPin | None:
    """``pin`` if its sliding lifetime has not run out at ``now``, else None.

    For stores without a native TTL; an expired pin behaves exactly like a missing
    one (spec 05 §1.3).  A pin expires ``ttl_seconds`` after ``updated_at``.
    """
    if pin is None or now - pin.updated_at >= ttl_seconds:
        return None
    return pin


def decide_tier(
    verdict: Verdict | None,
    *,
    smart_header: str | None,
    tier_header: str | None,
    pin: TierPin | None,
    has_session: bool,
    now: float,
) -> TierDecision:
    """Apply spec 05 §2.3: the tier used, its source and the pin to write.

    ``pin`` is the live pin (see ``live_pin``); it is ignored without a session.
    ``verdict`` may be None only under ``Smart-Routing: off`` (check ``header_mode``
    before classifying).  The written pin is stamped ``now``; its score is the score
    that decided the tier (the verdict's, or the pin's own when the pin holds hard).
    """
    mode = header_mode(smart_header, tier_header)
    pin = pin if has_session else None

    def decision(
        tier: Tier, source: TierSource, write_pin: TierPin | None = None
    ) -> TierDecision:
        return TierDecision(
            tier=tier,
            source=source,
            write_pin=write_pin,
            escalated=write_pin is not None
            and write_pin.tier == "hard"
            and pin is not None
            and pin.tier == "easy",
            classify=not mode.bypass,
            ignored_header=mode.ignored,
        )

    if mode.bypass:
        return decision(pin.tier if pin else "easy", "bypass")
    if verdict is None:
        raise ValueError("a verdict is required unless Smart-Routing is off")
    if mode.forced is not None:
        return decision(mode.forced, "forced")
    source: TierSource = (
        "explicit_reasoning" if verdict.explicit_reasoning else "classifier"
    )
    if not has_session:
        return decision(verdict.tier, source)
    if verdict.tier == "easy" and pin is not None and pin.tier == "hard":
        # Upward only: an easy request keeps the hard model (and its prompt cache).
        return decision("hard", "session_pin", replace(pin, updated_at=now))
    return decision(
        verdict.tier,
        source,
        TierPin(tier=verdict.tier, score=verdict.score, updated_at=now),
    )
