"""The incremental SSE decoder: any chunking, any line ending, same events."""

import itertools

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gateway.kernel.sse import DONE, DONE_FRAME, SSEDecoder, SSEEvent, encode_data


def _decode(*chunks):
    decoder = SSEDecoder()
    events = []
    for chunk in chunks:
        events.extend(decoder.feed(chunk))
    return events + decoder.flush()


def _bytewise(raw):
    return _decode(*(raw[i : i + 1] for i in range(len(raw))))


STREAM = (
    b'data: {"a":1}\n\n'
    b": keep-alive comment\n\n"
    b"event: message_start\ndata: first\ndata: second\n\n"
    b"data: [DONE]\n\n"
)
EVENTS = [
    SSEEvent(data='{"a":1}'),
    SSEEvent(data="first\nsecond", event="message_start"),
    SSEEvent(data=DONE),
]


def test_whole_stream_in_one_chunk_decodes_every_event():
    assert _decode(STREAM) == EVENTS


def test_stream_fed_byte_by_byte_decodes_the_same_events():
    assert _bytewise(STREAM) == EVENTS


@pytest.mark.parametrize("cut", range(1, len(STREAM)))
def test_stream_split_at_any_point_decodes_the_same_events(cut):
    assert _decode(STREAM[:cut], STREAM[cut:]) == EVENTS


@pytest.mark.parametrize("newline", [b"\n", b"\r\n", b"\r"])
def test_every_line_ending_ends_a_line(newline):
    raw = STREAM.replace(b"\n", newline)

    assert _decode(raw) == EVENTS
    assert _bytewise(raw) == EVENTS


def test_mixed_line_endings_in_one_stream():
    raw = b"data: a\r\ndata: b\rdata: c\n\r\ndata: d\r\r"

    assert _decode(raw) == [SSEEvent(data="a\nb\nc"), SSEEvent(data="d")]


def test_crlf_split_across_chunks_is_one_line_end():
    events = _decode(b"data: a\r", b"\ndata: b\r", b"\n\r", b"\n")

    assert events == [SSEEvent(data="a\nb")]


def test_empty_chunk_between_cr_and_lf_keeps_them_one_line_end():
    events = _decode(b"data: a\r", b"", b"\ndata: b\r\n\r\n")

    assert events == [SSEEvent(data="a\nb")]


def test_event_is_dispatched_only_at_the_blank_line():
    decoder = SSEDecoder()

    assert decoder.feed(b"data: a\n") == []
    assert decoder.feed(b"data: b\n") == []
    assert decoder.feed(b"\n") == [SSEEvent(data="a\nb")]


def test_comment_lines_are_dropped_and_comment_only_blocks_yield_nothing():
    assert _decode(b": ping\n\n:\n\ndata: x\n: inside\n\n") == [SSEEvent(data="x")]


def test_event_name_applies_to_its_own_event_only():
    raw = b"event: ping\ndata: 1\n\ndata: 2\n\n"

    assert _decode(raw) == [SSEEvent(data="1", event="ping"), SSEEvent(data="2")]


def test_only_one_space_after_the_colon_is_removed():
    raw = b"data:no-space\n\ndata:  two spaces\n\ndata\n\n"

    assert _decode(raw) == [SSEEvent(data="no-space"), SSEEvent(data=" two spaces")]


def test_unknown_fields_are_ignored():
    raw = b"id: 7\nretry: 100\nfoo: bar\ndata: x\n\n"

    assert _decode(raw) == [SSEEvent(data="x")]


def test_value_may_contain_colons():
    assert _decode(b'data: {"k": "a:b"}\n\n') == [SSEEvent(data='{"k": "a:b"}')]


def test_flush_dispatches_a_trailing_event_without_its_blank_line():
    decoder = SSEDecoder()

    assert decoder.feed(b"data: one\n\ndata: last") == [SSEEvent(data="one")]
    assert decoder.flush() == [SSEEvent(data="last")]


def test_flush_dispatches_an_event_whose_last_line_ended():
    decoder = SSEDecoder()

    decoder.feed(b"event: done\ndata: x\n")

    assert decoder.flush() == [SSEEvent(data="x", event="done")]


def test_flush_of_a_finished_stream_yields_nothing():
    decoder = SSEDecoder()
    decoder.feed(STREAM)

    assert decoder.flush() == []


def test_utf8_character_split_across_chunks_is_decoded_whole():
    raw = "data: héllo — 世界 🎉\n\n".encode()
    start = raw.index("世".encode())

    events = _decode(raw[: start + 1], raw[start + 1 : start + 2], raw[start + 2 :])

    assert events == [SSEEvent(data="héllo — 世界 🎉")]


def test_utf8_stream_fed_byte_by_byte_is_decoded_whole():
    raw = "event: ü\ndata: 🎉🎉\ndata: ß\n\n".encode()

    assert _bytewise(raw) == [SSEEvent(data="🎉🎉\nß", event="ü")]


def test_invalid_utf8_is_replaced_not_raised():
    assert _decode(b"data: \xff\n\n") == [SSEEvent(data="\ufffd")]


def test_encode_data_frames_one_event_and_done_frame_is_the_terminator():
    assert encode_data(b'{"a":1}') == b'data: {"a":1}\n\n'
    assert DONE_FRAME == b"data: [DONE]\n\n"
    assert _decode(encode_data(b'{"a":1}') + DONE_FRAME) == [
        SSEEvent(data='{"a":1}'),
        SSEEvent(data=DONE),
    ]


# --- properties ---------------------------------------------------------------------

_line_text = st.text(
    alphabet=st.characters(blacklist_categories=("Cs",), blacklist_characters="\r\n"),
    max_size=12,
)
_events = st.lists(
    st.tuples(
        st.one_of(st.none(), _line_text.filter(bool)),
        st.lists(_line_text, min_size=1, max_size=3),
        st.booleans(),
    ).filter(lambda e: e[0] is not None or "".join(e[1]) != "" or len(e[1]) > 1),
    max_size=6,
)


def _encode(events, newline):
    out = []
    for name, lines, comment in events:
        if comment:
            out.append(": comment")
        if name is not None:
            out.append(f"event: {name}")
        out.extend(f"data: {line}" for line in lines)
        out.append("")
    return "".join(line + newline for line in out).encode()


def _expected(events):
    return [SSEEvent(data="\n".join(lines), event=name) for name, lines, _ in events]


@settings(max_examples=150, deadline=None, database=None)
@given(
    events=_events,
    newline=st.sampled_from(["\n", "\r\n", "\r"]),
    cuts=st.lists(st.integers(min_value=0, max_value=400), max_size=12),
)
def test_any_chunking_of_encoded_events_decodes_to_the_same_events(
    events, newline, cuts
):
    raw = _encode(events, newline)
    # Repeated cut points produce empty chunks, which must change nothing.
    points = sorted([0, len(raw), *(min(c, len(raw)) for c in cuts)])
    chunks = [raw[a:b] for a, b in itertools.pairwise(points)]

    assert _decode(*chunks) == _expected(events)


@settings(max_examples=50, deadline=None, database=None)
@given(events=_events, newline=st.sampled_from(["\n", "\r\n", "\r"]))
def test_byte_by_byte_feeding_decodes_to_the_same_events(events, newline):
    assert _bytewise(_encode(events, newline)) == _expected(events)
