"""Provider dialects: one module per provider kind, one registry line each.

``REGISTRY`` is the only list of provider kinds: ``Provider.kind``'s choices, the
validators, the catalog, the auto engine and the upstream client all derive from
what each dialect declares (``base.Dialect``).  ``WIRES`` holds the other wires a
kind can be spoken over (``wire: responses`` of the ``openai`` kind, spec 10 §5),
one line each; ``dialect_of(target)`` picks a target's dialect.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from types import MappingProxyType

from gateway.dialects.anthropic import UNSENT as ANTHROPIC_UNSENT
from gateway.dialects.anthropic import AnthropicDialect
from gateway.dialects.azure import AzureDialect, AzureResponsesDialect
from gateway.dialects.base import (
    JSON,
    RAW,
    BadUpstreamResponse,
    Dialect,
    StreamErrorEvent,
    StreamTranslator,
    UpstreamCall,
    join_embeddings,
)
from gateway.dialects.bedrock import BedrockDialect
from gateway.dialects.bedrock import embeddings_unsent as bedrock_embeddings_unsent
from gateway.dialects.bedrock import unsent as bedrock_unsent
from gateway.dialects.carry import Carry, EmbeddingsCarry, Odd, odd_elements
from gateway.dialects.gemini import UNSENT as GEMINI_UNSENT
from gateway.dialects.gemini import GeminiDialect
from gateway.dialects.openai import MockDialect, OpenAIDialect
from gateway.dialects.openai_responses import UNSENT as RESPONSES_UNSENT
from gateway.dialects.openai_responses import (
    MockResponsesDialect,
    OpenAIResponsesDialect,
)
from gateway.dialects.vertex import VertexAnthropicDialect, VertexDialect, wire_of_model
from gateway.kernel.types import Target

_DIALECTS: tuple[Dialect, ...] = (
    OpenAIDialect(),
    AnthropicDialect(),
    GeminiDialect(),
    AzureDialect(),
    VertexDialect(),
    BedrockDialect(),
    MockDialect(),
)

#: provider kind -> its dialect
REGISTRY: Mapping[str, Dialect] = MappingProxyType({d.kind: d for d in _DIALECTS})

_OTHER_WIRES: tuple[Dialect, ...] = (
    OpenAIResponsesDialect(),
    MockResponsesDialect(),
    AzureResponsesDialect(),
    VertexAnthropicDialect(),
)

#: (kind, wire) -> its dialect, for every wire of every kind (``chat``: the kind's own)
WIRES: Mapping[tuple[str, str], Dialect] = MappingProxyType(
    {
        **{(d.kind, "chat"): d for d in _DIALECTS},
        **{(d.kind, d.wire): d for d in _OTHER_WIRES},
    }
)


#: kind -> the wire of a model whose row names none (None: its provider's), where a
#: model's id decides it (a Vertex ``claude…`` model is Anthropic's publisher)
_MODEL_WIRES: Mapping[str, Callable[[str], str | None]] = MappingProxyType(
    {"vertex": wire_of_model}
)


def model_wire(kind: str, model_id: str) -> str | None:
    """The wire of ``kind``'s model ``model_id`` when its row names none."""
    pick = _MODEL_WIRES.get(kind)
    return pick(model_id) if pick is not None else None


#: translating dialect -> the paths of a canonical body its translation leaves out
#: (spec 09 §2.6; ``gateway.dialects.carry``); a dialect of the Chat Completions
#: wire carries the body as it is, so it has none
_UNSENT: Mapping[type, Carry] = MappingProxyType(
    {
        AnthropicDialect: ANTHROPIC_UNSENT,
        VertexAnthropicDialect: ANTHROPIC_UNSENT,
        GeminiDialect: GEMINI_UNSENT,
        VertexDialect: GEMINI_UNSENT,
        BedrockDialect: bedrock_unsent,
        OpenAIResponsesDialect: RESPONSES_UNSENT,
        AzureResponsesDialect: RESPONSES_UNSENT,
        MockResponsesDialect: RESPONSES_UNSENT,
    }
)


def carry_of(dialect: Dialect) -> Carry | None:
    """What ``dialect``'s translation carries; None: the canonical body as it is."""
    return _UNSENT.get(type(dialect))


def unsent(
    dialect: Dialect, body: JSON, odd: tuple[Odd, ...] | None = None
) -> tuple[str, ...]:
    """What ``dialect``'s translation of the canonical ``body`` cannot carry (the
    empty tuple when it carries everything); ``odd``: ``odd_elements(body)``, read
    once per request by a caller that asks for several dialects."""
    carry = _UNSENT.get(type(dialect))
    return carry(body, odd) if carry is not None else ()


#: embeddings dialect -> the paths of an OpenAI embeddings body its request leaves
#: out for a model (spec 09 §2.6 on the embeddings surface); the OpenAI and Azure
#: dialects send the body as it is, Gemini's and Vertex's map ``dimensions`` to
#: ``outputDimensionality``, and the wire encodes base64 itself, so only Bedrock
#: declares one
_EMBEDDINGS_UNSENT: Mapping[type, EmbeddingsCarry] = MappingProxyType(
    {BedrockDialect: bedrock_embeddings_unsent}
)


def embeddings_unsent(dialect: Dialect, model: str, body: JSON) -> tuple[str, ...]:
    """What ``dialect``'s embeddings request for ``model`` (the upstream id) leaves
    out of the OpenAI embeddings ``body`` (the empty tuple when nothing)."""
    carry = _EMBEDDINGS_UNSENT.get(type(dialect))
    return carry(model, body) if carry is not None else ()


def wires_of(kind: str) -> tuple[str, ...]:
    """The ``wire`` values a provider of ``kind`` accepts, ``chat`` first."""
    return tuple(wire for (k, wire) in WIRES if k == kind)


def dialect_for(kind: str, wire: str | None = None) -> Dialect:
    """The dialect of ``kind`` over ``wire`` (None or unknown: the kind's own)."""
    return WIRES.get((kind, wire or "chat")) or REGISTRY[kind]


def dialect_of(target: Target) -> Dialect:
    """A target's dialect: its model's ``wire``, else its provider's (spec 10 §5)."""
    return dialect_for(target.provider.kind, target.model.wire or target.provider.wire)


__all__ = [
    "RAW",
    "REGISTRY",
    "WIRES",
    "BadUpstreamResponse",
    "Carry",
    "Dialect",
    "StreamErrorEvent",
    "StreamTranslator",
    "UpstreamCall",
    "carry_of",
    "dialect_for",
    "dialect_of",
    "embeddings_unsent",
    "join_embeddings",
    "model_wire",
    "odd_elements",
    "unsent",
    "wires_of",
]
