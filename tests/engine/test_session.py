"""Session id detection (spec 05 §1.1-1.2) and the scoped key ``S`` (03 §3)."""

from __future__ import annotations

import hashlib
import json

import pytest

from gateway.kernel.session import Session, auto_id, derive, scoped_key

USER = [{"role": "user", "content": "hello"}]
UUID = "1b4e28ba-2fa1-11d2-883f-0016d3cca427"


def _derive(headers=None, body=None, **kw):
    kw.setdefault("key_id", 7)
    kw.setdefault("model", "m")
    return derive(headers or {}, body if body is not None else {}, **kw)


@pytest.mark.parametrize(
    ("headers", "expected"),
    [
        ({"x-session-id": "abc"}, Session("abc", "header:x-session-id")),
        (
            {"x-claude-code-session-id": "c"},
            Session("c", "header:x-claude-code-session-id"),
        ),
        ({"session-id": "s"}, Session("s", "header:session-id")),
        ({"session_id": "s"}, Session("s", "header:session-id")),
        ({"x-litellm-session-id": "l"}, Session("l", "header:x-litellm-session-id")),
        ({"helicone-session-id": "h"}, Session("h", "header:helicone-session-id")),
        ({"agent-session-id": "a"}, Session("a", "header:agent-session-id")),
        # order: X-Session-Id beats the later names
        (
            {"agent-session-id": "a", "x-session-id": "x"},
            Session("x", "header:x-session-id"),
        ),
        # cleaning: trimmed; empty, too long or control characters fall through
        ({"x-session-id": "  padded  "}, Session("padded", "header:x-session-id")),
        (
            {"x-session-id": "   ", "session-id": "next"},
            Session("next", "header:session-id"),
        ),
        (
            {"x-session-id": "a" * 201, "session-id": "ok"},
            Session("ok", "header:session-id"),
        ),
        ({"x-session-id": "a" * 200}, Session("a" * 200, "header:x-session-id")),
        (
            {"x-session-id": "bad\x01id", "session-id": "ok"},
            Session("ok", "header:session-id"),
        ),
        ({"x-session-id": "bad\x7f"}, None),
    ],
)
def test_headers(headers, expected):
    assert _derive(headers, {}, auto_detect=False) == expected


def test_extra_headers_come_after_the_builtin_ones():
    headers = {"x-my-session": "mine"}
    assert _derive(headers, extra_headers=("X-My-Session",)) == Session(
        "mine", "header:x-my-session"
    )
    both = {"x-my-session": "mine", "agent-session-id": "agent"}
    assert _derive(both, extra_headers=("x-my-session",)).id == "agent"


def test_credential_headers_are_never_a_source():
    found = _derive(
        {"authorization": "Bearer sk"}, {}, extra_headers=("authorization",)
    )
    assert found is None or found.source == "auto"


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        ({"metadata": {"user_id": json.dumps({"session_id": "j"})}}, "j"),
        (
            {"metadata": {"user_id": f"user_abc_account__session_{UUID.upper()}"}},
            UUID.upper(),
        ),
        ({"metadata": {"user_id": "plain-user"}}, "plain-user"),
        ({"session_id": "s1"}, "s1"),
        ({"litellm_session_id": "l1"}, "l1"),
        ({"prompt_cache_key": "pck"}, "pck"),
        ({"session_id": "s1", "prompt_cache_key": "pck"}, "s1"),
        ({"metadata": {"user_id": "u"}, "session_id": "s1"}, "u"),
        ({"user": "someone"}, None),  # the OpenAI ``user`` field is never a source
    ],
)
def test_body_fields(body, expected):
    found = _derive({}, body, auto_detect=False)
    assert (found.id if found else None) == expected


def test_body_sources_are_named():
    assert _derive({}, {"session_id": "s"}).source == "body:session_id"
    assert _derive({}, {"metadata": {"user_id": "u"}}).source == "body:metadata.user_id"


def test_headers_beat_the_body():
    assert _derive({"x-session-id": "h"}, {"session_id": "b"}).id == "h"


def test_auto_id_is_the_hash_of_the_anchor():
    body = {"messages": [{"role": "system", "content": "sys"}, *USER]}
    anchor = {
        "k": 7,
        "m": "m",
        "p": [
            {"content": "sys", "role": "system"},
            {"content": "hello", "role": "user"},
        ],
        "t": None,
    }
    data = json.dumps(anchor, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    expected = "auto-" + hashlib.sha256(data.encode()).hexdigest()[:32]
    assert auto_id(7, "m", body) == expected
    assert _derive({}, body) == Session(expected, "auto")


def test_auto_id_follows_the_conversation():
    first = {"messages": USER}
    later = {
        "messages": [
            *USER,
            {"role": "assistant", "content": "hi"},
            {"role": "user", "content": "more"},
        ]
    }
    assert auto_id(1, "m", first) == auto_id(1, "m", later)
    other_user = {"messages": [{"role": "user", "content": "different"}]}
    assert auto_id(1, "m", first) != auto_id(1, "m", other_user)
    assert auto_id(1, "m", first) != auto_id(2, "m", first)
    assert auto_id(1, "m", first) != auto_id(1, "other", first)


def test_auto_id_ignores_cache_control_and_extra_fields():
    plain = {"messages": [{"role": "user", "content": [{"type": "text", "text": "x"}]}]}
    marked = {
        "messages": [
            {
                "role": "user",
                "name": "ignored",
                "content": [
                    {
                        "type": "text",
                        "text": "x",
                        "cache_control": {"type": "ephemeral"},
                    }
                ],
            }
        ]
    }
    assert auto_id(1, "m", plain) == auto_id(1, "m", marked)


def test_no_user_message_in_the_first_eight_means_no_session():
    system = [{"role": "system", "content": str(i)} for i in range(8)]
    assert auto_id(1, "m", {"messages": [*system, *USER]}) is None
    assert auto_id(1, "m", {"messages": [*system[:7], *USER]}) is not None
    assert _derive({}, {"messages": [{"role": "system", "content": "s"}]}) is None


def test_auto_detection_can_be_switched_off():
    assert _derive({}, {"messages": USER}, auto_detect=False) is None


def test_tools_are_part_of_the_anchor():
    tools = [{"type": "function", "function": {"name": "f"}}]
    assert auto_id(1, "m", {"messages": USER}) != auto_id(
        1, "m", {"messages": USER, "tools": tools}
    )


def test_scoped_key():
    expected = hashlib.sha256(b"7\x00abc").hexdigest()[:32]
    assert scoped_key(7, "abc") == expected
    assert scoped_key(7, "abc") != scoped_key(8, "abc")
