"""Task classifier and task priors: spec 04 §9.1 and §11 example 12."""

import pytest

from gateway.auto.engine.classify import (
    MAX_CLASSIFIER_CHARS,
    apply_prior,
    channel_prior,
    classify_task,
    last_user_text,
    message_text,
)
from gateway.auto.engine.types import TASK_TYPES


def _ask(text, *, tools=None, system=None):
    messages = [{"role": "system", "content": system}] if system else []
    body = {"messages": [*messages, {"role": "user", "content": text}]}
    if tools is not None:
        body["tools"] = [
            {"type": "function", "function": {"name": name, "parameters": {}}}
            for name in tools
        ]
    return classify_task(body)


# --- §11 example 12 -----------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "task"),
    [
        ("What is the capital of France?", "default"),
        ("Write a short poem about the sea", "default"),
        ("Refactor this TypeScript function", "coding"),
        (
            "Review this pull request\n"
            "diff --git a/auth.py b/auth.py\n"
            "--- a/auth.py\n"
            "+++ b/auth.py\n"
            "@@ -1,3 +1,4 @@\n"
            " import os\n"
            "+import sys\n",
            "review",
        ),
        ("Fix this: TypeError: x is undefined", "debugging"),
        ("Plan the refactor of our auth module", "planning"),
        ("Prove that the sum is finite", "analysis"),
        ("Explain the history of Rome", "default"),
    ],
)
def test_acceptance_example_12(text, task):
    assert _ask(text) == task


# --- structural signals, checked on the raw text ------------------------------------


@pytest.mark.parametrize(
    ("text", "task"),
    [
        ('Traceback (most recent call last):\n  File "x.py", line 1', "debugging"),
        ("got a ValueError here", "debugging"),
        ("it raises NullPointerException", "debugging"),
        ("HTTP2Error when connecting", "debugging"),
        ("here is the stack trace below", "debugging"),
        ("it printed: segmentation fault", "debugging"),
        ("Aborted (core dumped)", "debugging"),
        ("thread 'main' panicked at src/main.rs:2:5", "debugging"),
        ("Please look at:\ndiff --git a/x b/x\nindex 1..2", "review"),
        ("what changed?\n@@ -10 +10 @@\n-a\n+b", "review"),
        ("what changed?\n@@ -10,7 +10,8 @@ def f():", "review"),
        ("What does this print?\n```\nprint(1)\n```", "coding"),
        ("What does this print?\n~~~\nprint(1)\n~~~", "coding"),
        ("```\nx = 1\n```", "coding"),
    ],
)
def test_a_structural_signal_picks_its_row(text, task):
    assert _ask(text) == task


@pytest.mark.parametrize(
    "text",
    [
        "Error is a noun",  # the regex needs a capital-led prefix before Error
        "Errors everywhere",
        "a valueError starts lowercase",
        "Stack trace is capitalised",  # structural phrases are literal
        "see diff --git a/x b/x inline, not at a line start",
        "see @@ -1,3 +1,4 @@ inline",
        "an inline ```x``` fence",
        "  ```\n  an indented fence\n  ```",
    ],
)
def test_near_misses_of_structural_signals_stay_default(text):
    assert _ask(text) == "default"


def test_a_hunk_header_at_the_start_of_the_text_is_a_review():
    assert _ask("@@ -1,3 +1,4 @@\n-a\n+b") == "review"


# --- keywords, checked on a normalised copy -----------------------------------------


@pytest.mark.parametrize(
    ("text", "task"),
    [
        ("Help me debug this", "debugging"),
        ("There is a bug in the parser", "debugging"),
        ("The app crashes on start", "debugging"),
        ("It doesn't work anymore", "debugging"),
        ("My printer stopped working", "debugging"),
        ("I have a failing test", "debugging"),
        ("The deploy fails with code 3", "debugging"),
        ("Can you review my essay?", "review"),
        ("Give me a second opinion", "review"),
        ("Please audit these accounts", "review"),
        ("I need feedback on my résumé", "review"),
        ("Update the README", "documentation"),
        ("Draft release notes for 2.0", "documentation"),
        ("Write a tutorial for new hires", "documentation"),
        ("Add comments to this", "documentation"),
        ("What is our roadmap?", "planning"),
        ("Help me design a garden", "planning"),
        ("Break down this project", "planning"),
        ("We need a migration plan", "planning"),
        ("Prioritise these tasks", "planning"),
        ("Is SQL a language?", "coding"),
        ("What is an API?", "coding"),
        ("I love C++ and C#", "coding"),
        ("Teach me Kubernetes", "coding"),
        ("Write a regex for dates", "coding"),
        ("I like Rust", "coding"),
        ("Analyze these sales", "analysis"),
        ("Pros and cons of remote work", "analysis"),
        ("What are the trade-offs?", "analysis"),
        ("Find the root cause", "analysis"),
        ("Think step by step", "analysis"),
        ("Calculate the mean", "analysis"),
    ],
)
def test_a_keyword_picks_its_row(text, task):
    assert _ask(text) == task


@pytest.mark.parametrize(
    "text",
    [
        "What is the capital of France?",  # "api" inside "capital"
        "Tell me a story about history",  # "story" is not a keyword anyway
        "Explain the history of Rome",
        "Debugger, bugle and crashworthy",  # longer words: debug, bug, crash
        "a codec and a codex",  # code
        "javanese food",  # java
        "the planet Mars",  # plan
        "sqlite",  # sql
        "the documents arrived",  # document
        "a reviewer came",  # review
        "c+ grade",  # not c++
        "hypotheses",  # hypothesis
    ],
)
def test_keywords_never_match_inside_a_longer_word(text):
    assert _ask(text) == "default"


def test_keywords_match_whatever_their_case():
    assert _ask("REFACTOR IT") == "coding"


def test_a_curly_apostrophe_counts_as_a_straight_one():
    assert _ask("It doesn\u2019t work") == "debugging"


def test_a_curly_double_quote_is_a_word_boundary_like_any_quote():
    assert _ask("\u201cprove\u201d it") == "analysis"


@pytest.mark.parametrize("gap", ["  ", "\n", "\t \n ", "\u00a0"])
def test_whitespace_runs_inside_a_keyword_phrase_count_as_one_space(gap):
    assert _ask(f"please write a pull{gap}request") == "review"


def test_keyword_matching_is_unicode_aware():
    # "é" is a word character, so "bugé" is one word and "bug" does not match
    assert _ask("bugé") == "default"
    assert _ask("un bug ici") == "debugging"


# --- the first matching row wins ----------------------------------------------------


@pytest.mark.parametrize(
    ("text", "task"),
    [
        ("Traceback (most recent call last):\nplease review", "debugging"),
        ("review this bug", "debugging"),
        ("please review\ndiff --git a/x b/x", "review"),
        ("review the docs", "review"),
        ("document the plan", "documentation"),
        ("plan the python code", "planning"),
        ("```\ncompare\n```", "coding"),
        ("compare these python functions", "coding"),
        ("code review", "review"),  # "code review" (row 2) before "code" (row 5)
        ("api reference", "documentation"),  # row 3 before "api" of row 5
        ("compare the plans for our ValueError handling", "debugging"),
        ("compare, then fix the bug", "debugging"),  # an earlier row later in text
    ],
)
def test_the_first_matching_row_wins(text, task):
    assert _ask(text) == task


# --- tool names ---------------------------------------------------------------------


@pytest.mark.parametrize(
    "name",
    [
        "bash",
        "apply_patch",
        "runShellCommand",
        "read-file",
        "git.status",
        "RunTests",
        "execute_command",
        "HTTPGrep",
        "lint",
    ],
)
def test_a_tool_name_token_from_the_list_makes_a_chat_coding(name):
    assert _ask("hello there", tools=[name]) == "coding"


@pytest.mark.parametrize(
    "name", ["get_weather", "search_web", "profile", "testify", "bashful", "editor"]
)
def test_a_tool_name_without_a_listed_token_changes_nothing(name):
    assert _ask("hello there", tools=[name]) == "default"


def test_one_coding_tool_among_others_is_enough():
    assert _ask("hi", tools=["get_weather", "write_file"]) == "coding"


def test_tool_names_rank_as_coding_below_earlier_rows():
    assert _ask("review my essay", tools=["bash"]) == "review"
    assert _ask("compare these", tools=["bash"]) == "coding"


def test_malformed_tools_are_ignored():
    body = {
        "messages": [{"role": "user", "content": "hi"}],
        "tools": [None, {"function": None}, {"function": {"name": 3}}, "bash"],
    }
    assert classify_task(body) == "default"


def test_tools_decide_even_without_a_user_message():
    body = {
        "messages": [{"role": "system", "content": "review"}],
        "tools": [{"type": "function", "function": {"name": "run_bash"}}],
    }
    assert classify_task(body) == "coding"


# --- what is read -------------------------------------------------------------------


def test_only_the_last_user_message_counts():
    body = {
        "messages": [
            {"role": "user", "content": "Traceback (most recent call last):"},
            {"role": "assistant", "content": "Let me review that."},
            {"role": "user", "content": "thanks, what is the capital of France?"},
            {"role": "assistant", "content": "Paris. Any bug left?"},
        ]
    }
    assert classify_task(body) == "default"


def test_the_system_prompt_is_never_read():
    assert _ask("hello", system="You are a Python coding assistant.") == "default"


def test_text_parts_are_joined_with_newlines():
    body = {
        "messages": [
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": "look at this"},
                    {"type": "image_url", "image_url": {"url": "data:,x"}},
                    {"type": "input_text", "text": "```\nx = 1"},
                ],
            }
        ]
    }
    # the fence starts a line only because the parts are joined with "\n"
    assert classify_task(body) == "coding"


def test_only_the_first_20000_characters_are_read():
    padding = "x" * (MAX_CLASSIFIER_CHARS - len(" bug"))
    assert _ask(padding + " bug") == "debugging"
    assert _ask(padding + "  bug") == "default"
    assert _ask("x" * MAX_CLASSIFIER_CHARS + "\n```") == "default"


@pytest.mark.parametrize(
    "body",
    [
        {},
        {"messages": []},
        {"messages": None},
        {"messages": "debug"},
        {"messages": [{"role": "assistant", "content": "debug"}]},
        {"messages": [{"role": "user", "content": None}]},
        {"messages": [{"role": "user", "content": [{"type": "text"}]}]},
    ],
)
def test_requests_without_user_text_are_default(body):
    assert classify_task(body) == "default"


def test_every_answer_is_a_task_type():
    answers = {_ask(t) for t in ["bug", "review", "docs", "plan", "code", "prove", ""]}
    assert answers == set(TASK_TYPES)


def test_last_user_text_reads_string_content_and_text_parts():
    messages = [
        {"role": "user", "content": "first"},
        {"role": "user", "content": [{"type": "text", "text": "a"}, "b"]},
        {"role": "assistant", "content": "later"},
    ]
    assert last_user_text(messages) == "a"
    assert last_user_text(messages[:1]) == "first"
    assert last_user_text([{"role": "system", "content": "s"}]) is None
    assert last_user_text(None) is None


def test_message_text_of_a_message_without_text_is_empty():
    assert message_text({"role": "assistant", "tool_calls": []}) == ""
    assert message_text("not a message") == ""


# --- task priors --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("task", "route", "expected"),
    [
        ("default", "auto/coding", "coding"),
        ("analysis", "auto/coding", "coding"),
        ("default", "auto/coding:fast", "coding"),
        ("analysis", "auto/coding:pro", "coding"),
        ("review", "auto/coding", "review"),
        ("debugging", "auto/coding:cheap", "debugging"),
        ("default", "auto/reasoning", "analysis"),
        ("default", "auto/reasoning:pro", "analysis"),
        ("coding", "auto/reasoning", "coding"),
        ("default", "auto", "default"),
        ("analysis", "auto/smart", "analysis"),
        ("default", "auto/vision", "default"),
        ("default", "combo:coding", "default"),
    ],
)
def test_apply_prior(task, route, expected):
    assert apply_prior(task, route) == expected


@pytest.mark.parametrize(
    ("route", "expected"),
    [
        ("auto/coding", "coding"),
        ("auto/coding:free", "coding"),
        ("auto/reasoning", "analysis"),
        ("auto/reasoning:pro", "analysis"),
        ("auto", "default"),
        ("auto/chat", "default"),
        ("combo:mine", "default"),
    ],
)
def test_channel_prior_is_the_prior_of_a_request_without_messages(route, expected):
    assert channel_prior(route) == expected
