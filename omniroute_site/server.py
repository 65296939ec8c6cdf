"""The HTTP/1.1 protocol the gateway's uvicorn runs (``--http
omniroute_site.server:GuardedHttpToolsProtocol``): uvicorn's httptools protocol with
the two limits only the server can enforce, because they bite before the
application sees a request (issue #16):

* **Header bytes**: the request line and headers together may not exceed
  ``OMNIROUTE_MAX_HEADER_BYTES`` (64 KiB); they are counted as they arrive, so a
  50 MB header is refused with a 431 after 64 KiB, not held in memory first.
* **Header time**: a connection (or a request on a kept-alive one) must deliver its
  last header byte within ``OMNIROUTE_HEADER_TIMEOUT_S`` (10 s) of its first: a
  slowloris connection gets a 408 and is closed.

The application (``omniroute_site.asgi``) checks the same header limit again for any
other server, and bounds the body (size, 413; silence, 408) on every path.
"""

from __future__ import annotations

import asyncio
import os
from typing import Any

import orjson
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

_STATUS = {408: b"Request Timeout", 431: b"Request Header Fields Too Large"}


def _setting(name: str, default: int) -> int:
    """A limit from the settings (the environment before Django is set up)."""
    try:
        from django.conf import settings

        return int(getattr(settings, name))
    except Exception:  # noqa: BLE001 - settings not configured yet
        value = os.environ.get(name, "")
        return int(value) if value.isdigit() else default


class GuardedHttpToolsProtocol(HttpToolsProtocol):
    """uvicorn's httptools protocol with a header byte cap and a header timeout."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._max_header_bytes = _setting("OMNIROUTE_MAX_HEADER_BYTES", 64 * 1024)
        self._header_timeout_s = _setting("OMNIROUTE_HEADER_TIMEOUT_S", 10)
        #: reading a request line and headers (not a body)
        self._in_headers = True
        self._header_bytes = 0
        #: the last bytes seen while in headers, to find a "\r\n\r\n" across reads
        self._tail = b""
        self._header_timer: asyncio.TimerHandle | None = None

    # --- timers ------------------------------------------------------------------

    def _arm_header_timer(self) -> None:
        self._cancel_header_timer()
        self._header_timer = self.loop.call_later(
            self._header_timeout_s, self._header_timed_out
        )

    def _cancel_header_timer(self) -> None:
        if self._header_timer is not None:
            self._header_timer.cancel()
            self._header_timer = None

    def _header_timed_out(self) -> None:
        self._header_timer = None
        if self._in_headers and not self.transport.is_closing():
            self._reject(408, "request_timeout", "The request headers took too long")

    # --- the protocol --------------------------------------------------------------

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._arm_header_timer()

    def connection_lost(self, exc: Exception | None) -> None:
        self._cancel_header_timer()
        super().connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        if self._in_headers:
            seen = self._tail + data
            end = seen.find(b"\r\n\r\n")
            counted = len(data) if end == -1 else max(0, end + 4 - len(self._tail))
            self._header_bytes += counted
            if self._header_bytes > self._max_header_bytes:
                self._reject(
                    431,
                    "request_header_fields_too_large",
                    f"Request headers exceed {self._max_header_bytes} bytes",
                )
                return
            self._tail = seen[-3:]
        super().data_received(data)

    def on_message_begin(self) -> None:
        super().on_message_begin()
        if self._header_timer is None:  # a new request on a kept-alive connection
            self._arm_header_timer()

    def on_headers_complete(self) -> None:
        self._in_headers = False
        self._header_bytes = 0
        self._tail = b""
        self._cancel_header_timer()
        super().on_headers_complete()

    def on_message_complete(self) -> None:
        super().on_message_complete()
        self._in_headers = True  # the next request's headers, if any

    # --- refusing ------------------------------------------------------------------

    def _reject(self, status: int, code: str, message: str) -> None:
        """Answer ``status`` in the OpenAI envelope and close the connection; a
        response already under way is cut instead."""
        self._cancel_header_timer()
        if self.cycle is not None and not self.cycle.response_complete:
            self.transport.close()
            return
        body = orjson.dumps(
            {
                "error": {
                    "message": message,
                    "type": "invalid_request_error",
                    "param": None,
                    "code": code,
                }
            }
        )
        head = b"HTTP/1.1 %d %s\r\n" % (status, _STATUS[status])
        headers = (
            b"content-type: application/json\r\n"
            b"content-length: %d\r\n"
            b"connection: close\r\n\r\n" % len(body)
        )
        self.transport.write(head + headers + body)
        self.transport.close()
