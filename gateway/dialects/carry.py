"""What a translated dialect cannot carry of a canonical chat body (spec 09 §2.6).

Each translated dialect declares a ``Carry``: the canonical top-level fields its
upstream has no counterpart for, the content parts and tool types it sends, and how
many stop sequences it takes.  ``Carry(body)`` names what the translation would
leave out of ``body``, so the attempt drops it by name (``X-OmniRoute-Dropped``, the
attempt's log row) or, under ``X-OmniRoute-Strict: true``, refuses it before any
call.  The dialect's own translation stays what actually leaves things out: a
``Carry`` only says so, and its unit tests hold the two together.

A field is named only when the client set it to a value that asks for something:
``n: 1``, ``logprobs: false``, ``response_format: {"type": "text"}``, a zero penalty
or an empty ``logit_bias`` ask for what every upstream does anyway.  Fields that
change nothing in the answer (``user``, ``metadata``, ``store``, ``service_tier``,
``prompt_cache_key``, ``safety_identifier``, ``prediction``) are never named.

Paths are canonical (``response_format``, ``messages[2].content[1]``, ``tools[3]``,
``stop[5]``); ``ChatRequest.client_path`` renames a top-level field a client wire
spells otherwise (``text.format`` on Responses).

The check runs per attempt on the hot path: one dict lookup per declared field, a
pass over the messages whose content is a list of parts and over the tools; no path
is built when nothing is left out (the answer is then the empty tuple).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

from gateway.dialects.base import JSON

#: a field's test: True when the (non-null) value asks the upstream for something
Asked = Callable[[Any], bool]
#: a content part's test: True when the translation sends it (``text_only``: the
#: part of a system, developer or tool message, which every translation sends as
#: text)
Sent = Callable[[JSON, bool], bool]

_TEXT_ONLY_ROLES = frozenset({"system", "developer", "tool"})
_ROLES = frozenset({"system", "developer", "user", "assistant", "tool"})
#: the part types every translated dialect sends as text
TEXT_PARTS = frozenset({"text", "refusal"})
_FUNCTION = frozenset({"function"})


def any_value(value: Any) -> bool:
    """Any value set asks for something (``seed: 0`` is a seed)."""
    return True


def above_one(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value > 1


def above_zero(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value > 0


def nonzero(value: Any) -> bool:
    return not isinstance(value, int | float) or isinstance(value, bool) or value != 0


def is_true(value: Any) -> bool:
    return value is True


def is_false(value: Any) -> bool:
    return value is False


def nonempty(value: Any) -> bool:
    return bool(value)


def not_text_format(value: Any) -> bool:
    """A ``response_format`` other than plain text."""
    return not isinstance(value, dict) or value.get("type") not in (None, "text")


def not_text_only(value: Any) -> bool:
    """``modalities`` asking for more than text (audio)."""
    return not isinstance(value, list) or any(m != "text" for m in value)


def not_medium(value: Any) -> bool:
    """A ``verbosity`` other than OpenAI's default."""
    return bool(value != "medium")


def not_none_effort(value: Any) -> bool:
    """A ``reasoning_effort`` that asks for reasoning."""
    return bool(value != "none")


def is_none_choice(value: Any) -> bool:
    """``tool_choice: "none"``."""
    return bool(value == "none")


#: what no translated dialect of this gateway can express: logprobs (the replies
#: are not mapped back), token biases, legacy ``functions``, OpenAI's built-in web
#: search, audio output, GPT's verbosity
OPENAI_ONLY: Mapping[str, Asked] = MappingProxyType(
    {
        "logprobs": is_true,
        "top_logprobs": above_zero,
        "logit_bias": nonempty,
        "functions": nonempty,
        "web_search_options": any_value,
        "audio": any_value,
        "modalities": not_text_only,
        "verbosity": not_medium,
    }
)
#: sampling fields Gemini takes and Anthropic's and Bedrock's wires do not
SAMPLING_EXTRAS: Mapping[str, Asked] = MappingProxyType(
    {
        "n": above_one,
        "seed": any_value,
        "presence_penalty": nonzero,
        "frequency_penalty": nonzero,
    }
)


@dataclass(frozen=True, slots=True)
class Carry:
    """What one translation carries, declared by its dialect (module doc)."""

    #: canonical top-level field -> the test of a value the upstream cannot express
    fields: Mapping[str, Asked]
    #: whether a content part (a dict in a list ``content``) is sent
    part: Sent
    #: the tool types sent (a tool of another type is left out)
    tools: frozenset[str] = _FUNCTION
    #: the most stop sequences taken (None: every one)
    max_stops: int | None = None

    def __call__(self, body: JSON) -> tuple[str, ...]:
        """The canonical paths of ``body`` this translation leaves out: fields,
        stop sequences, message parts (and messages of an unknown role), tools."""
        left: tuple[str, ...] = ()
        for name, asked in self.fields.items():
            value = body.get(name)
            if value is not None and asked(value):
                left += (name,)
        if self.max_stops is not None:
            stop = body.get("stop")
            if isinstance(stop, list) and len(stop) > self.max_stops:
                left += tuple(f"stop[{i}]" for i in range(self.max_stops, len(stop)))
        messages = body.get("messages")
        if isinstance(messages, list):
            left += self._messages(messages)
        tools = body.get("tools")
        if isinstance(tools, list) and tools:
            left += self._tools(tools)
        return left

    def _messages(self, messages: list[Any]) -> tuple[str, ...]:
        left: tuple[str, ...] = ()
        part = self.part
        for i, message in enumerate(messages):
            if not isinstance(message, dict):
                continue
            role = message.get("role")
            if role not in _ROLES:
                left += (f"messages[{i}]",)
                continue
            content = message.get("content")
            if not isinstance(content, list):
                continue
            text_only = role in _TEXT_ONLY_ROLES
            for j, item in enumerate(content):
                if isinstance(item, dict) and not part(item, text_only):
                    left += (f"messages[{i}].content[{j}]",)
        return left

    def _tools(self, tools: list[Any]) -> tuple[str, ...]:
        left: tuple[str, ...] = ()
        for i, tool in enumerate(tools):
            if (
                isinstance(tool, dict)
                and tool.get("type", "function") not in self.tools
            ):
                left += (f"tools[{i}]",)
        return left


def text_or(kinds: frozenset[str]) -> Sent:
    """A part test: text everywhere, and parts of ``kinds`` in user and assistant
    messages."""

    def sent(part: JSON, text_only: bool) -> bool:
        kind = part.get("type")
        return kind in TEXT_PARTS or (not text_only and kind in kinds)

    return sent
