"""``Run``: what one request carries from slot to slot, and how a slot is planned.

A ``Run`` holds the request, its chain, its log record and its report items, and the
facts that outlive one attempt: the calls made (``X-OmniRoute-Attempts``), the targets
already attempted, the connections that failed to connect, the models too small for
the request, the combo plans whose strategies wait for an outcome, the auto decisions,
the self-healing probes and the targets forced although cooling.

``plan_slot`` turns a slot into its ordered units (spec 02 §7, 03 §4, 04): a direct
model's connections, a combo's plan, or an auto decision; ``skip_check`` is the check
made right before each call.  The attempt loop (``gateway.pipeline.loop``), the slot
runners (``gateway.slots``) and ``explain_route`` (``gateway.ops.explain``, in a dry
run) all plan and check through these, so they cannot drift apart.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from gateway.auto.engine import healing
from gateway.auto.engine.decide import Decision
from gateway.auto.engine.effort import apply_effort
from gateway.auto.live import Controls, auto_route, plan_auto, read_controls
from gateway.dialects import carry_of, dialect_of, embeddings_unsent, odd_elements
from gateway.dialects.carry import Odd
from gateway.kernel.chain import Options, Slot, effective_options, plan_targets
from gateway.kernel.exchange import ChatRequest, RequestError, without_nested
from gateway.kernel.facts import Need, cache_key, needed_tokens, needs
from gateway.kernel.failover import Item, should_continue
from gateway.kernel.relay import with_handoff
from gateway.kernel.types import ComboInfo, KeyPolicy, PlannedUnit, Target
from gateway.pipeline import handoff
from gateway.pipeline.filters import pre_call_skip, skip_item
from gateway.pipeline.fit import carries
from gateway.pipeline.health import remember_good
from gateway.planning.combo import plan_combo
from gateway.planning.plan import ComboPlan, request_facts
from providers.health import Skip

if TYPE_CHECKING:
    from gateway.auto.engine.pool import Refusal
    from gateway.pipeline.context import ChatContext
    from gateway.pipeline.record import RunRecord
    from gateway.pipeline.result import Result

#: auto refusals that mean "no call could be made", not a gateway refusal (spec 01
#: "When nothing was served"): every candidate filtered out, or all too small
NOTHING_TO_CALL = frozenset({"no_healthy_candidate", "context_length_exceeded"})

#: runs a fusion or pipeline combo as one unit: (run, slot, index, combo, in_plan)
CompositeRunner = Callable[
    ["Run", Slot, int, ComboInfo | None, bool], Awaitable["CompositeDone"]
]


@dataclass(slots=True)
class CompositeDone:
    """What a composite unit hands back to whoever ran it."""

    result: Result | None = None
    #: the target whose failure ended the unit (None: no call was made)
    target: Target | None = None


@dataclass(slots=True, kw_only=True)
class SlotPlan:
    """A slot's units in order, or the refusal that ends the request."""

    units: list[PlannedUnit] = field(default_factory=list)
    #: the targets the plan filtered out before ordering (a combo's health and
    #: request-shaped filters, an auto pool's unreachable candidates)
    skips: list[tuple[Target, Skip]] = field(default_factory=list)
    #: the combo plan (combo slots)
    combo: ComboPlan | None = None
    decision: Decision | None = None
    refusal: Refusal | None = None
    #: a header refusal (a bad ``X-OmniRoute-Budget``) met while planning
    error: RequestError | None = None


@dataclass(slots=True, kw_only=True)
class Run:
    ctx: ChatContext
    key: KeyPolicy
    request: ChatRequest
    chain: list[Slot]
    rec: RunRecord
    items: list[Item] = field(default_factory=list)
    calls: int = 0
    attempted: set[str] = field(default_factory=set)
    failed_connections: set[str] = field(default_factory=set)
    too_large: set[str] = field(default_factory=set)
    plans: list[ComboPlan] = field(default_factory=list)
    #: ``S`` of spec 03 §3 (None: no session)
    session_key: str | None = None
    #: target key -> context-relay handoff summary to hand to it (03 §5.17)
    injected: dict[str, str] = field(default_factory=dict)
    #: auto slots: slot index -> the engine's decision (spec 04)
    auto: dict[int, Decision] = field(default_factory=dict)
    #: candidate keys whose next attempt is a self-healing probe
    probes: set[str] = field(default_factory=set)
    #: targets called although cooling (adaptive's all-cooling choice)
    forced: set[str] = field(default_factory=set)
    controls: Controls | None = None
    #: runs fusion and pipeline units (set by ``gateway.pipeline.loop``)
    composite: CompositeRunner | None = None
    #: explain_route: plan and check, never call (no Nadir, no healing writes)
    dry_run: bool = False
    _needed: int | None = None
    _needs: tuple[Need, ...] | None = None
    #: the body's parts and tools a translation may not send (read once)
    _odd: tuple[Odd, ...] | None = None

    @property
    def route(self) -> str:
        return "chain" if len(self.chain) > 1 else self.chain[0].resolved.route

    @property
    def failover(self) -> bool:
        """More than one chain slot (spec 06 §1.1 ``failover``)."""
        return len(self.chain) > 1

    # --- the request's facts ----------------------------------------------------

    def needed(self) -> int:
        """``R`` of spec 03 §4.2, computed once per request when first asked."""
        if self._needed is None:
            self._needed = needed_tokens(self.request.body)
        return self._needed

    def needs(self) -> tuple[Need, ...]:
        if self._needs is None:
            self._needs = (*self.request.surface_needs(), *needs(self.request.body))
        return self._needs

    def options(self, slot: Slot, target: Target) -> Options:
        r = self.request.redundancy
        options = effective_options(
            self.ctx.table,
            self.key,
            slot,
            target,
            (r.timeout_ms, r.first_token_timeout_ms, r.on),
        )
        if target.key in self.probes:  # spec 04 §6: a probe gets a shortened timeout
            cap = healing.PROBE_TIMEOUT_MS
            first = options.first_token_timeout_ms
            options = dataclasses.replace(
                options,
                timeout_ms=min(options.timeout_ms, cap),
                first_token_timeout_ms=min(first, cap) if first is not None else None,
            )
        return options

    def attempt_body(self, target: Target) -> dict[str, Any]:
        """The body for one attempt: without what its model cannot carry (09 §2.6),
        a relay handoff note, ``X-OmniRoute-Effort``."""
        body = self.request.body
        if self.request.conditional and not self._passes_through(target):
            body = self._carried(body, target)
        if not self._passes_through(target):
            self._unsent(body, target)
        summary = self.injected.get(target.key)
        if summary is not None:
            body = with_handoff(body, summary)
        effort = self.ctx.headers.get("x-omniroute-effort")
        if effort is not None:
            body = apply_effort(
                body,
                header=effort,
                provider_kind=target.provider.kind,
                capabilities=target.model.capabilities,
            )
        return body

    def _passes_through(self, target: Target) -> bool:
        """The attempt sends the client's own body (09 §2.5): nothing is dropped."""
        return (
            self.request.original is not None
            and self.request.surface in dialect_of(target).surfaces
        )

    def _carried(self, body: dict[str, Any], target: Target) -> dict[str, Any]:
        left: list[str] = []
        stripped: set[str] = set()
        for carried in self.request.conditional:
            if carried.nested:
                if carries(target, carried):
                    continue
                if carried.field not in stripped:
                    stripped.add(carried.field)
                    body = without_nested(body, carried.field)
            elif carried.field in body and not carries(target, carried):
                body = {k: v for k, v in body.items() if k != carried.field}
            else:
                continue
            if carried.path:
                left.append(carried.path)
        if left:
            self.rec.attempt_dropped[target.key] = tuple(left)
        return body

    def _unsent(self, body: dict[str, Any], target: Target) -> None:
        """What the target's dialect cannot carry of ``body`` (09 §2.6), named in
        the client's terms."""
        dialect = dialect_of(target)
        if self.request.operation == "embeddings":
            left = embeddings_unsent(dialect, target.model.upstream_id, body)
        else:
            carry = carry_of(dialect)
            if carry is None:  # the Chat Completions wire carries the body as it is
                return
            if self._odd is None:
                self._odd = odd_elements(self.request.body)
            left = carry(body, self._odd)
        if not left:
            return
        known = self.rec.attempt_dropped.get(target.key, ())
        named = tuple(
            path for path in map(self.request.client_path, left) if path not in known
        )
        if named:
            self.rec.attempt_dropped[target.key] = known + named

    # --- planning a slot ----------------------------------------------------------

    def read_controls(self) -> RequestError | None:
        """The auto headers, read once (spec 02 §6.4: a bad one ends the request
        before any call); the error, or None."""
        if self.controls is None:
            try:
                self.controls = read_controls(self.ctx.headers)
            except RequestError as exc:
                return exc
        return None

    async def plan_slot(self, slot: Slot, index: int, warnings: list[str]) -> SlotPlan:
        """The slot's units in order; a combo's pre-filter skips (and an auto pool's,
        when they leave nothing to call) are report items already."""
        route = auto_route(slot)
        if route is None:
            return self._plan_targets(slot, index, warnings)
        error = self.read_controls()
        if error is not None:
            return SlotPlan(error=error)
        assert self.controls is not None
        decision = await plan_auto(
            self.ctx.table,
            self.key,
            route,
            self.request.body,
            self.controls,
            self.session_key,
            dry_run=self.dry_run,
        )
        self.auto[index] = decision
        self.rec.auto_decision = decision.record()
        self.probes |= decision.probes
        filtered = decision.filtered
        skips = [
            (target, Skip(reason, wait))
            for target, reason, wait in (filtered.unreachable if filtered else ())
        ]
        refusal = decision.refusal
        if refusal is None:
            return SlotPlan(units=[*decision.order], skips=skips, decision=decision)
        if refusal.code == "no_healthy_candidate" and skips:
            for target, skip in skips:
                self.skip(target, index, skip)
            return SlotPlan(skips=skips, decision=decision)
        if refusal.code in NOTHING_TO_CALL and index + 1 < len(self.chain):
            return SlotPlan(skips=skips, decision=decision)  # the next slot (02 §5)
        return SlotPlan(skips=skips, decision=decision, refusal=refusal)

    def _plan_targets(self, slot: Slot, index: int, warnings: list[str]) -> SlotPlan:
        """A direct model's connections, or a combo's plan with its skip items."""
        combo = slot.resolved.combo
        if combo is None:
            affinity = self.ctx.table.settings.promptcache_affinity
            key = cache_key(self.request.body) if affinity else None
            return SlotPlan(units=[*plan_targets(self.ctx.table, slot, warnings, key)])
        plan = plan_combo(
            self.ctx.table, combo, request_facts(self.request.body, self.session_key)
        )
        for target, skip in plan.skips:
            self.skip(target, index, skip)
        self.adopt(plan)
        return SlotPlan(units=plan.targets, skips=plan.skips, combo=plan)

    def adopt(self, plan: ComboPlan) -> None:
        """A combo plan joins the request: its strategies hear of every outcome."""
        self.plans.append(plan)
        self.injected.update(plan.inject)
        self.forced |= plan.forced

    # --- skips and outcomes -------------------------------------------------------

    def skip(self, target: Target, slot: int, skip: Skip) -> None:
        self.items.append(skip_item(target, slot, skip))

    def skip_check(
        self,
        target: Target,
        slot: int,
        body: dict[str, Any] | None = None,
        *,
        repeat_ok: bool = False,
    ) -> Skip | None:
        """Why ``target`` is not called now (spec 02 §7, 03 §4.2), or None.

        ``body``: a composite member's own body (checked as sent); else the request's.
        """
        if body is None:
            needed, wanted = self.needed, self.needs
            if slot in self.auto:
                # an auto slot's pool passed the engine's capability filter, which
                # fails open (spec 04 §2.3 F6): the upstream decides, not a skip here;
                # what only a dialect of the client's wire carries still applies
                wanted = self.request.surface_needs
        else:
            needed = lambda: needed_tokens(body)  # noqa: E731
            wanted = lambda: needs(body)  # noqa: E731
        return pre_call_skip(
            target,
            repeat=target.key in self.attempted and not repeat_ok,
            failed_connections=self.failed_connections,
            too_large=self.too_large,
            needed=needed,
            wanted=wanted,
            now=time.time(),
            forced=target.key in self.forced,
        )

    def served(self, target: Target) -> None:
        """State updates of a success: last-known-good, sticky strategy records."""
        remember_good(self.ctx.table, target, self.session_key)
        for plan in self.plans:
            plan.succeeded(target)
            if plan.relays:
                handoff.after_success(
                    self.ctx.table, plan.relays, target, self.request.body
                )

    def unit_served(self, unit: PlannedUnit) -> None:
        """A composite unit of a combo plan answered (its strategy's success)."""
        for plan in self.plans:
            plan.succeeded(unit)

    def failed(self, target: Target, item: Item) -> None:
        """State updates of a failed call: e.g. a weighted sticky pin is cleared,
        the connection and the model are remembered for the next checks."""
        for plan in self.plans:
            plan.failed(target)
        if item.reason == "connection_error":
            self.failed_connections.add(
                f"{target.provider.slug}@{target.connection.name}"
            )
        if item.reason == "context_length":
            self.too_large.add(target.model_key)

    def stops(self, slot: Slot, target: Target) -> bool:
        """The last report item's failure ends failover (spec 02 §6: not in ``on``)."""
        reason = self.items[-1].reason if self.items else None
        return not should_continue(reason or "", self.options(slot, target).on)

    @property
    def max_calls(self) -> int:
        return self.ctx.table.settings.max_attempts_per_request

    def calls_left(self) -> bool:
        return self.calls < self.max_calls
