"""Provider dialects: one module per provider kind, one registry line each.

``REGISTRY`` is the only list of provider kinds: ``Provider.kind``'s choices, the
validators, the catalog, the auto engine and the upstream client all derive from
what each dialect declares (``base.Dialect``).
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

from gateway.dialects.anthropic import AnthropicDialect
from gateway.dialects.base import (
    RAW,
    BadUpstreamResponse,
    Dialect,
    StreamErrorEvent,
    StreamTranslator,
    UpstreamCall,
)
from gateway.dialects.openai import MockDialect, OpenAIDialect

_DIALECTS: tuple[Dialect, ...] = (
    OpenAIDialect(),
    AnthropicDialect(),
    MockDialect(),
)

#: provider kind -> its dialect
REGISTRY: Mapping[str, Dialect] = MappingProxyType({d.kind: d for d in _DIALECTS})


__all__ = [
    "RAW",
    "REGISTRY",
    "BadUpstreamResponse",
    "Dialect",
    "StreamErrorEvent",
    "StreamTranslator",
    "UpstreamCall",
]
