"""Provider dialects: one module per provider kind, one registry line each."""

from __future__ import annotations

from gateway.dialects.anthropic import AnthropicDialect
from gateway.dialects.base import (
    BadUpstreamResponse,
    Dialect,
    StreamErrorEvent,
    StreamTranslator,
    UpstreamCall,
)
from gateway.dialects.openai import OpenAIDialect

#: provider kind -> dialect.  The ``mock`` kind speaks OpenAI (served in-process).
REGISTRY: dict[str, Dialect] = {
    "openai": OpenAIDialect(),
    "anthropic": AnthropicDialect(),
    "mock": OpenAIDialect(),
}

__all__ = [
    "REGISTRY",
    "BadUpstreamResponse",
    "Dialect",
    "StreamErrorEvent",
    "StreamTranslator",
    "UpstreamCall",
]
