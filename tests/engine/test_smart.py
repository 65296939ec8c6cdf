"""Smart tier routing: classifier v1 and the session tier pin (spec 05 §2.2-2.3, §4).

Every body is built from plain dicts and every clock reading is a float, so the E1 and
E2 acceptance rows replay here exactly, without a gateway.
"""

from __future__ import annotations

import time
from typing import Any

import pytest

from gateway.kernel.smart import (
    CLASSIFIER_VERSION,
    EFFORT_PHRASES,
    SCAN_LIMIT_CHARS,
    SCORE_BUCKETS,
    HeaderMode,
    TierDecision,
    TierPin,
    Verdict,
    classify,
    decide_tier,
    header_mode,
    live_pin,
    message_text,
    signal_name,
)

THRESHOLD = 4  # spec 05 §4: threshold 4, default settings
TTL_SECONDS = 1800
FILLER = "Lorem ipsum dolor sit amet, consectetur adipiscing elit. "


def _prose(size: int) -> str:
    """``size`` characters of keyword-free, code-free prose."""
    return (FILLER * (size // len(FILLER) + 1))[:size]


def _snippet(size: int) -> str:
    """A fenced Python snippet of exactly ``size`` characters."""
    head, tail = "```python\n", "\n```"
    line = "total = total + value  # accumulate\n"
    body = (line * (size // len(line) + 1))[: size - len(head) - len(tail)]
    return head + body + tail


def _user(content: Any) -> dict[str, Any]:
    return {"role": "user", "content": content}


def _body(*messages: Any, **fields: Any) -> dict[str, Any]:
    """A chat body; a bare string or part list is a user message."""
    return {
        "model": "normal",
        "messages": [_user(m) if isinstance(m, str | list) else m for m in messages],
        **fields,
    }


def _tools(count: int) -> list[dict[str, Any]]:
    return [
        {"type": "function", "function": {"name": f"f{i}", "parameters": {}}}
        for i in range(count)
    ]


def _verdict(tier: str, score: int, *signals: str, explicit: bool = False) -> Verdict:
    return Verdict(
        tier=tier,  # type: ignore[arg-type]
        score=score,
        signals=signals,
        explicit_reasoning=explicit,
    )


def _signals(body: dict[str, Any]) -> tuple[str, ...]:
    return classify(body, THRESHOLD).signals


# --- E1: the acceptance rows ----------------------------------------------------------


def _nine_messages_of_prose(total: int) -> list[dict[str, Any]]:
    sizes = [total // 9] * 8 + [total - 8 * (total // 9)]
    roles = ["user", "assistant"] * 4 + ["user"]
    return [
        {"role": r, "content": _prose(n)} for r, n in zip(roles, sizes, strict=True)
    ]


TOOL_TURN = [
    _user("ok"),
    {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {
                "id": "c1",
                "type": "function",
                "function": {"name": "run_tests", "arguments": "{}"},
            }
        ],
    },
    {
        "role": "tool",
        "tool_call_id": "c1",
        "content": 'Traceback (most recent call last):\n  File "t.py", line 1, in '
        "<module>\nZeroDivisionError: division by zero",
    },
]

E1 = [
    pytest.param(_body("thanks!"), _verdict("easy", 0), id="thanks"),
    pytest.param(_body(_snippet(900)), _verdict("easy", 3, "code:+3"), id="snippet"),
    pytest.param(
        _body(
            _prose(750),
            {"role": "assistant", "content": _prose(750)},
            _snippet(900),
        ),
        _verdict("hard", 4, "code:+3", "context:+1"),
        id="snippet-in-2400-characters",
    ),
    pytest.param(
        _body("Find the ROOT-CAUSE of this flaky test"),
        _verdict("hard", 4, "effort_keyword:+4:root cause"),
        id="root-cause",
    ),
    pytest.param(_body("I stepped past the steppe"), _verdict("easy", 0), id="steppe"),
    pytest.param(
        _body(
            *_nine_messages_of_prose(9500),
            tools=_tools(6),
            response_format={"type": "json_schema", "json_schema": {"name": "x"}},
        ),
        _verdict(
            "hard",
            10,
            "tools:+4",
            "structured_output:+2",
            "context:+3",
            "thread_depth:+1",
        ),
        id="tools-schema-depth-context",
    ),
    pytest.param(
        _body(
            [
                {"type": "text", "text": _prose(300)},
                {"type": "image_url", "image_url": {"url": "https://x.test/a.png"}},
            ],
            tools=_tools(2),
        ),
        _verdict("hard", 4, "tools:+2", "attachments:+2"),
        id="tools-and-image",
    ),
    pytest.param(
        _body("hi", reasoning_effort="high"),
        _verdict("hard", 0, explicit=True),
        id="reasoning-high",
    ),
    pytest.param(
        _body("hi", reasoning_effort="low"), _verdict("easy", 0), id="reasoning-low"
    ),
    pytest.param(
        _body(*TOOL_TURN), _verdict("easy", 3, "code:+3"), id="traceback-in-tool"
    ),
]


@pytest.mark.parametrize(("body", "expected"), E1)
def test_e1_classifier_rows(body, expected):
    assert classify(body, THRESHOLD) == expected


def test_e1_bodies_have_the_described_sizes():
    assert len(_snippet(900)) == 900
    assert sum(len(m) for m in (_prose(750), _prose(750), _snippet(900))) == 2400
    nine = _nine_messages_of_prose(9500)
    assert len(nine) == 9
    assert sum(len(m["content"]) for m in nine) == 9500


def test_e1_explicit_reasoning_is_reported_as_its_source():
    verdict = classify(_body("hi", reasoning_effort="high"), THRESHOLD)

    decision = decide_tier(
        verdict, smart_header=None, tier_header=None, pin=None, has_session=False, now=0
    )

    assert (decision.tier, decision.source) == ("hard", "explicit_reasoning")


# --- each signal alone, at its boundaries ---------------------------------------------


@pytest.mark.parametrize(
    ("size", "signals"),
    [
        (1999, ()),
        (2000, ("context:+1",)),
        (7999, ("context:+1",)),
        (8000, ("context:+3",)),
        (31_999, ("context:+3",)),
        (32_000, ("context:+6",)),
    ],
)
def test_context_thresholds_are_decimal_code_points(size, signals):
    assert _signals(_body("x" * size)) == signals


def test_context_counts_code_points_not_bytes():
    assert _signals(_body("é" * 1999)) == ()
    assert _signals(_body("é" * 2000)) == ("context:+1",)


def test_context_sums_every_message_and_assistant_tool_call_arguments():
    call = {"type": "function", "function": {"name": "f", "arguments": "y" * 500}}
    body = _body(
        {"role": "system", "content": "s" * 500},
        "u" * 500,
        {"role": "assistant", "content": None, "tool_calls": [call, call]},
    )

    assert _signals(body) == ("context:+1",)  # 500 + 500 + 2 x 500


def test_context_ignores_tool_calls_outside_assistant_messages():
    call = {"type": "function", "function": {"name": "f", "arguments": "y" * 1500}}
    body = _body("u" * 500, {"role": "user", "content": "v", "tool_calls": [call]})

    assert _signals(body) == ()


def test_context_counts_text_parts_with_their_newline_joins():
    parts = [{"type": "text", "text": "x" * 1000}, {"type": "text", "text": "x" * 999}]

    assert _signals(_body(parts)) == ("context:+1",)  # 1000 + "\n" + 999


@pytest.mark.parametrize(
    ("fields", "signals"),
    [
        ({"tools": _tools(1)}, ("tools:+2",)),
        ({"tools": _tools(4)}, ("tools:+2",)),
        ({"tools": _tools(5)}, ("tools:+4",)),
        ({"tools": _tools(12)}, ("tools:+4",)),
        ({"tools": []}, ()),
        ({"functions": [{"name": "f"}]}, ("tools:+2",)),
        ({"functions": [{"name": f"f{i}"} for i in range(5)]}, ("tools:+4",)),
        ({"tools": [], "functions": [{"name": "f"}]}, ("tools:+2",)),
    ],
)
def test_tools_score_two_then_four_at_five_entries(fields, signals):
    assert _signals(_body("hi", **fields)) == signals


@pytest.mark.parametrize(
    ("count", "signals"),
    [(6, ()), (7, ("thread_depth:+1",)), (12, ("thread_depth:+1",))],
)
def test_thread_depth_counts_messages_of_any_role(count, signals):
    messages = [{"role": "system", "content": "s"}] * (count - 1) + [_user("hi")]

    assert _signals(_body(*messages)) == signals


@pytest.mark.parametrize(
    ("response_format", "signals"),
    [
        ({"type": "json_schema", "json_schema": {}}, ("structured_output:+2",)),
        ({"type": "json_object"}, ("structured_output:+2",)),
        ({"type": "text"}, ()),
        ("json_object", ()),
    ],
)
def test_structured_output(response_format, signals):
    assert _signals(_body("hi", response_format=response_format)) == signals


@pytest.mark.parametrize(
    "part",
    [
        {"type": "image_url", "image_url": {"url": "https://x.test/a.png"}},
        {"type": "input_audio", "input_audio": {"data": "AA==", "format": "wav"}},
        {"type": "file", "file": {"file_id": "file-1"}},
    ],
)
def test_attachments_in_any_message(part):
    earlier = {"role": "user", "content": [{"type": "text", "text": "see"}, part]}

    assert _signals(_body(earlier, "and now?")) == ("attachments:+2",)


def test_a_text_only_part_list_is_no_attachment():
    assert _signals(_body([{"type": "text", "text": "hi"}])) == ()


# --- code -----------------------------------------------------------------------------

CODE_POSITIVES = [
    "```python\nprint(1)\n```",
    "   ```\nthree spaces are allowed\n```",
    "~~~\nx\n~~~",
    "look:\n```\nx",
    "diff --git a/x.py b/x.py",
    "@@ -1,3 +1,4 @@ def f():",
    "context\n@@ -1 +1 @@",
    'Traceback (most recent call last):\n  File "x.py", line 1',
    "panic: runtime error: index out of range [3] with length 2",
    "goroutine 1 [running]:",
    "thread 'main' panicked at src/main.rs:2:5:",
    "java.lang.IllegalStateException\n\tat com.example.Foo.bar(Foo.java:42)",
    "at com.example.FooKt.main(Foo.kt:7)",
    "at scala.collection.immutable.List.foreach(List.scala:431)",
    "at com.example.Foo.<init>(Foo.java:10)",
    'Exception in thread "main" java.lang.NullPointerException',
    "TypeError: x\n    at Object.<anonymous> (/app/index.js:10:15)",
    "at async run (file:///app/x.mjs:3:7)",
    "at Foo.bar [as baz] (/app/foo.ts:1:2)",
    "at /app/index.js:10:15",
    "at node:internal/main/run_main_module:23:47",
    r"at MyApp.Program.Main(String[] args) in C:\src\Program.cs:line 42",
]


@pytest.mark.parametrize("text", CODE_POSITIVES)
def test_code_markers(text):
    assert _signals(_body(text)) == ("code:+3",)


CODE_NEGATIVES = [
    "    ```\nfour spaces make an indented block, not a fence",
    "\t```",
    "inline ``` is not a fence",
    "diff --git",
    "@@ -a +b @@",
    "text @@ -1 +1 @@",
    "traceback (most recent call last):",
    "the panic: was real",
    "goroutine x [running]:",
    "thread main panicked at home",
    "at com.example.Foo.bar(Foo.py:42)",
    "at Foo.bar(Foo.java)",
    'an Exception in thread "main"',
    "meet me at 10:30:45 tomorrow",
    "what (a.js:1:2)",
    "look at that (really)",
    "at Foo.Bar() :line 4",
]


@pytest.mark.parametrize("text", CODE_NEGATIVES)
def test_code_near_misses(text):
    assert _signals(_body(text)) == ()


def test_code_is_read_from_the_current_turn_only():
    fence = "```\nx\n```"
    earlier_user = _body(fence, {"role": "assistant", "content": "ok"}, "thanks")
    after_user = _body("why?", {"role": "assistant", "content": fence})
    in_system = _body({"role": "system", "content": fence}, "hi")

    assert _signals(earlier_user) == ()
    assert _signals(after_user) == ("code:+3",)
    assert _signals(in_system) == ()


def test_a_later_message_starts_a_line():
    body = _body("ok", {"role": "tool", "tool_call_id": "c", "content": "panic: x"})

    assert _signals(body) == ("code:+3",)


def test_without_a_user_message_there_is_no_keyword_and_no_turn():
    body = _body({"role": "system", "content": "```\nthink hard\n```"})

    assert _signals(body) == ()


# --- effort keywords ------------------------------------------------------------------


def test_the_v1_phrase_list():
    assert CLASSIFIER_VERSION == "v1"
    assert len(EFFORT_PHRASES) == 30
    assert len(set(EFFORT_PHRASES)) == 30
    assert EFFORT_PHRASES[0] == "think hard"
    assert EFFORT_PHRASES[-1] == "why does this fail"


@pytest.mark.parametrize("phrase", EFFORT_PHRASES)
def test_every_phrase_is_found_and_recorded(phrase):
    assert _signals(_body(f"Please, {phrase}.")) == (f"effort_keyword:+4:{phrase}",)


@pytest.mark.parametrize(
    ("text", "phrase"),
    [
        ("THINK HARD about it", "think hard"),
        ("Find the ROOT-CAUSE", "root cause"),
        ("root   cause", "root cause"),
        ("root\n\t cause", "root cause"),
        ("root - cause", "root cause"),
        ("weigh the trade-offs", "trade offs"),
        ("weigh the tradeoffs", "tradeoffs"),
        ("go step-by-step", "step by step"),
        ("(deadlock)", "deadlock"),
        ("non-rigorous", "rigorous"),
        ("\u201cdeep dive\u201d", "deep dive"),
        ("think harder", "think harder"),
        ("debug this deadlock", "debug this"),  # the first in the text
        ("éthink hard, then think hard", "think hard"),
    ],
)
def test_keyword_variants(text, phrase):
    assert _signals(_body(text)) == (f"effort_keyword:+4:{phrase}",)


@pytest.mark.parametrize(
    "text",
    [
        "I stepped past the steppe",
        "root_cause",
        "rootcause",
        "root.cause",
        "think hardly",
        "deadlocks",
        "an edge case",
        "2deep dive",
        "éthink hard",
        "deadlock_free",
    ],
)
def test_keyword_word_boundaries(text):
    assert _signals(_body(text)) == ()


def test_keywords_are_read_from_the_last_user_message_only():
    earlier = _body("think hard", {"role": "assistant", "content": "ok"}, "go")
    after = _body("go", {"role": "assistant", "content": "think hard"})
    in_parts = _body(
        [{"type": "text", "text": "a"}, {"type": "text", "text": "deep dive"}]
    )

    assert _signals(earlier) == ()
    assert _signals(after) == ()
    assert _signals(in_parts) == ("effort_keyword:+4:deep dive",)


# --- explicit reasoning ---------------------------------------------------------------


@pytest.mark.parametrize(
    "fields",
    [
        {"reasoning_effort": "medium"},
        {"reasoning_effort": "high"},
        {"reasoning_effort": "xhigh"},
        {"reasoning_effort": "max"},
        {"reasoning_effort": "HIGH"},
        {"reasoning": {"effort": "medium"}},
        {"reasoning": {"effort": "Max"}},
        {"thinking": {"type": "enabled", "budget_tokens": 1024}},
        {"thinking": {"type": "adaptive"}},
        {"thinking": {"type": "ENABLED"}},
        {"reasoning_effort": "low", "thinking": {"type": "enabled"}},
    ],
)
def test_explicit_reasoning_is_hard_whatever_the_score(fields):
    assert classify(_body("hi", **fields), THRESHOLD) == _verdict(
        "hard", 0, explicit=True
    )


@pytest.mark.parametrize(
    "fields",
    [
        {"reasoning_effort": "none"},
        {"reasoning_effort": "minimal"},
        {"reasoning_effort": "low"},
        {"reasoning": {"effort": "low"}},
        {"reasoning": "high"},
        {"thinking": {"type": "disabled"}},
        {"thinking": "enabled"},
    ],
)
def test_weak_or_disabled_reasoning_does_not_count(fields):
    assert classify(_body("hi", **fields), THRESHOLD) == _verdict("easy", 0)


def test_explicit_reasoning_still_computes_the_score():
    verdict = classify(_body("hi", tools=_tools(5), reasoning_effort="max"), THRESHOLD)

    assert verdict == _verdict("hard", 4, "tools:+4", explicit=True)


# --- verdict, signals, limits ---------------------------------------------------------


@pytest.mark.parametrize(
    ("threshold", "tier"), [(1, "hard"), (3, "hard"), (4, "easy"), (22, "easy")]
)
def test_the_threshold_decides_the_tier(threshold, tier):
    assert classify(_body(_snippet(100)), threshold).tier == tier


def test_every_signal_at_once_is_the_maximum_score():
    body = _body(
        *[{"role": "assistant", "content": "x" * 6000}] * 6,
        [
            {"type": "text", "text": "think hard\n```\nx\n```"},
            {"type": "image_url", "image_url": {"url": "https://x.test/a.png"}},
        ],
        tools=_tools(5),
        response_format={"type": "json_object"},
    )

    verdict = classify(body, THRESHOLD)

    assert verdict.signals == (
        "effort_keyword:+4:think hard",
        "code:+3",
        "tools:+4",
        "structured_output:+2",
        "attachments:+2",
        "context:+6",
        "thread_depth:+1",
    )
    assert verdict.score == 22 == SCORE_BUCKETS[-1]
    assert verdict.version == "v1"


def test_score_buckets():
    assert SCORE_BUCKETS == (0, 1, 2, 3, 4, 5, 6, 7, 8, 10, 12, 16, 22)


@pytest.mark.parametrize(
    ("signal", "name"),
    [
        ("effort_keyword:+4:root cause", "effort_keyword"),
        ("code:+3", "code"),
        ("context:+6", "context"),
        ("tools:+4", "tools"),
        ("header_ignored", "header_ignored"),
    ],
)
def test_signal_name_drops_points_and_keyword_text(signal, name):
    assert signal_name(signal) == name


def test_the_keyword_scan_reads_the_first_200_000_characters():
    inside = "x" * (SCAN_LIMIT_CHARS - len(" deadlock")) + " deadlock"
    outside = "x" * (SCAN_LIMIT_CHARS - len(" dead")) + " deadlock"

    assert _signals(_body(inside))[0] == "effort_keyword:+4:deadlock"
    assert _signals(_body(outside)) == ("context:+6",)


def test_the_code_scan_reads_the_first_200_000_characters_of_the_turn():
    inside = "x" * (SCAN_LIMIT_CHARS - 4) + "\n```"
    outside = "x" * (SCAN_LIMIT_CHARS - 3) + "\n```"
    tool = {"role": "tool", "tool_call_id": "c", "content": "panic: x"}

    assert _signals(_body(inside)) == ("code:+3", "context:+6")
    assert _signals(_body(outside)) == ("context:+6",)
    # the turn's text is the messages joined by "\n": "x" * n + "\n" + "panic: x"
    assert _signals(_body("x" * (SCAN_LIMIT_CHARS - 8), tool))[0] == "code:+3"
    assert _signals(_body("x" * (SCAN_LIMIT_CHARS - 7), tool)) == ("context:+6",)


@pytest.mark.parametrize(
    "text",
    [
        "at data:image/png;base64," + "AbC/+9" * 40_000,
        "at " + "a." * 100_000,
        "look at foo.bar " * 15_000,
        "at " + "a" * 200_000,
        "thread '" + "x" * 200_000,
    ],
)
def test_pathological_text_is_scanned_in_linear_time(text):
    started = time.perf_counter()
    classify(_body(text), THRESHOLD)

    assert time.perf_counter() - started < 0.5  # ~a few ms; quadratic would be minutes


def test_message_text():
    parts = [
        {"type": "text", "text": "a"},
        {"type": "image_url", "image_url": {"url": "u"}},
        {"type": "text", "text": "b"},
        {"type": "text"},
        "loose",
    ]

    assert message_text({"role": "user", "content": "plain"}) == "plain"
    assert message_text({"role": "user", "content": parts}) == "a\nb"
    assert message_text({"role": "assistant", "content": None}) == ""
    assert message_text("not a message") == ""


# --- headers --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("smart", "tier", "expected"),
    [
        (None, None, HeaderMode(bypass=False, forced=None, ignored=False)),
        ("on", None, HeaderMode(bypass=False, forced=None, ignored=False)),
        (" ON ", None, HeaderMode(bypass=False, forced=None, ignored=False)),
        ("off", None, HeaderMode(bypass=True, forced=None, ignored=False)),
        ("Off", "hard", HeaderMode(bypass=True, forced=None, ignored=False)),
        ("maybe", None, HeaderMode(bypass=False, forced=None, ignored=True)),
        ("", None, HeaderMode(bypass=False, forced=None, ignored=True)),
        (None, "easy", HeaderMode(bypass=False, forced="easy", ignored=False)),
        (None, " HARD ", HeaderMode(bypass=False, forced="hard", ignored=False)),
        (None, "medium", HeaderMode(bypass=False, forced=None, ignored=True)),
        ("on", "hard", HeaderMode(bypass=False, forced="hard", ignored=False)),
        ("off", "fast", HeaderMode(bypass=True, forced=None, ignored=True)),
    ],
)
def test_header_mode(smart, tier, expected):
    assert header_mode(smart, tier) == expected


# --- the tier decision ----------------------------------------------------------------

NOW = 1_000.0
EASY = _verdict("easy", 1, "context:+1")
HARD = _verdict("hard", 5, "code:+3", "tools:+2")
EXPLICIT = _verdict("hard", 0, explicit=True)
PIN_EASY = TierPin(tier="easy", score=0, updated_at=900.0)
PIN_HARD = TierPin(tier="hard", score=7, updated_at=900.0)


def _decision(
    tier: str,
    source: str,
    write_pin: TierPin | None = None,
    *,
    escalated: bool = False,
    classify: bool = True,
    ignored: bool = False,
) -> TierDecision:
    return TierDecision(
        tier=tier,  # type: ignore[arg-type]
        source=source,  # type: ignore[arg-type]
        write_pin=write_pin,
        escalated=escalated,
        classify=classify,
        ignored_header=ignored,
    )


def _pin(tier: str, score: int) -> TierPin:
    return TierPin(tier=tier, score=score, updated_at=NOW)  # type: ignore[arg-type]


DECISIONS = [
    # Smart-Routing: off -> the pin's tier or easy; no classification; pin untouched
    pytest.param(
        None, {"smart": "off"}, PIN_HARD, True,
        _decision("hard", "bypass", classify=False), id="bypass-keeps-pinned-tier",
    ),
    pytest.param(
        None, {"smart": "OFF"}, None, True,
        _decision("easy", "bypass", classify=False), id="bypass-without-pin",
    ),
    pytest.param(
        HARD, {"smart": "off", "tier": "hard"}, PIN_EASY, True,
        _decision("easy", "bypass", classify=False), id="bypass-beats-forced",
    ),
    pytest.param(
        None, {"smart": "off", "tier": "x"}, None, False,
        _decision("easy", "bypass", classify=False, ignored=True),
        id="bypass-with-ignored-tier-header",
    ),
    # X-OmniRoute-Tier -> that tier; the classifier runs; pin unchanged, not renewed
    pytest.param(
        HARD, {"tier": "easy"}, PIN_HARD, True, _decision("easy", "forced"),
        id="forced-easy-over-a-hard-pin",
    ),
    pytest.param(
        EASY, {"tier": "Hard"}, None, True, _decision("hard", "forced"),
        id="forced-hard-writes-no-pin",
    ),
    pytest.param(
        EASY, {"tier": "hard"}, PIN_EASY, True, _decision("hard", "forced"),
        id="forced-hard-is-no-escalation",
    ),
    pytest.param(
        EASY, {"tier": "hard"}, None, False, _decision("hard", "forced"),
        id="forced-without-session",
    ),
    # no session -> the verdict; no pin
    pytest.param(
        EASY, {}, None, False, _decision("easy", "classifier"), id="no-session-easy"
    ),
    pytest.param(
        HARD, {}, None, False, _decision("hard", "classifier"), id="no-session-hard"
    ),
    pytest.param(
        EXPLICIT, {}, None, False, _decision("hard", "explicit_reasoning"),
        id="no-session-explicit",
    ),
    pytest.param(
        EASY, {}, PIN_HARD, False, _decision("easy", "classifier"),
        id="a-pin-without-session-is-ignored",
    ),
    # v = hard -> hard, pin hard renewed
    pytest.param(
        HARD, {}, None, True, _decision("hard", "classifier", _pin("hard", 5)),
        id="hard-creates-pin",
    ),
    pytest.param(
        HARD, {}, PIN_HARD, True, _decision("hard", "classifier", _pin("hard", 5)),
        id="hard-renews-hard-pin",
    ),
    pytest.param(
        HARD, {}, PIN_EASY, True,
        _decision("hard", "classifier", _pin("hard", 5), escalated=True),
        id="hard-escalates-easy-pin",
    ),
    pytest.param(
        EXPLICIT, {}, PIN_EASY, True,
        _decision("hard", "explicit_reasoning", _pin("hard", 0), escalated=True),
        id="explicit-escalates-easy-pin",
    ),
    # v = easy, p = hard -> hard, pin hard renewed (keeps the score that set it)
    pytest.param(
        EASY, {}, PIN_HARD, True, _decision("hard", "session_pin", _pin("hard", 7)),
        id="easy-under-hard-pin",
    ),
    # v = easy, no pin or p = easy -> easy, pin easy renewed
    pytest.param(
        EASY, {}, None, True, _decision("easy", "classifier", _pin("easy", 1)),
        id="easy-creates-pin",
    ),
    pytest.param(
        EASY, {}, PIN_EASY, True, _decision("easy", "classifier", _pin("easy", 1)),
        id="easy-renews-easy-pin",
    ),
    # "on" is no header; other values are ignored and reported
    pytest.param(
        EASY, {"smart": "on"}, PIN_HARD, True,
        _decision("hard", "session_pin", _pin("hard", 7)), id="smart-on",
    ),
    pytest.param(
        EASY, {"smart": "sometimes", "tier": "medium"}, None, True,
        _decision("easy", "classifier", _pin("easy", 1), ignored=True),
        id="unexpected-values-ignored",
    ),
]  # fmt: skip


@pytest.mark.parametrize(
    ("verdict", "headers", "pin", "has_session", "expected"), DECISIONS
)
def test_decide_tier(verdict, headers, pin, has_session, expected):
    decision = decide_tier(
        verdict,
        smart_header=headers.get("smart"),
        tier_header=headers.get("tier"),
        pin=pin,
        has_session=has_session,
        now=NOW,
    )

    assert decision == expected


def test_a_verdict_is_required_unless_bypassed():
    with pytest.raises(ValueError, match="verdict"):
        decide_tier(
            None, smart_header=None, tier_header=None, pin=None, has_session=True, now=0
        )


@pytest.mark.parametrize(
    ("now", "alive"), [(900.0, True), (2699.9, True), (2700.0, False), (5000.0, False)]
)
def test_live_pin_expires_ttl_seconds_after_its_last_write(now, alive):
    assert live_pin(PIN_HARD, now=now, ttl_seconds=TTL_SECONDS) == (
        PIN_HARD if alive else None
    )
    assert live_pin(None, now=now, ttl_seconds=TTL_SECONDS) is None


# --- E2: upward-only pin --------------------------------------------------------------


class Caller:
    """What the gateway does around the engine: one pin store keyed by (key, session,
    scope), the headers, the classifier (unless bypassed) and ``decide_tier``."""

    def __init__(self) -> None:
        self.pins: dict[tuple[str, str, str], TierPin] = {}
        self.escalations = 0
        self.classified = 0

    def send(
        self, now: float, body: dict[str, Any], *, key: str = "k", **headers: str
    ) -> tuple[TierDecision, Verdict | None]:
        slot = (key, "s", "tier:normal")
        mode = header_mode(headers.get("smart"), headers.get("tier"))
        verdict = None
        if mode.classify:
            verdict = classify(body, THRESHOLD)
            self.classified += 1
        stored = self.pins.get(slot)
        decision = decide_tier(
            verdict,
            smart_header=headers.get("smart"),
            tier_header=headers.get("tier"),
            pin=live_pin(stored, now=now, ttl_seconds=TTL_SECONDS),
            has_session=True,
            now=now,
        )
        if decision.write_pin is not None:
            self.pins[slot] = decision.write_pin
        self.escalations += decision.escalated
        return decision, verdict

    def pin(self, key: str = "k") -> TierPin | None:
        return self.pins.get((key, "s", "tier:normal"))


E2_FIRST = _body(
    _prose(750), {"role": "assistant", "content": _prose(750)}, _snippet(900)
)


def test_e2_upward_only_pin():
    caller = Caller()
    rows = [
        # t, body, headers, score, pin after, tier, source
        (0, E2_FIRST, {}, 4, TierPin(tier="hard", score=4, updated_at=0), "hard",
         "classifier"),
        (60, _body("thanks!"), {}, 0, TierPin(tier="hard", score=4, updated_at=60),
         "hard", "session_pin"),
        (90, _body("thanks!"), {"tier": "easy"}, 0,
         TierPin(tier="hard", score=4, updated_at=60), "easy", "forced"),
        (120, _body("ok"), {}, 0, TierPin(tier="hard", score=4, updated_at=120),
         "hard", "session_pin"),
        (1921, _body("hello"), {}, 0, TierPin(tier="easy", score=0, updated_at=1921),
         "easy", "classifier"),
        (1950, _body("think step by step"), {}, 4,
         TierPin(tier="hard", score=4, updated_at=1950), "hard", "classifier"),
    ]  # fmt: skip
    for now, body, headers, score, pin_after, tier, source in rows:
        decision, verdict = caller.send(now, body, **headers)

        assert verdict is not None
        assert verdict.score == score, now
        assert caller.pin() == pin_after, now
        assert (decision.tier, decision.source) == (tier, source), now
        assert decision.escalated == (now == 1950), now
    assert caller.escalations == 1


def test_e2_forced_tier_does_not_renew_so_the_pin_still_expires_on_time():
    caller = Caller()
    caller.send(0, E2_FIRST)
    caller.send(1000, _body("thanks!"), tier="easy")  # not a renewal

    decision, _ = caller.send(1800, _body("thanks!"))

    assert (decision.tier, decision.source) == ("easy", "classifier")


def test_e2_bypass_does_not_classify_and_keeps_the_pin():
    caller = Caller()
    caller.send(0, E2_FIRST)

    decision, verdict = caller.send(60, _body("thanks!"), smart="off")

    assert verdict is None
    assert caller.classified == 1
    assert decision == _decision("hard", "bypass", classify=False)
    assert caller.pin() == TierPin(tier="hard", score=4, updated_at=0)


def test_e2_unexpected_header_is_reported_and_routing_goes_on():
    caller = Caller()

    decision, _ = caller.send(0, E2_FIRST, tier="turbo")

    assert decision.ignored_header
    assert (decision.tier, decision.source) == ("hard", "classifier")


def test_e2_the_same_conversation_with_another_key_starts_without_a_pin():
    """E2: "The same conversation sent with key k2 starts without a pin": pins are
    stored under the scoped key S, which folds in the API key (spec 03 §3)."""
    from gateway.kernel.session import scoped_key
    from providers.pins import PinStore

    pins = PinStore(clock=lambda: 0.0)
    pins.set(scoped_key("k", "s"), "tier:normal", {"tier": "hard"}, 1800)
    assert pins.get(scoped_key("k2", "s"), "tier:normal") is None
    decision = decide_tier(
        classify(_body(_user("thanks!")), 4),
        smart_header=None,
        tier_header=None,
        pin=None,
        has_session=True,
        now=0.0,
    )
    assert (decision.tier, decision.source) == ("easy", "classifier")
