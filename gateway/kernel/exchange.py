"""The canonical exchange: a client request as every layer below the wires sees it.

A client wire (``gateway.inbound``) parses its body into a ``ChatRequest`` and renders
what the pipeline answers; everything between (chains, planning, dialects, the attempt
runner) reads only these types.  ``RequestError`` is a refusal that names the field,
raised wherever the gateway refuses a request before or between upstream calls.

The request body is the OpenAI Chat Completions shape, the lingua franca the dialects
translate from; the gateway-only fields (``models``, ``fallback_models``,
``redundancy``, session ids) are already parsed out of it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from gateway.kernel.chain import EntrySpec
from gateway.kernel.facts import Need


class RequestError(Exception):
    """A refusal that names the field; each client wire renders it in its own error
    envelope."""

    def __init__(
        self,
        status: int,
        code: str,
        message: str,
        *,
        param: str | None = None,
        error_type: str = "invalid_request_error",
    ) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message
        self.param = param
        self.error_type = error_type


@dataclass(frozen=True, slots=True, kw_only=True)
class ChainEntry:
    model: str
    #: the field a resolution error names: "model", "models[1]" for a string entry,
    #: "fallback_models[0].model" for an object entry (spec 02 §3 rows 12-14)
    param: str
    timeout_ms: int | None = None
    first_token_timeout_ms: int | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class Redundancy:
    timeout_ms: int | None = None
    first_token_timeout_ms: int | None = None
    on: tuple[str, ...] | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class Original:
    """A client's own body and wire, for a passthrough attempt (spec 09 §2.5)."""

    surface: str
    body: dict[str, Any]
    forward: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True, slots=True)
class Carried:
    """A canonical ``field`` that an attempt carries only where the target's model
    has ``capability`` (spec 09 §2.6: ``thinking`` to a model without reasoning);
    elsewhere it is left out of that attempt and ``path`` (the client's name) is
    named.  ``own``: the client sent the field itself on its own wire, so a model of
    unknown capabilities on a dialect that takes the field natively gets it.

    ``dialects``: when given, the target's dialect decides instead of its model:
    the field goes only to a dialect named there (``kind/wire``, as ``bedrock/chat``).
    ``nested``: the field is a key of the messages' parts or of the messages
    themselves (a part's ``cache_control``, a tool message's ``is_error``), removed
    wherever it sits (``without_nested``).  An empty ``path`` is never named (the
    field only refines what the body already says)."""

    path: str
    field: str
    capability: str = "reasoning"
    own: bool = False
    dialects: frozenset[str] | None = None
    nested: bool = False


def without_nested(body: dict[str, Any], name: str) -> dict[str, Any]:
    """``body`` without ``name`` on its messages and their content parts (a new
    body; the messages and parts that held it are copies, the rest shared)."""
    messages = body.get("messages")
    if not isinstance(messages, list):
        return body
    out = []
    for message in messages:
        if isinstance(message, dict):
            if name in message:
                message = {k: v for k, v in message.items() if k != name}
            content = message.get("content")
            if isinstance(content, list) and any(
                isinstance(p, dict) and name in p for p in content
            ):
                parts = [
                    {k: v for k, v in p.items() if k != name}
                    if isinstance(p, dict)
                    else p
                    for p in content
                ]
                message = {**message, "content": parts}
        out.append(message)
    return {**body, "messages": out}


#: a wire that spells every canonical field as the canonical body does
_SAME_NAMES: Mapping[str, str] = MappingProxyType({})


@dataclass(frozen=True, slots=True, kw_only=True)
class ChatRequest:
    body: dict[str, Any]  # gateway fields removed; what goes upstream (model aside)
    stream: bool
    model: str | None
    entries: tuple[ChainEntry, ...]  # explicit chain (rules 1-2) or ``[model]``
    explicit_chain: bool
    redundancy: Redundancy
    include_usage: bool
    #: ``session_id`` / ``litellm_session_id`` as sent (never forwarded, 05 §1.1)
    session_fields: dict[str, Any] = field(default_factory=dict)
    #: the paths of what the wire's translation could not carry (spec 09 §2.6)
    dropped: tuple[str, ...] = ()
    #: the client's wire when it is not Chat Completions (``messages``), and its
    #: own body without the gateway's fields: what a passthrough attempt sends
    #: upstream to a dialect of that wire (spec 09 §2.5), with ``forward`` headers
    surface: str = "chat"
    original: dict[str, Any] | None = None
    #: what the upstream is asked: ``chat`` (a completion), or ``embeddings``
    #: (vectors; spec 09 §5)
    operation: str = "chat"
    forward: tuple[tuple[str, str], ...] = ()
    #: the field only a passthrough carries whole (several legacy prompts: 09 §6);
    #: a candidate whose dialect does not speak ``surface`` is then skipped
    passthrough_only: str | None = None
    #: canonical fields an attempt carries only to a capable model (09 §2.6)
    conditional: tuple[Carried, ...] = ()
    #: canonical path -> the client's own, where its wire puts it elsewhere: a
    #: top-level field (``response_format`` is ``text.format`` on Responses) or a
    #: whole content part's path (``messages[2].content[0]`` was the client's
    #: ``messages[1].content[1]``): how a path a dialect leaves out is named to the
    #: client (09 §2.6)
    renamed: Mapping[str, str] = field(default_factory=lambda: _SAME_NAMES)

    def client_path(self, path: str) -> str:
        """``path`` of the canonical body in the client's terms: the whole path as
        ``renamed`` gives it, else its top-level field renamed (the rest kept)."""
        if not self.renamed:
            return path
        whole = self.renamed.get(path)
        if whole is not None:
            return whole
        cut = len(path)
        for mark in ".[":
            at = path.find(mark)
            if 0 <= at < cut:
                cut = at
        name = self.renamed.get(path[:cut])
        return path if name is None else name + path[cut:]

    def surface_needs(self) -> tuple[Need, ...]:
        """What the request needs of a candidate's dialect itself."""
        if self.passthrough_only is None:
            return ()
        return (Need(self.surface, self.passthrough_only),)

    def passthrough(self) -> Original | None:
        """The client's own body, when its wire is not the canonical one."""
        if self.original is None:
            return None
        return Original(surface=self.surface, body=self.original, forward=self.forward)

    def entry_specs(self) -> tuple[EntrySpec, ...]:
        """The chain entries as sent, in the planner's terms."""
        return tuple(
            EntrySpec(
                model=e.model,
                param=e.param,
                timeout_ms=e.timeout_ms,
                first_token_timeout_ms=e.first_token_timeout_ms,
            )
            for e in self.entries
        )
