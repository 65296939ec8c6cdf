"""The mock's OpenAI Responses wire (``/responses``): ``response`` objects and typed
events with a ``sequence_number``, as a ``wire: responses`` upstream answers.

A request with ``reasoning`` gets a reasoning item first (with
``encrypted_content`` when ``include`` asks for it), so a passthrough can be seen to
carry it; scripted ``tool_calls`` come back as ``function_call`` items.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import orjson

from providers.mock_upstream.core import MockBehaviour
from providers.mock_upstream.reply import _arguments_text, _Call, _error_kind, _Frames


def _event(name: str, data: dict[str, Any]) -> bytes:
    return b"event: " + name.encode() + b"\ndata: " + orjson.dumps(data) + b"\n\n"


def _usage(call: _Call, output: int, reasoning: int) -> dict[str, Any]:
    return {
        "input_tokens": call.prompt_tokens,
        "input_tokens_details": {"cached_tokens": 0},
        "output_tokens": output + reasoning,
        "output_tokens_details": {"reasoning_tokens": reasoning},
        "total_tokens": call.prompt_tokens + output + reasoning,
    }


def _reasoning_item(call: _Call) -> dict[str, Any] | None:
    if not isinstance(call.request.get("reasoning"), dict):
        return None
    item: dict[str, Any] = {
        "type": "reasoning",
        "id": f"rs_mock_{call.reply_id}",
        "summary": [{"type": "summary_text", "text": "Thinking."}],
    }
    include = call.request.get("include")
    if isinstance(include, list) and "reasoning.encrypted_content" in include:
        item["encrypted_content"] = f"enc-mock-{call.reply_id}"
    return item


def _call_item(call: _Call, index: int, tool: Mapping[str, Any]) -> dict[str, Any]:
    return {
        "type": "function_call",
        "id": f"fc_mock_{call.reply_id}_{index}",
        "call_id": f"call_mock_{index}",
        "name": str(tool.get("name", "")),
        "arguments": _arguments_text(tool.get("arguments", {})),
        "status": "completed",
    }


def _message_item(call: _Call, text: str, status: str) -> dict[str, Any]:
    return {
        "type": "message",
        "id": f"msg_mock_{call.reply_id}",
        "role": "assistant",
        "status": status,
        "content": [{"type": "output_text", "text": text, "annotations": []}],
    }


class _ResponsesWire:
    """OpenAI Responses: ``response`` objects and named, numbered SSE events."""

    def error_body(self, status: int, message: str) -> dict[str, Any]:
        kind, code = _error_kind(status)
        return {
            "error": {"message": message, "type": kind, "param": None, "code": code}
        }

    def _response(
        self, call: _Call, status: str, output: list[dict[str, Any]]
    ) -> dict[str, Any]:
        return {
            "id": f"resp_mock_{call.reply_id}",
            "object": "response",
            "created_at": call.created,
            "status": status,
            "model": call.model,
            "output": output,
            "store": call.request.get("store", True),
            "error": None,
            "incomplete_details": None,
        }

    def _output(
        self, call: _Call, behaviour: MockBehaviour, tokens: Sequence[str]
    ) -> tuple[list[dict[str, Any]], int]:
        output: list[dict[str, Any]] = []
        reasoning = _reasoning_item(call)
        if reasoning is not None:
            output.append(reasoning)
        if behaviour.tool_calls:
            output += [
                _call_item(call, index, tool)
                for index, tool in enumerate(behaviour.tool_calls)
            ]
            return output, len(behaviour.tool_calls)
        output.append(_message_item(call, "".join(tokens), "completed"))
        return output, len(tokens)

    def message(
        self, call: _Call, behaviour: MockBehaviour, tokens: Sequence[str]
    ) -> dict[str, Any]:
        output, count = self._output(call, behaviour, tokens)
        reply = self._response(call, "completed", output)
        if behaviour.usage:
            reasoning = 1 if output and output[0]["type"] == "reasoning" else 0
            reply["usage"] = _usage(call, count, reasoning)
        return reply

    def stream(
        self, call: _Call, behaviour: MockBehaviour, tokens: Sequence[str]
    ) -> _Frames:
        seq = iter(range(1_000_000))

        def event(name: str, **data: Any) -> bytes:
            return _event(name, {"type": name, **data, "sequence_number": next(seq)})

        final, count = self._output(call, behaviour, tokens)
        start = self._response(call, "in_progress", [])
        head = event("response.created", response=start)
        head += event("response.in_progress", response=start)
        position = 0
        reasoning = _reasoning_item(call)
        if reasoning is not None:
            head += event("response.output_item.added", output_index=0, item=reasoning)
            head += event("response.output_item.done", output_index=0, item=reasoning)
            position = 1
        pieces: list[bytes] = []
        tail = b""
        if behaviour.tool_calls:
            for index, tool in enumerate(behaviour.tool_calls):
                item = _call_item(call, index, tool)
                at = position + index
                piece = event(
                    "response.output_item.added",
                    output_index=at,
                    item={**item, "arguments": "", "status": "in_progress"},
                )
                if item["arguments"] != "{}":
                    piece += event(
                        "response.function_call_arguments.delta",
                        item_id=item["id"],
                        output_index=at,
                        delta=item["arguments"],
                    )
                piece += event(
                    "response.function_call_arguments.done",
                    item_id=item["id"],
                    output_index=at,
                    arguments=item["arguments"],
                )
                piece += event("response.output_item.done", output_index=at, item=item)
                pieces.append(piece)
        else:
            item_id = f"msg_mock_{call.reply_id}"
            where = {"item_id": item_id, "output_index": position, "content_index": 0}
            head += event(
                "response.output_item.added",
                output_index=position,
                item={**_message_item(call, "", "in_progress"), "content": []},
            )
            head += event(
                "response.content_part.added",
                **where,
                part={"type": "output_text", "text": "", "annotations": []},
            )
            pieces = [
                event("response.output_text.delta", **where, delta=token)
                for token in tokens
            ]
            text = "".join(tokens)
            tail += event("response.output_text.done", **where, text=text)
            tail += event(
                "response.content_part.done",
                **where,
                part={"type": "output_text", "text": text, "annotations": []},
            )
            tail += event(
                "response.output_item.done",
                output_index=position,
                item=_message_item(call, text, "completed"),
            )
        done = self._response(call, "completed", final)
        if behaviour.usage:
            done["usage"] = _usage(call, count, 1 if reasoning is not None else 0)
        tail += event("response.completed", response=done)
        return _Frames(head, pieces, tail)

    def stream_error(self, error: Mapping[str, Any]) -> bytes:
        return _event(
            "error",
            {
                "type": "error",
                "code": error.get("code") or error.get("type"),
                "message": error.get("message", ""),
                "param": None,
            },
        )


RESPONSES = _ResponsesWire()
