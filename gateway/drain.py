"""Graceful shutdown (spec 08 §4): the draining flag, the in-flight registry, the cut.

One ``Drain`` per process (``registry``).  Its life:

1. ``begin(grace_seconds)`` marks the process as draining and fixes the deadline
   (``began_at + grace``) once; a second call moves nothing.  From then on ``/readyz``
   answers 503 ``draining`` and the chat front door refuses new requests with 503
   ``shutting_down``.
2. Every chat request being served holds an ``InFlight`` entry (``track()``), which
   the request's own code reaches through ``current()``.
3. ``finish()`` waits until no entry is left or the deadline passes.  At the deadline
   it stops every entry still open: an entry that is waiting on its upstream
   (``interruptible``) has its task cancelled, and the request turns that cancel into
   its shutdown ending (a 503, or a stream's final ``shutting_down`` chunk).  An entry
   that is sending to its client is only flagged; it ends before its next upstream
   read.  ``CUT_TAIL_SECONDS`` later, entries still open (a client that stopped
   reading) are cancelled wherever they are, so a drain always ends by
   ``grace + CUT_TAIL_SECONDS + FORCED_SETTLE_SECONDS``.
4. ``run_shutdown_callbacks()`` then runs what ``on_shutdown()`` registered, once, in
   order, each bounded by ``CALLBACK_TIMEOUT_SECONDS``; a failing callback is logged and
   the next one still runs.  ``gateway.edge.lifecycle`` calls it after the drain and
   before
   the request log is flushed.

Invariants: draining never ends within a process; a cancel is sent to an entry's task
only by ``stop()`` (when interruptible) and ``force()``, at most once each, and
``absorb()`` takes back exactly those cancels, so a client disconnect or a server
cancel arriving at the same time is never swallowed.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import inspect
import logging
import time
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass, field

logger = logging.getLogger(__name__)

SHUTDOWN_CODE = "shutting_down"
SHUTDOWN_MESSAGE = "Gateway is shutting down"
SHUTDOWN_ERROR_TYPE = "api_error"
RETRY_AFTER_SECONDS = 1  # spec 01: 503 shutting_down carries ``Retry-After: 1``
CUT_TAIL_SECONDS = 2.0  # after the cut: time for streams to send their last chunk
FORCED_SETTLE_SECONDS = 1.0  # after the forced cancel: time for ``finally`` blocks
CALLBACK_TIMEOUT_SECONDS = 5.0  # one shutdown callback (e.g. a Redis reconcile)

ShutdownCallback = Callable[[], Awaitable[None] | None]


def shutdown_error() -> dict[str, str]:
    """The ``error`` object of a stream's final chunk at the cut (spec 08 §4)."""
    return {
        "message": SHUTDOWN_MESSAGE,
        "type": SHUTDOWN_ERROR_TYPE,
        "code": SHUTDOWN_CODE,
    }


@dataclass(slots=True, eq=False)
class InFlight:
    """One request being served; ``task`` is the task serving it (None in tests)."""

    task: asyncio.Task[object] | None = None
    #: its task may be cancelled at the cut (waiting on the upstream, nothing sent yet)
    interruptible: bool = True
    #: its reply is decided: a cut can no longer turn it into a 503
    committed: bool = False
    #: the cut reached it
    stopping: bool = False
    #: cancels this drain sent and the request has not absorbed yet
    _cancels: int = field(default=0, init=False, repr=False)

    def stop(self) -> None:
        """The cut: flag it, and cancel its task if it waits on its upstream."""
        if self.stopping:
            return
        self.stopping = True
        if self.interruptible:
            self._cancel()

    def force(self) -> None:
        """Cancel wherever it is (a client that stopped reading)."""
        self.stopping = True
        self._cancel()

    def _cancel(self) -> None:
        if self.task is not None and not self.task.done():
            self._cancels += 1
            self.task.cancel()

    def absorb(self) -> bool:
        """Call in ``except CancelledError``: True when the cancel was this drain's
        alone, which the caller then turns into its shutdown ending; False means
        re-raise (a client disconnect or a server cancel is also pending)."""
        task = self.task
        if not self._cancels or task is None:
            return False
        remaining = task.cancelling()
        for _ in range(self._cancels):
            remaining = task.uncancel()
        self._cancels = 0
        return remaining == 0


_current: contextvars.ContextVar[InFlight | None] = contextvars.ContextVar(
    "omniroute_in_flight", default=None
)


class Drain:
    """The draining state of one process; ``clock`` is a monotonic clock."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self.began_at: float | None = None
        self.grace_seconds = 0.0
        #: the cut happened: entries registered from now on start stopped
        self.is_cut = False
        self._entries: set[InFlight] = set()
        self._callbacks: list[ShutdownCallback] = []
        self._task: asyncio.Task[None] | None = None
        self._idle: asyncio.Event | None = None  # set when the last entry leaves

    # --- state -----------------------------------------------------------------------

    @property
    def is_draining(self) -> bool:
        return self.began_at is not None

    @property
    def deadline(self) -> float | None:
        """``began_at + grace_seconds`` (monotonic clock); None before ``begin``."""
        if self.began_at is None:
            return None
        return self.began_at + self.grace_seconds

    def remaining(self, now: float) -> float:
        """Seconds of grace left at ``now`` (0 when past; the full grace before)."""
        deadline = self.deadline
        if deadline is None:
            return self.grace_seconds
        return max(0.0, deadline - now)

    def begin(self, grace_seconds: float) -> None:
        """Mark draining; the first call fixes the deadline."""
        if self.began_at is not None:
            return
        # No logging here: this runs inside a signal handler.
        self.grace_seconds = max(0.0, float(grace_seconds))
        self.began_at = self._clock()

    # --- registry --------------------------------------------------------------------

    def in_flight(self) -> int:
        return len(self._entries)

    @contextlib.contextmanager
    def track(self, task: asyncio.Task[object] | None = None) -> Iterator[InFlight]:
        """Register the current request for the time of the ``with`` block."""
        entry = InFlight(task=task)
        if self.is_cut:
            entry.stopping = True  # arrived after the cut: it gets the 503 at once
        self._entries.add(entry)
        token = _current.set(entry)
        try:
            yield entry
        finally:
            _current.reset(token)
            self._entries.discard(entry)
            if not self._entries and self._idle is not None:
                self._idle.set()

    # --- the drain -------------------------------------------------------------------

    async def finish(self, grace_seconds: float) -> None:
        """Drain (beginning it if needed) and return when it is over; one drain runs
        per process however many callers wait for it."""
        self.begin(grace_seconds)
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._run())
        await asyncio.shield(self._task)

    async def _run(self) -> None:
        deadline = self.deadline
        assert deadline is not None
        self._idle = asyncio.Event()
        logger.info(
            "draining: %d request(s) in flight, grace %.1f s",
            len(self._entries),
            self.grace_seconds,
        )
        await self._wait_until(deadline)
        if not self._entries:
            logger.info("drained: no request in flight")
            return
        self.is_cut = True
        logger.warning(
            "shutdown grace over: cutting %d open request(s)", len(self._entries)
        )
        for entry in list(self._entries):
            entry.stop()
        await self._wait_until(self._clock() + CUT_TAIL_SECONDS)
        if not self._entries:
            return
        logger.warning(
            "cancelling %d request(s) whose client is not reading", len(self._entries)
        )
        for entry in list(self._entries):
            entry.force()
        await self._wait_until(self._clock() + FORCED_SETTLE_SECONDS)

    async def _wait_until(self, when: float) -> None:
        """Until no entry is left, or ``when`` (on this drain's clock) has passed."""
        idle = self._idle
        if not self._entries or idle is None:
            return
        idle.clear()
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(max(0.0, when - self._clock())):
                await idle.wait()

    # --- shutdown callbacks ----------------------------------------------------------

    def on_shutdown(self, callback: ShutdownCallback) -> None:
        self._callbacks.append(callback)

    async def run_shutdown_callbacks(self) -> None:
        callbacks, self._callbacks = self._callbacks, []
        for callback in callbacks:
            try:
                async with asyncio.timeout(CALLBACK_TIMEOUT_SECONDS):
                    result = callback()
                    if inspect.isawaitable(result):
                        await result
            except Exception:
                # One failing hook must not keep the request log from being flushed.
                logger.exception("shutdown callback %r failed", callback)


registry = Drain()


def is_draining() -> bool:
    return registry.is_draining


def current() -> InFlight | None:
    """The entry of the request running in this context, if it is tracked."""
    return _current.get()


def committed() -> None:
    """The running request has its reply: from now on a cut no longer cancels it
    (only a stream's upstream reads stay interruptible: ``gateway.pipeline.stream``)."""
    entry = _current.get()
    if entry is not None:
        entry.committed = True
        entry.interruptible = False


def on_shutdown(callback: ShutdownCallback) -> None:
    """Run ``callback`` (sync or async) once at shutdown, after in-flight requests
    have drained and before the request log is flushed (spec 08 §4 step 5)."""
    registry.on_shutdown(callback)
