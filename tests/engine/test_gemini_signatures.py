"""Gemini's thought signatures in call ids (spec 10 §1): a signature in the standard
or the URL-safe base64 alphabet rides in the id and goes back on its call in the
alphabet it came in.  Pure: no server."""

from __future__ import annotations

import base64

import pytest

from gateway.dialects.gemini import GeminiDialect, call_id, signature_of

BASE_URL = "https://generativelanguage.googleapis.com"
FLASH = "gemini-2.5-flash"


RAW = bytes(range(256)) * 3  # every byte: both alphabets' own characters appear


def _sent_back(ident: str) -> dict:
    """The ``functionCall`` part Gemini gets for a call with ``ident``."""
    body = {
        "messages": [
            {"role": "user", "content": "x"},
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": ident,
                        "type": "function",
                        "function": {"name": "f", "arguments": "{}"},
                    }
                ],
            },
            {"role": "tool", "tool_call_id": ident, "content": "ok"},
        ]
    }
    call = GeminiDialect().build_request(
        base_url=BASE_URL, api_key="k", model=FLASH, body=body, stream=False
    )
    return call.body["contents"][1]["parts"][0]


@pytest.mark.parametrize(
    "signature",
    [
        base64.b64encode(RAW).decode(),
        base64.urlsafe_b64encode(RAW).decode(),
        base64.b64encode(b"\xfb\xff\xfe").decode(),  # "+//+"
        base64.urlsafe_b64encode(b"\xfb\xff\xfe").decode(),  # "-__-"
        base64.b64encode(b"sig").decode(),  # in both alphabets
    ],
)
def test_a_signature_of_either_alphabet_round_trips_as_it_came(signature):
    ident = call_id(0, signature, tag="r1")
    assert all(c.isalnum() or c in "_-" for c in ident)
    assert signature_of(ident) == signature
    assert _sent_back(ident)["thoughtSignature"] == signature


def test_a_signature_without_padding_comes_back_padded_with_the_same_bytes():
    for encode in (base64.b64encode, base64.urlsafe_b64encode):
        padded = encode(b"\x01\x02\xfe\xff").decode()
        assert padded.endswith("=")
        assert signature_of(call_id(0, padded.rstrip("="))) == padded


def test_a_signature_mixing_the_alphabets_is_not_base64():
    assert call_id(2, "ab+_cd==") == "call_2"


def test_the_mark_inside_a_signature_does_not_cut_it():
    """The URL-safe payload may hold ``_ts_`` or ``_tu_`` itself: the id's own mark
    is the one right after the call's number."""
    raw = base64.urlsafe_b64decode("AAA_ts_tu_AAAAAA")
    ident = call_id(0, base64.b64encode(raw).decode(), tag="ts")
    assert ident.count("_ts_") == 3
    assert base64.b64decode(signature_of(ident)) == raw


def test_ids_of_the_earlier_form_still_give_their_signature():
    earlier = "call_r1_0_ts_" + base64.urlsafe_b64encode(bytes(600)).decode().rstrip(
        "="
    )
    assert base64.b64decode(signature_of(earlier)) == bytes(600)
    assert signature_of("toolu_01_ts_AAAA") is None  # not an id of this dialect
