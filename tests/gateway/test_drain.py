"""The draining state, the in-flight registry and the cut (spec 08 §4)."""

from __future__ import annotations

import asyncio
import signal
import time

import pytest
import uvicorn

from gateway import drain
from gateway.drain import Drain, InFlight
from gateway.edge import lifecycle


class FakeClock:
    def __init__(self, now: float = 1000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def registry(monkeypatch: pytest.MonkeyPatch) -> Drain:
    """A fresh process-wide registry (the real one is per process)."""
    fresh = Drain()
    monkeypatch.setattr(drain, "registry", fresh)
    return fresh


# --- the draining flag and the deadline -----------------------------------------------


def test_a_new_drain_is_not_draining_and_has_no_deadline():
    state = Drain(clock=FakeClock())
    assert state.is_draining is False
    assert state.deadline is None
    assert state.in_flight() == 0


def test_begin_marks_draining_and_fixes_the_deadline_from_the_clock():
    clock = FakeClock(1000.0)
    state = Drain(clock=clock)
    state.begin(30)
    assert state.is_draining is True
    assert state.began_at == 1000.0
    assert state.deadline == 1030.0


def test_a_second_begin_moves_neither_the_start_nor_the_deadline():
    clock = FakeClock(1000.0)
    state = Drain(clock=clock)
    state.begin(30)
    clock.now = 1010.0
    state.begin(2)
    assert (state.began_at, state.grace_seconds, state.deadline) == (1000.0, 30, 1030)


def test_remaining_grace_counts_down_and_stops_at_zero():
    clock = FakeClock(1000.0)
    state = Drain(clock=clock)
    state.begin(30)
    assert state.remaining(1000.0) == 30.0
    assert state.remaining(1012.5) == 17.5
    assert state.remaining(1030.0) == 0.0
    assert state.remaining(1100.0) == 0.0


def test_a_negative_grace_is_treated_as_none():
    state = Drain(clock=FakeClock(5.0))
    state.begin(-3)
    assert state.deadline == 5.0


def test_module_flag_follows_the_process_registry(registry):
    assert drain.is_draining() is False
    registry.begin(1)
    assert drain.is_draining() is True


# --- the registry ---------------------------------------------------------------------


def test_track_registers_the_request_and_exposes_it_as_current():
    state = Drain()
    assert drain.current() is None
    with state.track() as entry:
        assert state.in_flight() == 1
        assert drain.current() is entry
        with state.track() as inner:
            assert state.in_flight() == 2
            assert drain.current() is inner
        assert drain.current() is entry
    assert state.in_flight() == 0
    assert drain.current() is None


def test_track_unregisters_also_when_the_request_raises():
    state = Drain()
    with pytest.raises(RuntimeError), state.track():
        raise RuntimeError("boom")
    assert state.in_flight() == 0


def test_a_request_tracked_after_the_cut_starts_stopped():
    state = Drain()
    state.is_cut = True
    with state.track() as entry:
        assert entry.stopping is True


def test_committed_makes_the_current_request_uninterruptible():
    state = Drain()
    with state.track() as entry:
        assert (entry.interruptible, entry.committed) == (True, False)
        drain.committed()
        assert (entry.interruptible, entry.committed) == (False, True)
    drain.committed()  # untracked: nothing to do


# --- stop, force, absorb --------------------------------------------------------------


async def _sleeper() -> None:
    await asyncio.sleep(10)


async def test_stop_cancels_an_interruptible_request_and_absorb_takes_the_cancel_back():
    task = asyncio.create_task(_sleeper())
    await asyncio.sleep(0)
    entry = InFlight(task=task)
    entry.stop()
    assert entry.stopping is True
    assert task.cancelling() == 1
    assert entry.absorb() is True
    assert task.cancelling() == 0
    assert entry.absorb() is False  # nothing of ours left
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task


async def test_stop_only_flags_a_request_that_is_sending():
    task = asyncio.create_task(_sleeper())
    await asyncio.sleep(0)
    entry = InFlight(task=task, interruptible=False)
    entry.stop()
    entry.stop()
    assert entry.stopping is True
    assert task.cancelling() == 0
    assert entry.absorb() is False
    entry.force()
    assert task.cancelling() == 1
    assert entry.absorb() is True
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task


async def test_absorb_refuses_when_another_cancel_is_pending():
    task = asyncio.create_task(_sleeper())
    await asyncio.sleep(0)
    entry = InFlight(task=task)
    entry.stop()
    task.cancel()  # e.g. the client disconnect watcher
    assert entry.absorb() is False
    assert task.cancelling() == 1  # the other cancel stays
    with pytest.raises(asyncio.CancelledError):
        await task


def test_stop_without_a_task_only_flags():
    entry = InFlight()
    entry.stop()
    entry.force()
    assert entry.stopping is True
    assert entry.absorb() is False


# --- the drain ------------------------------------------------------------------------


async def test_finish_returns_at_once_when_nothing_is_in_flight():
    state = Drain()
    started = time.monotonic()
    await state.finish(30)
    assert time.monotonic() - started < 0.5
    assert state.is_draining is True
    assert state.is_cut is False


async def test_finish_waits_for_a_request_that_ends_within_the_grace():
    state = Drain()

    async def request() -> str:
        with state.track(asyncio.current_task()):
            await asyncio.sleep(0.2)
        return "done"

    task = asyncio.create_task(request())
    await asyncio.sleep(0)
    started = time.monotonic()
    await state.finish(5)
    assert 0.15 < time.monotonic() - started < 2
    assert task.result() == "done"
    assert state.is_cut is False


async def test_at_the_deadline_a_request_waiting_upstream_is_cancelled_and_absorbs():
    state = Drain()
    outcome: list[str] = []

    async def request() -> None:
        with state.track(asyncio.current_task()) as entry:
            try:
                await asyncio.sleep(30)  # the upstream never answers
            except asyncio.CancelledError:
                if not entry.absorb():
                    raise
                outcome.append("shutting_down")

    task = asyncio.create_task(request())
    await asyncio.sleep(0)
    started = time.monotonic()
    await state.finish(0.2)
    elapsed = time.monotonic() - started
    await task
    assert outcome == ["shutting_down"]
    assert state.is_cut is True
    assert 0.15 < elapsed < 1.5


async def test_a_request_that_ignores_the_cut_is_forced_after_the_tail(monkeypatch):
    monkeypatch.setattr(drain, "CUT_TAIL_SECONDS", 0.2)
    monkeypatch.setattr(drain, "FORCED_SETTLE_SECONDS", 0.2)
    state = Drain()

    async def request() -> None:
        with state.track(asyncio.current_task()) as entry:
            entry.interruptible = False  # "sending to a client that does not read"
            await asyncio.sleep(30)

    task = asyncio.create_task(request())
    await asyncio.sleep(0)
    started = time.monotonic()
    await state.finish(0.1)
    assert time.monotonic() - started < 1.5
    with pytest.raises(asyncio.CancelledError):
        await task
    assert state.in_flight() == 0


async def test_two_callers_share_one_drain():
    state = Drain()

    async def request() -> None:
        with state.track(asyncio.current_task()):
            await asyncio.sleep(0.2)

    task = asyncio.create_task(request())
    await asyncio.sleep(0)
    await asyncio.gather(state.finish(5), state.finish(1))
    assert state.grace_seconds == 5  # the first call fixed it
    await task


# --- shutdown callbacks ---------------------------------------------------------------


async def test_shutdown_callbacks_run_once_in_order_sync_and_async(registry):
    calls: list[str] = []

    async def reconcile() -> None:
        calls.append("async")

    drain.on_shutdown(reconcile)
    drain.on_shutdown(lambda: calls.append("sync"))
    await registry.run_shutdown_callbacks()
    await registry.run_shutdown_callbacks()
    assert calls == ["async", "sync"]


async def test_a_failing_or_hanging_callback_does_not_stop_the_next(
    registry, monkeypatch, caplog
):
    monkeypatch.setattr(drain, "CALLBACK_TIMEOUT_SECONDS", 0.1)
    calls: list[str] = []

    def broken() -> None:
        raise RuntimeError("redis down")

    async def hanging() -> None:
        await asyncio.sleep(30)

    drain.on_shutdown(broken)
    drain.on_shutdown(hanging)
    drain.on_shutdown(lambda: calls.append("flushed"))
    await registry.run_shutdown_callbacks()
    assert calls == ["flushed"]
    assert caplog.text.count("shutdown callback") == 2


def test_the_shutdown_error_object_is_the_spec_shape():
    assert drain.shutdown_error() == {
        "message": "Gateway is shutting down",
        "type": "api_error",
        "code": "shutting_down",
    }


# --- lifecycle: order and the signal hook ---------------------------------------------


async def test_shutdown_drains_then_callbacks_then_flushes_then_closes(
    registry, monkeypatch, settings
):
    settings.OMNIROUTE_SHUTDOWN_GRACE_SECONDS = 7
    order: list[str] = []

    async def finish(grace: float) -> None:
        order.append(f"drain {grace}")

    async def close_clients() -> None:
        order.append("close clients")

    monkeypatch.setattr(registry, "finish", finish)
    drain.on_shutdown(lambda: order.append("reconcile"))
    monkeypatch.setattr(
        lifecycle.recorder.recorder, "shutdown", lambda: order.append("flush log")
    )
    monkeypatch.setattr(lifecycle.webhooks, "shutdown", lambda: order.append("hooks"))
    monkeypatch.setattr(lifecycle, "close_upstream_clients", close_clients)
    monkeypatch.setattr(
        lifecycle, "close_database_pools", lambda: order.append("close db")
    )
    monkeypatch.setattr(lifecycle, "stop_shared_state", lambda: order.append("redis"))
    await lifecycle.shutdown()
    assert order == [
        "drain 7",
        "reconcile",
        "flush log",
        "hooks",
        "close clients",
        "redis",
        "close db",
    ]


def test_startup_refuses_when_a_system_check_fails(monkeypatch):
    from django.core import checks

    def failing(**kwargs):
        return [
            checks.Error("OMNIROUTE_ENCRYPTION_KEY is mandatory.", id="omniroute.E003"),
            checks.Warning("just a warning", id="omniroute.W001"),
            checks.Error("someone else's", id="other.E001"),
        ]

    monkeypatch.setattr(checks, "run_checks", failing)
    with pytest.raises(RuntimeError) as raised:
        lifecycle.refuse_on_failed_checks()
    assert str(raised.value) == (
        "system checks failed: omniroute.E003: OMNIROUTE_ENCRYPTION_KEY is mandatory."
    )


def test_startup_passes_the_checks_of_this_configuration():
    lifecycle.refuse_on_failed_checks()


@pytest.fixture
def restore_signals():
    saved = {sig: signal.getsignal(sig) for sig in lifecycle.DRAIN_SIGNALS}
    yield
    for sig, handler in saved.items():
        signal.signal(sig, handler)


async def test_only_uvicorn_handlers_are_wrapped(restore_signals):
    signal.signal(signal.SIGTERM, lambda sig, frame: None)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    assert lifecycle.hook_server_signals() == []


async def test_sigterm_drains_first_then_reaches_uvicorn(
    registry, restore_signals, settings
):
    settings.OMNIROUTE_SHUTDOWN_GRACE_SECONDS = 5
    server = uvicorn.Server(uvicorn.Config(app=lambda *a: None))
    signal.signal(signal.SIGTERM, server.handle_exit)
    assert lifecycle.hook_server_signals() == [signal.SIGTERM]

    async def request() -> None:
        with registry.track(asyncio.current_task()):
            await asyncio.sleep(0.3)

    task = asyncio.create_task(request())
    await asyncio.sleep(0)
    signal.raise_signal(signal.SIGTERM)
    await asyncio.sleep(0.1)
    assert drain.is_draining() is True
    assert server.should_exit is False  # uvicorn keeps serving while it drains
    await task
    for _ in range(50):
        if server.should_exit:
            break
        await asyncio.sleep(0.02)
    assert server.should_exit is True


async def test_a_second_signal_during_the_drain_goes_straight_to_uvicorn(
    registry, restore_signals
):
    server = uvicorn.Server(uvicorn.Config(app=lambda *a: None))
    signal.signal(signal.SIGTERM, server.handle_exit)
    lifecycle.hook_server_signals()
    registry.begin(30)
    signal.raise_signal(signal.SIGTERM)
    assert server.should_exit is True
