"""The text of message content (``gateway.kernel.text``): one rule for every reader."""

from gateway.kernel.composite import answer_text
from gateway.kernel.text import message_text, text_of


def test_a_string_is_its_own_text():
    assert text_of("plain") == "plain"


def test_every_part_with_a_string_text_is_joined_and_the_others_have_none():
    parts = [
        {"type": "text", "text": "a"},
        {"type": "image_url", "image_url": {"url": "u"}},
        {"type": "input_text", "text": "b"},
        {"type": "output_text", "text": "c"},
        {"type": "refusal", "refusal": "no"},
        {"type": "text"},
        {"type": "text", "text": 5},
        "loose",
    ]

    assert text_of(parts) == "a\nb\nc"
    assert text_of(parts, "\n\n") == "a\n\nb\n\nc"


def test_a_part_of_no_or_another_type_with_a_text_counts():
    # some OpenAI-compatible servers answer content parts as {"text": ...}
    parts = [{"text": "alpha"}, {"type": "json", "text": '{"t": 1}'}]

    assert text_of(parts) == 'alpha\n{"t": 1}'


def test_anything_else_has_no_text():
    assert text_of(None) == ""
    assert text_of(42) == ""
    assert message_text({"role": "assistant", "tool_calls": []}) == ""
    assert message_text("not a message") == ""


def test_a_composite_answer_of_untyped_parts_is_an_answer():
    completion = {"choices": [{"message": {"content": [{"text": " alpha answer "}]}}]}

    assert answer_text(completion) == "alpha answer"
