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
``stop[5]``); ``ChatRequest.client_path`` gives the client's own name where its wire
spells a field otherwise (``text.format`` on Responses) or sent a media part
elsewhere (a Messages block).

The check runs per attempt on the hot path: one dict lookup per top-level field of
the body, and a test per element ``odd_elements`` found (content parts other than
text, messages of an unknown role, tools other than functions), which the pipeline
reads once per request; a text-only request with function tools has none, and no
path is built when nothing is left out (the answer is then the empty tuple).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, NamedTuple

from gateway.dialects.base import JSON

#: a field's test: True when the (non-null) value asks the upstream for something
Asked = Callable[[Any], bool]
#: an embeddings request's test (spec 09 §2.6 on the embeddings surface): the
#: paths of an OpenAI embeddings body a dialect's request for a model (the upstream
#: id: one dialect serves models of different bodies, Bedrock's Titan and Cohere)
#: leaves out, named only where the value asks for something the model will not do
EmbeddingsCarry = Callable[[str, JSON], tuple[str, ...]]
#: a content part's test (a part other than text): True when the translation sends
#: it (``text_only``: the part of a system, developer or tool message, which every
#: translation sends as text)
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


class Odd(NamedTuple):
    """One element of a body that some translation may not send: a content part
    other than text, a message of an unknown role, a tool other than a function."""

    path: str
    #: the part (None: a message of an unknown role, or a tool)
    part: JSON | None = None
    #: the part is in a system, developer or tool message
    text_only: bool = False
    #: the tool's type (None: not a tool)
    tool: str | None = None
    #: a history tool call's ``arguments`` that are no JSON object
    arguments: bool = False


def arguments_object(arguments: Any) -> JSON:
    """A tool call's ``arguments`` as the JSON object a dialect whose tool input is
    an object sends (Anthropic, Gemini, Bedrock): ``{}`` for what is no object,
    which ``odd_elements`` names."""
    if isinstance(arguments, dict):
        return dict(arguments)
    try:
        parsed = json.loads(arguments) if isinstance(arguments, str) else None
    except ValueError:
        return {}
    return parsed if isinstance(parsed, dict) else {}


def _no_object(arguments: Any) -> bool:
    """Tool-call ``arguments`` a translation to a JSON-object field cannot carry: a
    non-empty string that is no JSON object (a model's truncated call)."""
    if not isinstance(arguments, str) or not arguments:
        return False
    try:
        return not isinstance(json.loads(arguments), dict)
    except ValueError:
        return True


def _odd_calls(message: JSON, i: int) -> tuple[Odd, ...]:
    calls = message.get("tool_calls")
    odd: tuple[Odd, ...] = ()
    for j, call in enumerate(calls if isinstance(calls, list) else ()):
        function = call.get("function") if isinstance(call, dict) else None
        if isinstance(function, dict) and _no_object(function.get("arguments")):
            path = f"messages[{i}].tool_calls[{j}].function.arguments"
            odd += (Odd(path, arguments=True),)
    return odd


def odd_elements(body: JSON) -> tuple[Odd, ...]:
    """What of ``body``'s messages and tools is not plain text or a function, in
    body order: read once per request (a text-only conversation gives the empty
    tuple), then checked by each attempt's ``Carry``."""
    odd: tuple[Odd, ...] = ()
    messages = body.get("messages")
    for i, message in enumerate(messages if isinstance(messages, list) else ()):
        if not isinstance(message, dict):
            continue
        role = message.get("role")
        if role not in _ROLES:
            odd += (Odd(f"messages[{i}]"),)
            continue
        if role == "assistant" and message.get("tool_calls"):
            odd += _odd_calls(message, i)
        content = message.get("content")
        if not isinstance(content, list):
            continue
        for j, item in enumerate(content):
            if isinstance(item, dict) and item.get("type") not in TEXT_PARTS:
                text_only = role in _TEXT_ONLY_ROLES
                odd += (Odd(f"messages[{i}].content[{j}]", item, text_only),)
    tools = body.get("tools")
    for i, tool in enumerate(tools if isinstance(tools, list) else ()):
        kind = tool.get("type", "function") if isinstance(tool, dict) else "function"
        if kind != "function":
            odd += (Odd(f"tools[{i}]", tool=str(kind)),)
    return odd


@dataclass(frozen=True, slots=True)
class Carry:
    """What one translation carries, declared by its dialect (module doc)."""

    #: canonical top-level field -> the test of a value the upstream cannot express
    fields: Mapping[str, Asked]
    #: whether a content part other than text is sent
    part: Sent
    #: the tool types sent (a tool of another type is left out)
    tools: frozenset[str] = _FUNCTION
    #: the most stop sequences taken (None: every one)
    max_stops: int | None = None
    #: tool-call ``arguments`` that are no JSON object are sent as they are (a
    #: wire whose arguments are a string); False: they become ``{}``
    arguments: bool = False
    #: fields left out for what the body as a whole holds (Anthropic's thinking in
    #: a tool turn, or without room for the answer); None: none
    whole: Callable[[JSON], tuple[str, ...]] | None = None

    def __call__(
        self, body: JSON, odd: tuple[Odd, ...] | None = None
    ) -> tuple[str, ...]:
        """The canonical paths of ``body`` this translation leaves out, in body
        order: fields, stop sequences, then message parts (and messages of an
        unknown role) and tools; ``odd``: ``odd_elements(body)``, when the caller
        has it already."""
        left: tuple[str, ...] = ()
        fields = self.fields
        for name in body:
            asked = fields.get(name)
            if asked is not None:
                value = body[name]
                if value is not None and asked(value):
                    left += (name,)
        if self.whole is not None:
            left += tuple(name for name in self.whole(body) if name not in left)
        if self.max_stops is not None:
            stop = body.get("stop")
            if isinstance(stop, list) and len(stop) > self.max_stops:
                left += tuple(f"stop[{i}]" for i in range(self.max_stops, len(stop)))
        for item in odd_elements(body) if odd is None else odd:
            if item.arguments:
                sent = self.arguments
            elif item.tool is not None:
                sent = item.tool in self.tools
            else:
                sent = item.part is not None and self.part(item.part, item.text_only)
            if not sent:
                left += (item.path,)
        return left


def text_or(kinds: frozenset[str]) -> Sent:
    """A part test: text everywhere, and parts of ``kinds`` in user and assistant
    messages."""

    def sent(part: JSON, text_only: bool) -> bool:
        kind = part.get("type")
        return kind in TEXT_PARTS or (not text_only and kind in kinds)

    return sent
