"""THE attempt runner: one upstream call of a request, with all its bookkeeping.

``attempt()`` is the only place a call to a target is made, for every slot runner
(``gateway.slots``: the sequential walk, chaos, fusion, pipeline) and in this order:

1. **claim**: the connection's breaker admits the call (``board.begin``; a half-open
   probe is taken at most once); a target a strategy forced although cooling goes
   ahead unclaimed; a lost claim is a ``circuit_open`` skip (``Skipped``);
2. **probe**: a self-healing probe's start is recorded (spec 04 §6);
3. **dispatch**: the call is counted (``X-OmniRoute-Attempts``) and sent
   (``gateway.pipeline.upstream.dispatch``); a stream comes back at its first
   content token (``Opened``), anything else settled (``Settled``);
4. **settle**: a served call feeds health, stats and the latency estimate and runs the
   strategies' success transitions; a failed one also gets its log row at once and
   runs their failure transitions; a 2xx that lacks what the caller needs (``wants``)
   is ``server_error`` / ``empty_output``;
5. **cancel**: a cancelled call is logged and reported by its cause (``Cancel``): the
   client left, it lost a race, or a panel collector cut it.

Billing a served call (its billable log row) is the caller's: it knows whether the
answer reached the client (``bill``).
"""

from __future__ import annotations

import asyncio
import dataclasses
import time
from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum
from typing import TYPE_CHECKING, Any

from gateway.auto import live as auto_live
from gateway.kernel.chain import Slot
from gateway.kernel.failover import Item
from gateway.kernel.types import Target
from gateway.pipeline import upstream
from gateway.pipeline.health import attempt_abandoned, conn_key, record_health
from providers.credential_sources import CredentialUnavailable
from providers.health import Skip, board
from telemetry.sanitize import sanitize

if TYPE_CHECKING:
    from gateway.pipeline.run import Run


class Cancel(StrEnum):
    """Why a call was cancelled; each is logged and reported its own way."""

    #: the client left (or the drain cut the request): ``client_cancelled``
    CLIENT = "client"
    #: a chaos member another member beat: ``client_cancelled``, no health effect
    RACE_LOST = "race_lost"
    #: a fusion panel member still running at the hard timeout: ``timeout``
    PANEL_TIMEOUT = "panel_timeout"
    #: a member dropped after quorum and grace: ``timeout``, no health effect
    STRAGGLER_DROPPED = "straggler_dropped"


def _client() -> Cancel:
    return Cancel.CLIENT


@dataclass(slots=True, kw_only=True)
class Skipped:
    """The call was not made: its claim was lost (``circuit_open``)."""

    target: Target
    skip: Skip


@dataclass(slots=True, kw_only=True)
class Settled:
    """A call that ended: ``item.status`` is ``served`` or ``failed``."""

    target: Target
    item: Item
    result: upstream.AttemptResult
    started_wall: float
    body: dict[str, Any]

    @property
    def served(self) -> bool:
        return self.item.status == "served"


@dataclass(slots=True, kw_only=True)
class Opened:
    """A stream past its commit point, to be relayed (or discarded)."""

    target: Target
    item: Item
    stream: upstream.OpenStream
    started_wall: float
    body: dict[str, Any]


Outcome = Skipped | Settled | Opened


def _item(target: Target, index: int, via: str | None, **fields: Any) -> Item:
    return Item(
        model=target.model_key,
        slot=index,
        via=via,
        connection=target.connection.name,
        **fields,
    )


async def attempt(  # noqa: PLR0913
    run: Run,
    slot: Slot,
    index: int,
    target: Target,
    *,
    body: dict[str, Any],
    stream: bool,
    via: str | None,
    report: list[Item] | None,
    wants: Callable[[dict[str, Any] | None], bool] | None = None,
    cancel: Callable[[], Cancel] = _client,
    counted: Callable[[], None] | None = None,
) -> Outcome:
    """Call ``target`` once with ``body``.

    ``via``: the report item's ``via``.  ``report``: where a cancelled call's item
    goes (the caller appends the others).  ``wants``: what a 2xx completion must hold
    to count as an answer.  ``cancel``: asked for the cause when the call is
    cancelled.  ``counted``: also told when the call is counted (a composite counts
    its inner calls).
    """
    options = run.options(slot, target)
    connection = conn_key(target)
    claimed = board.begin(connection, time.time(), options.timeout_ms / 1000)
    if not claimed and target.key not in run.forced:
        # another request took the half-open probe since the pre-call check
        return Skipped(target=target, skip=Skip("circuit_open", 1.0))
    probe = target.key in run.probes
    if probe:
        auto_live.probe_started(target)
    run.calls += 1
    run.attempted.add(target.key)
    if counted is not None:
        counted()
    started_wall = time.time()
    progress = upstream.AttemptResult(started=time.perf_counter())
    # the request's own body, unchanged, may go by passthrough (spec 09 §2.5)
    original = run.request.passthrough() if body is run.request.body else None
    try:
        try:
            auth = await upstream.ready_auth(target)
        except CredentialUnavailable as exc:
            outcome: upstream.AttemptResult | upstream.OpenStream = (
                upstream.credential_failure(progress, exc)
            )
        else:
            call = upstream.build_call(
                target,
                body,
                stream=stream,
                original=original,
                operation=run.request.operation,
                auth=auth,
            )
            outcome = await upstream.dispatch(
                target,
                call,
                stream=stream,
                options=options,
                idle_timeout_ms=run.ctx.table.settings.stream_idle_timeout_ms,
                created=int(started_wall),
                result=progress,
            )
            upstream.drop_refused(target, auth, outcome)
    except asyncio.CancelledError:
        _cancelled(run, target, index, via, started_wall, progress, cancel(), report)
        if probe:  # the probe stays pending; nothing is in flight any more
            run.probes.discard(target.key)
            auto_live.probe_finished(
                target, "client_cancelled", False, run.ctx.table.settings
            )
        raise
    finally:
        if claimed:
            board.end(connection)
    settled: Opened | Settled
    if isinstance(outcome, upstream.OpenStream):
        settled = _opened(run, target, index, via, outcome, started_wall, body)
    else:
        settled = _settle(run, target, index, via, outcome, started_wall, body, wants)
    if probe:
        run.probes.discard(target.key)
        item = settled.item
        auto_live.probe_finished(
            target, item.reason, item.status == "served", run.ctx.table.settings
        )
    return settled


def _opened(
    run: Run,
    target: Target,
    index: int,
    via: str | None,
    stream: upstream.OpenStream,
    started_wall: float,
    body: dict[str, Any],
) -> Opened:
    run.rec.upstream_wait_s += stream.result.upstream_wait_s
    item = _item(
        target, index, via, status="served", http_status=stream.result.http_status
    )
    return Opened(
        target=target, item=item, stream=stream, started_wall=started_wall, body=body
    )


def _settle(
    run: Run,
    target: Target,
    index: int,
    via: str | None,
    result: upstream.AttemptResult,
    started_wall: float,
    body: dict[str, Any],
    wants: Callable[[dict[str, Any] | None], bool] | None,
) -> Settled:
    latency = int(result.latency_s * 1000)
    run.rec.upstream_wait_s += result.upstream_wait_s
    failure = result.failure
    reason = failure.reason.value if failure else None
    detail = failure.detail.value if failure and failure.detail else None
    if failure is None and result.completion is None:
        reason, detail = "server_error", "bad_response"
    if reason is None and wants is not None and not wants(result.completion):
        reason, detail = "server_error", "empty_output"
    table = run.ctx.table
    if reason is None:
        item = _item(
            target,
            index,
            via,
            status="served",
            latency_ms=latency,
            http_status=result.http_status,
        )
        record_health(table, target, item, result)
        run.served(target)
        return Settled(
            target=target,
            item=item,
            result=result,
            started_wall=started_wall,
            body=body,
        )
    error = result.error
    item = _item(
        target,
        index,
        via,
        status="failed",
        reason=reason,
        detail=detail,
        latency_ms=latency,
        http_status=result.http_status,
        upstream_message=sanitize(error.message) if error else None,
        upstream_param=error.param if error else None,
    )
    trigger = record_health(table, target, item, result)
    run.rec.add_attempt(target, item, started_wall, result, trigger=trigger)
    run.failed(target, item)
    return Settled(
        target=target, item=item, result=result, started_wall=started_wall, body=body
    )


def _cancelled(
    run: Run,
    target: Target,
    index: int,
    via: str | None,
    started_wall: float,
    progress: upstream.AttemptResult,
    cause: Cancel,
    report: list[Item] | None,
) -> None:
    waited = max(0.0, time.time() - started_wall)
    if cause is Cancel.CLIENT:
        run.rec.upstream_wait_s += waited  # overhead excludes the upstream wait
    cut = cause in (Cancel.PANEL_TIMEOUT, Cancel.STRAGGLER_DROPPED)
    item = _item(
        target,
        index,
        via,
        status="failed",
        reason="timeout" if cut else "client_cancelled",
        detail=cause.value if cut else None,
        latency_ms=int(waited * 1000),
        http_status=progress.http_status,  # null when no response had come
    )
    if report is not None:
        report.append(item)
    if cause is Cancel.RACE_LOST:
        attempt_abandoned(target)  # neither a success nor a failure for health
    elif cause is Cancel.STRAGGLER_DROPPED:
        # a dropped straggler says nothing about its connection
        neutral = dataclasses.replace(item, reason="client_cancelled", detail=None)
        record_health(run.ctx.table, target, neutral, None)
    else:
        record_health(run.ctx.table, target, item, None)
    run.rec.add_attempt(
        target, item, started_wall, progress, result=None if cut else "cancelled"
    )


async def discard(run: Run, opened: Opened, report: list[Item] | None) -> None:
    """An opened stream nobody will relay (a chaos tie): closed, logged as a lost
    race (no health effect)."""
    await opened.stream.generator.aclose()
    item = dataclasses.replace(
        opened.item,
        status="failed",
        reason="client_cancelled",
        http_status=None,
        latency_ms=int((time.time() - opened.started_wall) * 1000),
    )
    if report is not None:
        report.append(item)
    run.rec.add_attempt(
        opened.target, item, opened.started_wall, None, result="cancelled"
    )
    attempt_abandoned(opened.target)


def bill(run: Run, settled: Settled) -> dict[str, Any]:
    """The billable log row of a served call whose answer reached the client (its
    usage, else an estimate from its body, spec 02 §11); returns the row."""
    run.rec.add_attempt(
        settled.target,
        settled.item,
        settled.started_wall,
        settled.result,
        billable=True,
        estimate_body=settled.body,
    )
    return run.rec.attempts[-1]


def lost(run: Run, settled: Settled, report: list[Item] | None) -> None:
    """A served call whose answer came too late to be used (a chaos member that
    finished beside the winner): reported and logged as a lost race."""
    item = dataclasses.replace(settled.item, status="failed", reason="client_cancelled")
    if report is not None:
        report.append(item)
    run.rec.add_attempt(
        settled.target, item, settled.started_wall, None, result="cancelled"
    )


def unbilled(run: Run, settled: Settled) -> None:
    """The log row of a served call whose answer reached nobody (a pipeline whose
    later stage failed)."""
    run.rec.add_attempt(
        settled.target, settled.item, settled.started_wall, settled.result
    )
