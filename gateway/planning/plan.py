"""What a combo plan is (spec 03 §3-§4): the request facts strategies read, and the
plan a request carries: its ordered units, the skips found while planning, the
transitions waiting for an outcome, its context-relay combos and handoff notes."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from gateway.kernel.facts import Need, cache_key, input_tokens, needed_tokens, needs
from gateway.kernel.types import ComboInfo, PlannedUnit, Target
from providers.health import Skip


@dataclass(frozen=True, slots=True, kw_only=True)
class RequestFacts:
    r_in: int
    max_out: int | None
    cache_key: str | None = None
    session_key: str | None = None
    #: ``R`` and the capabilities the request needs (§4.2); None/() = not checked
    #: while planning (composite members get other bodies and check at dispatch)
    needed: int | None = None
    needs: tuple[Need, ...] = ()


@dataclass(slots=True, kw_only=True)
class RelayPlan:
    """A context-relay combo in this plan with a session (spec 03 §5.17)."""

    combo: ComboInfo
    session_key: str
    #: ``relay:<combo>:<S>``: the holder's candidate key
    state_key: str
    #: surviving candidate keys in declared order
    declared: list[str]
    #: target key -> the candidate key it belongs to
    candidate_of: dict[str, str]

    @property
    def summary_key(self) -> str:
        return f"relay-summary:{self.combo.id}:{self.session_key}"

    @property
    def lock_key(self) -> str:
        return f"relay-lock:{self.combo.id}:{self.session_key}"


@dataclass(slots=True)
class ComboPlan:
    targets: list[PlannedUnit] = field(default_factory=list)
    skips: list[tuple[Target, Skip]] = field(default_factory=list)
    #: target key -> callbacks to run when that target serves
    on_success: dict[str, list[Callable[[], None]]] = field(default_factory=dict)
    #: target key -> callbacks to run when a call to that target fails
    on_failure: dict[str, list[Callable[[], None]]] = field(default_factory=dict)
    #: context-relay combos of the plan (handoffs start after a success)
    relays: list[RelayPlan] = field(default_factory=list)
    #: target key -> handoff summary to add as a system message (§5.17)
    inject: dict[str, str] = field(default_factory=dict)
    #: targets chosen although cooling (adaptive, all candidates cooling)
    forced: set[str] = field(default_factory=set)

    def succeeded(self, target: PlannedUnit) -> None:
        for callback in self.on_success.get(target.key, ()):
            callback()

    def failed(self, target: PlannedUnit) -> None:
        for callback in self.on_failure.get(target.key, ()):
            callback()


def request_facts(
    body: dict[str, Any], session_key: str | None = None, *, shaped: bool = True
) -> RequestFacts:
    """The request-derived keys of spec 03 §3 that strategies read; ``shaped`` adds
    what the request-shaped filters of §4.2 need."""
    max_out = body.get("max_completion_tokens") or body.get("max_tokens")
    return RequestFacts(
        r_in=input_tokens(body.get("messages")),
        max_out=max_out if isinstance(max_out, int) else None,
        cache_key=cache_key(body),
        session_key=session_key,
        needed=needed_tokens(body) if shaped else None,
        needs=needs(body) if shaped else (),
    )
