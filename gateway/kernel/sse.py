"""Incremental Server-Sent Events decoding and encoding.

``SSEDecoder.feed(bytes)`` accepts arbitrary network chunks and returns the complete
events they finish.  Invariants:

* lines may be split anywhere, including inside a CRLF pair or a UTF-8 sequence;
* ``\\r\\n``, ``\\n`` and ``\\r`` all end a line;
* an event is dispatched at a blank line; comment lines (``:``) are dropped;
* several ``data:`` lines of one event are joined with ``\\n`` (the SSE rule);
* ``flush()`` dispatches a final event left without its blank line (upstreams that
  close the connection right after the last ``data:`` line).
"""

from __future__ import annotations

from dataclasses import dataclass

DONE = "[DONE]"


@dataclass(frozen=True, slots=True)
class SSEEvent:
    data: str
    event: str | None = None


class SSEDecoder:
    """Turns a byte stream into ``SSEEvent`` values, chunk by chunk."""

    __slots__ = ("_buffer", "_data", "_event", "_pending_cr")

    def __init__(self) -> None:
        self._buffer = b""
        self._data: list[str] = []
        self._event: str | None = None
        self._pending_cr = False

    def feed(self, chunk: bytes) -> list[SSEEvent]:
        if not chunk:  # keeps a pending CR pending: its LF may be in the next chunk
            return []
        if self._pending_cr and chunk.startswith(b"\n"):
            chunk = chunk[1:]
        self._pending_cr = False
        buffer = self._buffer + chunk
        if b"\r" in buffer:
            self._pending_cr = buffer.endswith(b"\r")
            buffer = buffer.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
        lines = buffer.split(b"\n")
        self._buffer = lines.pop()
        events: list[SSEEvent] = []
        for raw in lines:
            event = self._line(raw.decode("utf-8", errors="replace"))
            if event is not None:
                events.append(event)
        return events

    def flush(self) -> list[SSEEvent]:
        events: list[SSEEvent] = []
        if self._buffer:
            event = self._line(self._buffer.decode("utf-8", errors="replace"))
            self._buffer = b""
            if event is not None:
                events.append(event)
        event = self._line("")
        if event is not None:
            events.append(event)
        return events

    def _line(self, line: str) -> SSEEvent | None:
        if not line:
            if not self._data and self._event is None:
                return None
            event = SSEEvent(data="\n".join(self._data), event=self._event)
            self._data = []
            self._event = None
            return event if event.data or event.event else None
        if line.startswith(":"):
            return None
        field, _, value = line.partition(":")
        if value.startswith(" "):
            value = value[1:]
        if field == "data":
            self._data.append(value)
        elif field == "event":
            self._event = value
        return None


def encode_data(payload: bytes) -> bytes:
    """One ``data:`` event around an already-serialised JSON payload."""
    return b"data: " + payload + b"\n\n"


DONE_FRAME = b"data: [DONE]\n\n"
