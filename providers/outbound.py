"""The outbound HTTP client contract: what every caller of an upstream is typed to.

``providers.http`` builds and hands them out; nobody else constructs a client.

The contract is the part of httpx's surface the gateway uses: ``stream()`` opens one
request and yields the response at its headers; the body is read whole (``aread()``)
or as it arrives (``aiter_raw()`` never decoded, ``aiter_bytes()`` decoded); leaving
the context before the end closes the connection.  Redirects are never followed.

Three clients implement it: the lean HTTP/1.1 ``UpstreamClient`` (the request path;
``RoutedClient`` is it as one provider's outbound values route it),
``httpx.AsyncClient`` for the in-process ``mock`` kind (mounted on its ASGI app) and
for the side calls, scheduled-job fetches and webhook deliveries (``job_client``).
All of them follow the one outbound policy (``providers.outbound_policy``, spec 10
§4): the same proxy choice, the same trust store, ``User-Agent: omniroute/<version>``
and a provider's fixed headers unless the call's headers set them.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterable, Mapping
from contextlib import AbstractAsyncContextManager
from typing import Protocol


class ResponseHeaders(Protocol):
    """Case-insensitive response headers, and the raw pairs as received."""

    @property
    def raw(self) -> Iterable[tuple[bytes, bytes]]: ...

    def get(self, key: str, /) -> str | None: ...


class Response(Protocol):
    @property
    def status_code(self) -> int: ...

    @property
    def headers(self) -> ResponseHeaders: ...

    async def aread(self) -> bytes: ...

    def aiter_raw(self) -> AsyncIterator[bytes]: ...

    def aiter_bytes(self) -> AsyncIterator[bytes]:
        """The body as it arrives, decoded from a ``Content-Encoding`` the client
        asked for (the lean client asks for none: the same bytes as ``aiter_raw``)."""
        ...


class HTTPClient(Protocol):
    @property
    def is_closed(self) -> bool: ...

    def stream(
        self,
        method: str,
        url: str,
        *,
        content: bytes = ...,
        headers: Mapping[str, str] | None = ...,
    ) -> AbstractAsyncContextManager[Response]: ...

    async def aclose(self) -> None: ...
