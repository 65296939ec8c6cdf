"""The stream idle bound runs between upstream bytes (spec 02 §4): keep-alive SSE
comments and Anthropic-style pings keep a slow stream alive; silence ends it."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import httpx
import orjson

from gateway.dialects import REGISTRY, UpstreamCall
from gateway.pipeline.upstream import OpenStream, open_stream

IDLE_S = 0.6  # generous: a loaded CI box may oversleep a 0.1 s pause


def _chunk(text: str) -> bytes:
    body = {
        "id": "c1",
        "object": "chat.completion.chunk",
        "created": 1,
        "model": "m1",
        "choices": [{"index": 0, "delta": {"content": text}, "finish_reason": None}],
    }
    return b"data: " + orjson.dumps(body) + b"\n\n"


async def _serve(parts: list[bytes | float]) -> tuple[asyncio.Server, str]:
    """A bare HTTP/1.1 server answering every request with the SSE ``parts``
    (bytes are written, floats are pauses in seconds), chunked."""

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter):
        head = await reader.readuntil(b"\r\n\r\n")
        length = next(
            (
                int(line.split(b":", 1)[1])
                for line in head.split(b"\r\n")
                if line.lower().startswith(b"content-length:")
            ),
            0,
        )
        await reader.readexactly(length)
        writer.write(
            b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n"
            b"transfer-encoding: chunked\r\nconnection: close\r\n\r\n"
        )
        for part in parts:
            if isinstance(part, float):
                await asyncio.sleep(part)
                continue
            writer.write(b"%x\r\n%s\r\n" % (len(part), part))
            await writer.drain()
        writer.write(b"0\r\n\r\n")
        await writer.drain()
        writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    return server, f"http://127.0.0.1:{port}/v1/chat/completions"


async def _texts(parts: list[bytes | float]) -> tuple[list[str], OpenStream]:
    server, url = await _serve(parts)
    async with server, httpx.AsyncClient() as client:
        stream = await open_stream(
            client,
            REGISTRY["openai"],
            UpstreamCall(url=url, headers={}, body={"stream": True}),
            timeout_s=10,
            first_token_s=None,
            idle_timeout_s=IDLE_S,
            created=1,
        )
        assert isinstance(stream, OpenStream)
        texts = [
            c["choices"][0]["delta"].get("content", "") async for c in _chunks(stream)
        ]
        await stream.aclose()
        return texts, stream


async def _chunks(stream: OpenStream) -> AsyncIterator[dict]:
    async for batch in stream.batches():
        for chunk in batch:
            yield chunk


async def test_keep_alive_comments_keep_a_slow_stream_going():
    ping = b": keep-alive\n\n"
    parts: list[bytes | float] = [_chunk("a")]
    parts += [0.1, ping] * 12  # 1.2 s without a token, never 0.6 s without a byte
    parts += [_chunk("b"), b"data: [DONE]\n\n"]

    texts, stream = await _texts(parts)

    assert texts == ["a", "b"]
    assert stream.interrupted is None


async def test_silence_longer_than_the_idle_bound_interrupts_the_stream():
    texts, stream = await _texts([_chunk("a"), 1.5, _chunk("b")])

    assert texts == ["a"]
    assert stream.interrupted is not None
    assert stream.interrupted_error == "idle"
