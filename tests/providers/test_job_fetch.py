"""A job's HTTP source (spec 06 §3.1): https-only redirects, a capped payload, and
connection errors, 429 and 5xx retried after 1, 2 and 4 s.  No network: every
request goes to an ``httpx.MockTransport``."""

from __future__ import annotations

from collections.abc import Callable
from importlib import metadata

import httpx
import pytest

from providers import http, jobs

URL = "https://models.test/api.json"


def fetch(
    handler: Callable[[httpx.Request], httpx.Response], **kwargs
) -> tuple[bytes, list[float]]:
    sleeps: list[float] = []
    body = http.sync_fetch(
        URL,
        max_bytes=kwargs.pop("max_bytes", 1000),
        sleep=sleeps.append,
        transport=httpx.MockTransport(handler),
        **kwargs,
    )
    return body, sleeps


def fetch_error(
    handler: Callable[[httpx.Request], httpx.Response], **kwargs
) -> tuple[str, list[float]]:
    sleeps: list[float] = []
    with pytest.raises(http.FetchError) as caught:
        http.sync_fetch(
            URL,
            max_bytes=kwargs.pop("max_bytes", 1000),
            sleep=sleeps.append,
            transport=httpx.MockTransport(handler),
            **kwargs,
        )
    return str(caught.value), sleeps


def test_a_good_answer_returns_the_body_and_sends_the_user_agent() -> None:
    seen: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(200, content=b'{"a": 1}')

    body, sleeps = fetch(handler)

    assert body == b'{"a": 1}'
    assert sleeps == []
    assert seen[0].method == "GET"
    version = metadata.version("omniroute")
    assert seen[0].headers["user-agent"] == f"omniroute/{version}"  # spec 10 §4


def test_connection_errors_are_retried_three_times_after_1_2_and_4_seconds() -> None:
    calls: list[int] = []

    def handler(request: httpx.Request) -> httpx.Response:
        calls.append(1)
        raise httpx.ConnectError("connection refused", request=request)

    message, sleeps = fetch_error(handler)

    assert len(calls) == 4
    assert sleeps == [1.0, 2.0, 4.0]
    assert "ConnectError" in message


@pytest.mark.parametrize("status", [429, 500, 502, 503])
def test_429_and_5xx_are_retried_until_an_answer_comes(status: int) -> None:
    statuses = iter([status, status, 200])

    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(next(statuses), content=b"ok")

    body, sleeps = fetch(handler)

    assert body == b"ok"
    assert sleeps == [1.0, 2.0]


def test_a_server_error_that_persists_fails_after_the_retries() -> None:
    message, sleeps = fetch_error(lambda request: httpx.Response(503))

    assert sleeps == [1.0, 2.0, 4.0]
    assert message == f"GET {URL}: HTTP 503"


def test_a_client_error_is_not_retried() -> None:
    calls: list[int] = []

    def handler(request: httpx.Request) -> httpx.Response:
        calls.append(1)
        return httpx.Response(404)

    message, sleeps = fetch_error(handler)

    assert (calls, sleeps) == ([1], [])
    assert message == f"GET {URL}: HTTP 404"


def test_a_redirect_to_https_is_followed() -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        if request.url.host == "models.test":
            return httpx.Response(302, headers={"location": "https://cdn.test/a.json"})
        return httpx.Response(200, content=b"moved")

    body, _ = fetch(handler)

    assert body == b"moved"


def test_a_redirect_to_plain_http_is_refused_without_following_it() -> None:
    hosts: list[str] = []

    def handler(request: httpx.Request) -> httpx.Response:
        hosts.append(request.url.host)
        return httpx.Response(301, headers={"location": "http://cdn.test/a.json"})

    message, sleeps = fetch_error(handler)

    assert hosts == ["models.test"]
    assert sleeps == []
    assert "redirect to http:// refused" in message


def test_a_redirect_loop_stops() -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(302, headers={"location": URL})

    message, _ = fetch_error(handler)

    assert "more than 5 redirects" in message


def test_an_announced_payload_over_the_cap_fails() -> None:
    message, sleeps = fetch_error(
        lambda request: httpx.Response(200, content=b"x" * 101), max_bytes=100
    )

    assert message == f"GET {URL}: payload of 101 bytes exceeds 100"
    assert sleeps == []


def test_a_streamed_payload_over_the_cap_fails_without_reading_on() -> None:
    chunks_read: list[int] = []

    async def body():  # the job client is async: so is the body it streams
        for _ in range(10):
            chunks_read.append(1)
            yield b"x" * 60

    message, _ = fetch_error(
        lambda request: httpx.Response(200, content=body()), max_bytes=100
    )

    assert message == f"GET {URL}: payload exceeds 100 bytes"
    assert len(chunks_read) == 2


def test_a_payload_at_the_cap_is_accepted() -> None:
    body, _ = fetch(
        lambda request: httpx.Response(200, content=b"x" * 100), max_bytes=100
    )

    assert len(body) == 100


def test_jobs_fetch_uses_the_real_client_factory_with_the_spec_defaults(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    seen: dict[str, object] = {}
    original = http.job_client

    def client(*, timeout_s: float = 30.0, transport=None) -> http.HTTPClient:
        seen["timeout_s"] = timeout_s
        return original(
            timeout_s=timeout_s,
            transport=httpx.MockTransport(lambda r: httpx.Response(200, content=b"{}")),
        )

    monkeypatch.setattr(http, "job_client", client)

    assert jobs.fetch(URL) == b"{}"
    assert seen == {"timeout_s": 30.0}
    assert jobs.FETCH_MAX_BYTES == 50 * 1024 * 1024
