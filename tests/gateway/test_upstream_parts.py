"""A call of several ``parts`` (Bedrock's Titan: one invoke per input, spec 09 §5.2
amended) sent by ``upstream.call_json`` over an in-memory transport: the parts go at
most ``PARTS_AT_ONCE`` at a time, their vectors come back in input order with the
usage summed, and one failed part fails the whole call with its own classified error,
never a partial list."""

from __future__ import annotations

import asyncio
from types import MappingProxyType

import httpx
import orjson

from gateway.dialects import REGISTRY
from gateway.kernel.types import Auth
from gateway.pipeline import upstream

BASE_URL = "https://bedrock-runtime.us-east-1.amazonaws.com"
TITAN = "amazon.titan-embed-text-v2:0"
AUTH = Auth(
    kind="bedrock",
    secrets=MappingProxyType(
        {
            "aws_access_key_id": "AKIAMOCKBEDROCK00001",
            "aws_secret_access_key": "mock/bedrock+secret/key/0000000000000000",
        }
    ),
    settings=MappingProxyType({"region": "us-east-1"}),
)
dialect = REGISTRY["bedrock"]


def _call(texts: list[str]):
    return dialect.embeddings_request(
        base_url=BASE_URL, api_key=None, model=TITAN, body={"input": texts}, auth=AUTH
    )


class Titan:
    """Answers each invoke as Titan does, one ``inputText`` at a time; counts how
    many requests are in flight at once; refuses the texts in ``throttled``."""

    def __init__(self, throttled: frozenset[str] = frozenset()) -> None:
        self.throttled = throttled
        self.in_flight = 0
        self.most = 0
        self.seen: list[str] = []

    async def __call__(self, request: httpx.Request) -> httpx.Response:
        assert request.headers["authorization"].startswith("AWS4-HMAC-SHA256 ")
        text = orjson.loads(request.content)["inputText"]
        assert isinstance(text, str)
        self.seen.append(text)
        self.in_flight += 1
        self.most = max(self.most, self.in_flight)
        for _ in range(5):  # let the other parts start
            await asyncio.sleep(0)
        self.in_flight -= 1
        if text in self.throttled:
            return httpx.Response(
                429,
                headers={"x-amzn-errortype": "ThrottlingException"},
                json={"message": "Too many requests"},
            )
        return httpx.Response(
            200,
            json={"embedding": [float(len(text))], "inputTextTokenCount": len(text)},
        )


async def _send(call, titan: Titan) -> upstream.AttemptResult:
    async with httpx.AsyncClient(transport=httpx.MockTransport(titan)) as client:
        return await upstream.call_json(client, dialect, call, timeout_s=30, created=0)


async def test_the_parts_come_back_in_input_order_with_the_usage_summed():
    texts = ["a" * n for n in range(1, 21)]
    titan = Titan()
    result = await _send(_call(texts), titan)
    assert result.failure is None
    assert result.http_status == 200
    assert result.completion is not None
    assert [item["index"] for item in result.completion["data"]] == list(range(20))
    assert [item["embedding"] for item in result.completion["data"]] == [
        [float(n)] for n in range(1, 21)
    ]
    assert result.usage == {"prompt_tokens": 210, "total_tokens": 210}
    assert sorted(titan.seen) == sorted(texts)  # one call per input
    assert 1 < titan.most <= upstream.PARTS_AT_ONCE


async def test_one_failed_part_fails_the_call_with_its_classified_error():
    titan = Titan(throttled=frozenset({"b"}))
    result = await _send(_call(["a", "b", "c"]), titan)
    assert result.completion is None
    assert result.usage is None
    assert result.http_status == 429
    assert result.failure is not None
    assert result.failure.reason.value == "rate_limit"
    assert result.error is not None
    assert result.error.code == "ThrottlingException"


async def test_a_part_that_never_answers_times_the_call_out():
    """The parts share the attempt's timeout: one that hangs fails the call as a
    timeout, with no list."""

    async def hang_on_b(request: httpx.Request) -> httpx.Response:
        if orjson.loads(request.content)["inputText"] == "b":
            await asyncio.Event().wait()
        return httpx.Response(200, json={"embedding": [1.0]})

    async with httpx.AsyncClient(transport=httpx.MockTransport(hang_on_b)) as client:
        result = await upstream.call_json(
            client, dialect, _call(["a", "b"]), timeout_s=0.05, created=0
        )
    assert result.completion is None
    assert result.failure is not None
    assert result.failure.reason.value == "timeout"
