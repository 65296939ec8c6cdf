"""One ASGI HTTP scope for tests that drive ``omniroute_site.asgi.application``
directly (as uvicorn would), instead of five hand-written copies."""

from __future__ import annotations

from typing import Any


def http_scope(
    path: str,
    headers: list[tuple[bytes, bytes]],
    method: str = "POST",
) -> dict[str, Any]:
    return {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": method,
        "scheme": "http",
        "path": path,
        "raw_path": path.encode(),
        "query_string": b"",
        "root_path": "",
        "headers": headers,
        "client": ("127.0.0.1", 5000),
        "server": ("127.0.0.1", 8000),
    }
