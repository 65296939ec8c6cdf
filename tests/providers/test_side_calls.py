"""Side calls (the Nadir router, spec 04 §8) go through ``providers.http.post_json``:
one JSON POST on the outbound client contract, against a real loopback server."""

from __future__ import annotations

import json
from collections.abc import Iterator

import httpx
import pytest

from providers.http import post_json, user_agent
from providers.mock_upstream import RunningMock, start_in_thread


@pytest.fixture
def mock() -> Iterator[RunningMock]:
    with start_in_thread() as running:
        yield running


async def test_a_side_call_posts_json_and_reads_the_whole_reply(mock: RunningMock):
    body = {"model": "m1", "messages": [{"role": "user", "content": "hi"}]}

    status, data = await post_json(
        f"{mock.url}/chat/completions", body, {"x-extra": "1"}, timeout_s=5
    )

    assert status == 200
    assert json.loads(data)["choices"][0]["message"]["role"] == "assistant"
    [seen] = mock.requests()
    assert seen["body"] == body
    assert seen["headers"]["content-type"] == "application/json"
    assert seen["headers"]["x-extra"] == "1"
    assert seen["headers"]["user-agent"] == user_agent()


async def test_a_side_call_to_nothing_raises_a_transport_error():
    with pytest.raises(httpx.ConnectError):
        await post_json("http://127.0.0.1:9/x", {}, {}, timeout_s=2)
