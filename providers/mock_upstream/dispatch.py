"""The core: one request in, one ``Reply`` out; then playing it through a runner.

``answer()`` does no I/O and never sleeps, so both runners send the same bytes;
``play()`` is the only place that waits.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Mapping
from typing import Any, Protocol

import orjson

from providers.mock_upstream.core import (
    _SUCCESS,
    ANY_MODEL,
    CHARS_PER_TOKEN,
    MS_PER_SECOND,
    SSE_TYPE,
    Ending,
    MockBehaviour,
    MockState,
    Outcome,
    Part,
    RequestLog,
)
from providers.mock_upstream.reply import (
    Reply,
    _Call,
    _Frames,
    _headers,
    _status_message,
    _tokens_for,
    _whole,
)
from providers.mock_upstream.wire import _OPENAI, _WIRES, _Wire, tool_id_problem
from providers.mock_upstream.wire_azure import answer as azure_answer
from providers.mock_upstream.wire_azure import is_azure
from providers.mock_upstream.wire_bedrock import answer as bedrock_answer
from providers.mock_upstream.wire_bedrock import serves as is_bedrock
from providers.mock_upstream.wire_gemini import PREFIX as GEMINI_PREFIX
from providers.mock_upstream.wire_gemini import error_body as gemini_error
from providers.mock_upstream.wire_gemini import models as gemini_models
from providers.mock_upstream.wire_gemini import route as gemini_route
from providers.mock_upstream.wire_vertex import answer as vertex_answer
from providers.mock_upstream.wire_vertex import is_vertex

#: the providers' own wires with their own paths: (serves this path?, answer), one
#: line each
_PROVIDER_WIRES: tuple[tuple[Callable[[str], bool], Callable[..., Reply]], ...] = (
    (is_azure, azure_answer),
    (is_vertex, vertex_answer),
    (is_bedrock, bedrock_answer),
)


def answer(
    state: MockState, method: str, path: str, headers: dict[str, str], body: bytes
) -> Reply:
    """Decide the whole reply to one request; records it unless it is a control call."""
    route = _route(path)
    if route.startswith("/_mock/"):
        return _control(state, method, route, body)
    if route.startswith(GEMINI_PREFIX):
        return _gemini(state, method, route, path, headers, body)
    for serves, answer_wire in _PROVIDER_WIRES:
        if serves(route):
            return answer_wire(state, method, route, path, headers, body, _completion)
    wire = _WIRES.get(route)
    if wire is not None and method == "POST":
        return _completion(state, wire, path, headers, body)
    if route == "/models" and method == "GET":
        record = state.log.start(
            path=path, model=None, headers=headers, body=None, is_stream=False
        )
        return _whole(200, orjson.dumps(_models(state, headers)), record=record)
    status = 405 if wire is not None or route == "/models" else 404
    message = f"{method} {path} is not served by the mock upstream."
    return _whole(status, orjson.dumps(_OPENAI.error_body(status, message)))


def _gemini(
    state: MockState,
    method: str,
    route: str,
    path: str,
    headers: dict[str, str],
    body: bytes,
) -> Reply:
    """The Gemini API paths: the model and the method are in the path."""
    found = gemini_route(route)
    if found is not None and method == "POST":
        wire, model, is_stream = found
        return _completion(
            state, wire, path, headers, body, model=model, is_stream=is_stream
        )
    if route == GEMINI_PREFIX and method == "GET":
        record = state.log.start(
            path=path, model=None, headers=headers, body=None, is_stream=False
        )
        ids = dict.fromkeys([*state.model_ids, *state.script.model_ids()])
        return _whole(200, orjson.dumps(gemini_models(ids)), record=record)
    status = 405 if found is not None or route == GEMINI_PREFIX else 404
    message = f"{method} {path} is not served by the mock upstream."
    return _whole(status, orjson.dumps(gemini_error(status, message)))


def _route(path: str) -> str:
    route = path.partition("?")[0].rstrip("/")
    if route == "/v1" or route.startswith("/v1/"):
        route = route[3:]
    return route


def _models(state: MockState, headers: Mapping[str, str]) -> dict[str, Any]:
    ids = list(dict.fromkeys([*state.model_ids, *state.script.model_ids()]))
    if "anthropic-version" in headers:
        return {
            "data": [
                {
                    "type": "model",
                    "id": model_id,
                    "display_name": model_id,
                    "created_at": "2025-01-01T00:00:00Z",
                }
                for model_id in ids
            ],
            "has_more": False,
            "first_id": ids[0] if ids else None,
            "last_id": ids[-1] if ids else None,
        }
    return {
        "object": "list",
        "data": [
            {"id": model_id, "object": "model", "created": 0, "owned_by": "mock"}
            for model_id in ids
        ],
    }


def _parse_json(body: bytes) -> Any:
    try:
        return orjson.loads(body) if body else None
    except orjson.JSONDecodeError:
        return body.decode("utf-8", "replace")


def _completion(
    state: MockState,
    wire: _Wire,
    path: str,
    headers: dict[str, str],
    body: bytes,
    *,
    model: str | None = None,
    is_stream: bool | None = None,
) -> Reply:
    """One call; ``model`` and ``is_stream``: given by the path (Gemini), else read
    from the body."""
    payload = _parse_json(body)
    request = payload if isinstance(payload, dict) else {}
    if model is None:
        model = request.get("model")
    if is_stream is None:
        is_stream = request.get("stream") is True
    record = state.log.start(
        path=path,
        model=model if isinstance(model, str) else None,
        headers=headers,
        body=payload,
        is_stream=is_stream,
    )
    if not isinstance(model, str) or not model:
        message = "The request body must be a JSON object with a string `model`."
        return _whole(400, orjson.dumps(wire.error_body(400, message)), record=record)
    problem = tool_id_problem(request) if wire is _OPENAI else None
    if problem is not None:  # as OpenAI refuses it
        return _whole(400, orjson.dumps(wire.error_body(400, problem)), record=record)
    options = request.get("stream_options")
    call = _Call(
        model=model,
        reply_id=state.next_id(),
        created=int(time.time()),
        is_stream=is_stream,
        wants_usage=isinstance(options, dict) and options.get("include_usage") is True,
        prompt_tokens=len(orjson.dumps(_prompt(request))) // CHARS_PER_TOKEN,
        record=record,
        request=request,
    )
    return _reply_for(wire, call, state.script.pick(model))


def _prompt(request: Mapping[str, Any]) -> Any:
    """What the prompt's token count is estimated from, whatever the wire."""
    for name in ("messages", "input", "prompt", "contents", "requests"):
        if name in request:
            return request[name]
    return None


def _reply_for(wire: _Wire, call: _Call, behaviour: MockBehaviour) -> Reply:
    if behaviour.hang or behaviour.reset == "before_headers":
        reply = Reply(
            status=behaviour.status,
            headers=[],
            parts=[],
            before=Ending.HANG if behaviour.hang else Ending.RESET,
            record=call.record,
        )
    elif call.is_stream and _is_plain_success(behaviour):
        reply = _stream_reply(wire, call, behaviour)
    else:
        reply = _cut(_whole_reply(wire, call, behaviour), behaviour)
    reply.latency_seconds = behaviour.latency_ms / MS_PER_SECOND
    return reply


def _is_plain_success(behaviour: MockBehaviour) -> bool:
    return (
        behaviour.status in _SUCCESS
        and behaviour.raw_body is None
        and behaviour.body is None
    )


def _whole_reply(wire: _Wire, call: _Call, behaviour: MockBehaviour) -> Reply:
    if behaviour.raw_body is not None:
        payload = behaviour.raw_body.encode()
    elif behaviour.body is not None:
        payload = orjson.dumps(behaviour.body)
    elif behaviour.status not in _SUCCESS:
        error = behaviour.error_body
        if error is None:
            error = wire.error_body(behaviour.status, _status_message(behaviour.status))
        payload = orjson.dumps(error)
    else:
        tokens = _tokens_for(behaviour, call.model)
        payload = orjson.dumps(wire.message(call, behaviour, tokens))
    return _whole(
        behaviour.status, payload, extra=behaviour.headers, record=call.record
    )


def _cut(reply: Reply, behaviour: MockBehaviour) -> Reply:
    """Apply ``reset="mid_body"`` / ``role_then_hang`` to a Content-Length reply."""
    if behaviour.reset == "mid_body":
        payload = reply.parts[0][1]
        reply.parts = [(0.0, payload[: len(payload) // 2])]
        reply.ending = Ending.RESET
    elif behaviour.role_then_hang:
        reply.parts = []
        reply.ending = Ending.HANG
    return reply


def _stream_reply(wire: _Wire, call: _Call, behaviour: MockBehaviour) -> Reply:
    frames = wire.stream(call, behaviour, _tokens_for(behaviour, call.model))
    parts, ending, outcome = _timeline(wire, behaviour, frames)
    headers = _headers(SSE_TYPE, behaviour.headers)
    headers.append(("cache-control", "no-cache"))
    return Reply(
        status=behaviour.status,
        headers=headers,
        parts=_coalesce(parts),
        ending=ending,
        outcome=outcome,
        record=call.record,
    )


def _timeline(
    wire: _Wire, behaviour: MockBehaviour, frames: _Frames
) -> tuple[list[Part], Ending, Outcome]:
    parts: list[Part] = [(0.0, frames.head)]
    if behaviour.role_then_hang:
        return parts, Ending.HANG, Outcome.COMPLETED
    if behaviour.reset == "mid_body":
        return parts, Ending.RESET, Outcome.COMPLETED
    limit = len(frames.pieces)
    if behaviour.drop_after_tokens is not None:
        limit = min(limit, behaviour.drop_after_tokens)
    elif behaviour.stream_error is not None:
        limit = 0
    first = behaviour.ttft_ms / MS_PER_SECOND
    between = behaviour.token_delay_ms / MS_PER_SECOND
    parts += [
        (first if index == 0 else between, piece)
        for index, piece in enumerate(frames.pieces[:limit])
    ]
    if behaviour.stream_error is not None:
        parts.append((0.0, wire.stream_error(behaviour.stream_error)))
        return parts, Ending.DONE, Outcome.ERROR
    if behaviour.drop_after_tokens is not None:
        return parts, Ending.RESET, Outcome.COMPLETED
    parts.append((0.0, frames.tail))
    return parts, Ending.DONE, Outcome.COMPLETED


def _coalesce(parts: list[Part]) -> list[Part]:
    """Join each undelayed part onto the previous one: fewer writes, same bytes."""
    joined: list[Part] = []
    for delay, data in parts:
        if joined and delay <= 0:
            joined[-1] = (joined[-1][0], joined[-1][1] + data)
        else:
            joined.append((delay, data))
    return joined


def _control(state: MockState, method: str, route: str, body: bytes) -> Reply:
    if route == "/_mock/requests" and method == "GET":
        return _whole(200, orjson.dumps(state.requests()))
    if route == "/_mock/reset" and method == "POST":
        state.reset()
        return _whole(200, b'{"ok":true}')
    if route == "/_mock/behaviours" and method == "POST":
        try:
            added = _add_behaviours(state, orjson.loads(body))
        except (TypeError, ValueError) as exc:  # JSONDecodeError is a ValueError
            return _whole(400, orjson.dumps(_OPENAI.error_body(400, str(exc))))
        return _whole(200, orjson.dumps({"added": added}))
    return _whole(
        404, orjson.dumps(_OPENAI.error_body(404, f"no control route {route}"))
    )


def _add_behaviours(state: MockState, payload: Any) -> int:
    """Validate every item first, so a bad list adds nothing."""
    items = payload if isinstance(payload, list) else [payload]
    parsed: list[tuple[str, int | None, MockBehaviour]] = []
    for item in items:
        if not isinstance(item, dict):
            raise TypeError("each behaviour must be a JSON object")
        knobs = dict(item)
        model = str(knobs.pop("model", ANY_MODEL))
        times = knobs.pop("times", None)
        if times is not None and (not isinstance(times, int) or times < 1):
            raise ValueError("times must be a positive integer")
        parsed.append((model, times, MockBehaviour.from_knobs(knobs)))
    for model, times, behaviour in parsed:
        state.script.add(behaviour, model=model, times=times)
    return len(parsed)


# --- playing a Reply (shared by both runners) -----------------------------------------


class _Sink(Protocol):
    async def head(self, reply: Reply) -> None: ...

    async def part(self, data: bytes) -> None: ...

    async def finish(self) -> None: ...

    def reset(self) -> None: ...


async def play(reply: Reply, sink: _Sink, log: RequestLog) -> None:
    """Send ``reply`` through ``sink`` with its delays; record how it ended.

    A completed reply is recorded just before its last bytes are written, so a client
    that has read the whole reply always finds its outcome recorded.
    """
    try:
        if reply.latency_seconds > 0:
            await asyncio.sleep(reply.latency_seconds)
        if reply.before is None:
            await sink.head(reply)
            await _send_parts(reply, sink, log)
        ending = reply.before or reply.ending
        if ending is Ending.DONE:
            log.finish(reply.record, reply.outcome)
            await sink.finish()
        elif ending is Ending.RESET:
            log.finish(reply.record, Outcome.RESET)
            sink.reset()
        else:  # hang until the client goes away (which cancels this coroutine)
            await asyncio.get_running_loop().create_future()
    except asyncio.CancelledError:
        log.finish(reply.record, Outcome.CANCELLED)
        raise


async def _send_parts(reply: Reply, sink: _Sink, log: RequestLog) -> None:
    last = len(reply.parts) - 1
    for index, (delay, data) in enumerate(reply.parts):
        if delay > 0:
            await asyncio.sleep(delay)
        if index == last and reply.ending is Ending.DONE:
            log.finish(reply.record, reply.outcome)
        await sink.part(data)
