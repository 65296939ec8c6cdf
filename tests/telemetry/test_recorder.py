"""The request/attempt log writer (spec 06 §1.5): batches, retries, drops, spill."""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from django.db import OperationalError, connections
from django.db.utils import ConnectionHandler
from prometheus_client import REGISTRY

from telemetry import recorder as recorder_module
from telemetry.models import AttemptLog, RequestLog
from telemetry.recorder import _Entry, import_spill_files, write_rows

POLL_SECONDS = (
    5.0  # upper bound for background work; a pass takes a few flush intervals
)
LONG_FLUSH_MS = 600_000  # the flusher thread stays asleep unless woken


def flush_failures() -> float:
    return REGISTRY.get_sample_value("omniroute_log_flush_failures_total") or 0.0


def dropped(table: str, reason: str) -> float:
    labels = {"table": table, "reason": reason}
    return REGISTRY.get_sample_value("omniroute_log_rows_dropped_total", labels) or 0.0


def stored_requests() -> list[dict[str, Any]]:
    return list(RequestLog.objects.order_by("created_at", "id").values())


def stored_attempts() -> list[dict[str, Any]]:
    return list(
        AttemptLog.objects.order_by("request__created_at", "attempt_no").values()
    )


def spill_lines(data_dir: Path) -> list[dict[str, Any]]:
    files = sorted((data_dir / "log-spill").glob("*.jsonl"))
    return [json.loads(line) for f in files for line in f.read_text().splitlines()]


def wait_until(predicate: Any) -> bool:
    deadline = time.monotonic() + POLL_SECONDS
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.01)
    return predicate()


@pytest.fixture
def request_pair(make_request_row, make_attempt_row):
    """``request_pair(attempts=2, **request_overrides)`` → ``(request, [attempts])``."""

    def make(attempts: int = 2, **overrides: Any) -> tuple[dict, list[dict]]:
        request = make_request_row(**overrides)
        rows = [make_attempt_row(request["id"], n) for n in range(1, attempts + 1)]
        return request, rows

    return make


@pytest.fixture
def log_settings(settings, tmp_path):
    settings.OMNIROUTE_DATA_DIR = tmp_path
    settings.OMNIROUTE_LOG_FLUSH_MS = LONG_FLUSH_MS
    settings.OMNIROUTE_LOG_BUFFER_ROWS = 100
    return settings


@pytest.fixture
def failing_writes(monkeypatch) -> list[int]:
    """Every ``write_rows`` raises ``OperationalError`` (the database is down)."""
    calls: list[int] = []

    def down(entries):
        calls.append(len(list(entries)))
        raise OperationalError("connection refused")

    monkeypatch.setattr(recorder_module, "write_rows", down)
    return calls


# --- the row builders match the models ----------------------------------------------


def test_row_builders_carry_exactly_the_model_attnames(request_pair):
    request, attempts = request_pair(attempts=1)

    assert set(request) == {f.attname for f in RequestLog._meta.concrete_fields}
    assert set(attempts[0]) == {f.attname for f in AttemptLog._meta.concrete_fields}


# --- write_rows ----------------------------------------------------------------------


@pytest.mark.django_db(transaction=True)
def test_a_flushed_batch_stores_every_value_unchanged(
    log_settings, make_recorder, request_pair
):
    recorder = make_recorder()
    first, first_attempts = request_pair(attempts=2)
    second, second_attempts = request_pair(
        attempts=1,
        finished_at=None,
        api_key_id=None,
        stream=False,
        served_model=None,
        provider=None,
        connection=None,
        status="upstream_failed",
        http_status=503,
        reason="all_models_failed",
        error_message="upstream said 500",
        skips=None,
        auto_decision={"engine": "auto", "scores": {"a/b": 0.5}},
        cost_usd=None,
        tier_signals=["long_prompt"],
        client_disconnected=True,
    )
    second_attempts[0].update(result="server_error", cost_usd=None, billable=False)

    recorder.record(first, first_attempts)
    recorder.record(second, second_attempts)
    flushed = recorder.flush_once()

    assert flushed is True
    assert recorder.waiting() == 0
    assert stored_requests() == [first, second]
    assert stored_attempts() == first_attempts + second_attempts


@pytest.mark.django_db
def test_writing_the_same_batch_twice_stores_each_row_once(request_pair):
    request, attempts = request_pair(attempts=2)
    batch = [_Entry(request, attempts)]

    write_rows(batch)
    write_rows(batch)

    assert stored_requests() == [request]
    assert len(stored_attempts()) == 2


@pytest.mark.django_db
def test_a_retried_batch_with_new_requests_adds_only_the_new_ones(request_pair):
    old = _Entry(*request_pair(attempts=1))
    new = _Entry(*request_pair(attempts=1))

    write_rows([old])
    write_rows([old, new])

    assert RequestLog.objects.count() == 2
    assert AttemptLog.objects.count() == 2


@pytest.mark.django_db
def test_nul_characters_are_dropped_instead_of_failing_the_batch(request_pair):
    """PostgreSQL refuses NUL in text and JSON; a client's model name may hold one."""
    request, attempts = request_pair(
        attempts=1, requested_model="pa/m\x001", skips=[{"model": "x\x00y"}]
    )
    attempts[0]["error_message"] = "bad\x00"

    write_rows([_Entry(request, attempts)])

    stored = RequestLog.objects.get()
    assert (stored.requested_model, stored.skips) == ("pa/m1", [{"model": "xy"}])
    assert AttemptLog.objects.get().error_message == "bad"


@pytest.fixture
def sqlite_default(django_db_blocker, monkeypatch) -> Iterator[None]:
    """Point this thread's ``default`` alias at an in-memory SQLite with the log
    tables, as in embedded mode."""
    lite = ConnectionHandler(
        {"default": {"ENGINE": "django.db.backends.sqlite3", "NAME": ":memory:"}}
    )["default"]
    original = connections["default"]
    monkeypatch.setattr(recorder_module, "_inserters", {})
    with django_db_blocker.unblock():
        connections["default"] = lite
        try:
            with lite.schema_editor() as editor:
                editor.create_model(RequestLog)
                editor.create_model(AttemptLog)
            yield
        finally:
            connections["default"] = original
            lite.close()


def test_sqlite_stores_every_value_unchanged_and_ignores_duplicates(
    sqlite_default, request_pair
):
    request, attempts = request_pair(attempts=2)

    write_rows([_Entry(request, attempts)])
    write_rows([_Entry(request, attempts)])

    assert stored_requests() == [request]
    assert stored_attempts() == attempts


def test_sqlite_imports_a_spill_file_with_every_value_unchanged(
    sqlite_default,
    log_settings,
    make_recorder,
    request_pair,
    failing_writes,
    monkeypatch,
):
    request, attempts = request_pair(attempts=2)
    recorder = make_recorder()
    monkeypatch.setattr(recorder_module, "SHUTDOWN_DEADLINE_SECONDS", 0.0)
    recorder.record(request, attempts)
    recorder.shutdown()
    monkeypatch.undo()  # the database is back
    monkeypatch.setattr(recorder_module, "_inserters", {})

    imported = import_spill_files()

    assert imported == 1
    assert stored_requests() == [request]
    assert stored_attempts() == attempts


# --- DB errors and retries -----------------------------------------------------------


@pytest.mark.django_db(transaction=True)
def test_a_failed_flush_keeps_the_batch_and_the_next_flush_writes_it(
    log_settings, make_recorder, request_pair, monkeypatch
):
    real_write_rows = write_rows
    calls: list[int] = []

    def fails_once(entries):
        calls.append(1)
        if len(calls) == 1:
            raise OperationalError("server closed the connection unexpectedly")
        real_write_rows(entries)

    monkeypatch.setattr(recorder_module, "write_rows", fails_once)
    recorder = make_recorder()
    request, attempts = request_pair(attempts=2)
    failures_before = flush_failures()
    recorder.record(request, attempts)

    first = recorder.flush_once()

    assert first is False
    assert recorder.waiting() == 1
    assert RequestLog.objects.count() == 0
    assert flush_failures() == failures_before + 1

    second = recorder.flush_once()

    assert second is True
    assert recorder.waiting() == 0
    assert stored_requests() == [request]
    assert stored_attempts() == attempts
    assert flush_failures() == failures_before + 1


def test_failed_flushes_back_off_1_2_4_8_16_then_every_30_seconds(
    log_settings, make_recorder, monkeypatch
):
    log_settings.OMNIROUTE_LOG_FLUSH_MS = 1000
    recorder = make_recorder()
    outcomes = iter([False] * 7 + [True])
    waits: list[float] = []

    class Clock(threading.Event):
        def wait(self, timeout: float | None = None) -> bool:
            waits.append(timeout)
            if len(waits) == 9:
                recorder._stop.set()
            return False

    monkeypatch.setattr(recorder, "_wake", Clock())
    monkeypatch.setattr(recorder, "flush_once", lambda: next(outcomes))

    recorder._run()

    assert waits == [1.0, 1, 2, 4, 8, 16, 30, 30, 1.0]


@pytest.mark.django_db(transaction=True)
def test_the_flusher_thread_retries_a_failed_batch_by_itself(
    log_settings, make_recorder, request_pair, monkeypatch
):
    log_settings.OMNIROUTE_LOG_FLUSH_MS = 10
    monkeypatch.setattr(recorder_module, "RETRY_DELAYS_SECONDS", (0.01,) * 6)
    real_write_rows = write_rows
    calls: list[int] = []

    def fails_once(entries):
        calls.append(1)
        if len(calls) == 1:
            raise OperationalError("could not connect to server")
        real_write_rows(entries)

    monkeypatch.setattr(recorder_module, "write_rows", fails_once)
    recorder = make_recorder()
    request, attempts = request_pair(attempts=1)

    recorder.record(request, attempts)

    assert wait_until(lambda: RequestLog.objects.filter(id=request["id"]).exists())
    assert len(calls) == 2
    assert stored_attempts() == attempts


# --- full buffer ---------------------------------------------------------------------


def test_a_full_buffer_drops_the_new_request_and_counts_it(
    log_settings, make_recorder, request_pair
):
    log_settings.OMNIROUTE_LOG_BUFFER_ROWS = 2
    recorder = make_recorder()
    before = dropped("request_log", "buffer_full")
    before_attempts = dropped("attempt_log", "buffer_full")
    kept = [request_pair(attempts=1), request_pair(attempts=1)]
    for request, attempts in kept:
        recorder.record(request, attempts)

    extra, extra_attempts = request_pair(attempts=3)
    result = recorder.record(extra, extra_attempts)

    assert result is None
    assert recorder.waiting() == 2
    assert [e.request["id"] for e in recorder._drain()] == [r["id"] for r, _ in kept]
    assert dropped("request_log", "buffer_full") == before + 1
    assert dropped("attempt_log", "buffer_full") == before_attempts + 3


# --- batching ------------------------------------------------------------------------


@pytest.mark.django_db(transaction=True)
def test_one_flush_writes_at_most_one_batch(
    log_settings, make_recorder, request_pair, monkeypatch
):
    recorder = make_recorder()
    pairs = [request_pair(attempts=1) for _ in range(3)]
    for request, attempts in pairs:
        recorder.record(request, attempts)
    monkeypatch.setattr(recorder_module, "BATCH_REQUESTS", 2)  # after: no early wake

    recorder.flush_once()

    assert set(RequestLog.objects.values_list("id", flat=True)) == {
        pairs[0][0]["id"],
        pairs[1][0]["id"],
    }
    assert recorder.waiting() == 1


@pytest.mark.django_db(transaction=True)
def test_a_full_batch_wakes_the_flusher_before_the_interval(
    log_settings, make_recorder, request_pair, monkeypatch
):
    monkeypatch.setattr(recorder_module, "BATCH_REQUESTS", 2)
    recorder = make_recorder()
    pairs = [request_pair(attempts=1) for _ in range(2)]

    for request, attempts in pairs:
        recorder.record(request, attempts)

    assert wait_until(lambda: RequestLog.objects.count() == 2)
    assert AttemptLog.objects.count() == 2


@pytest.mark.django_db(transaction=True)
def test_the_flusher_thread_writes_queued_rows_without_an_explicit_flush(
    log_settings, make_recorder, request_pair
):
    log_settings.OMNIROUTE_LOG_FLUSH_MS = 10
    recorder = make_recorder()
    request, attempts = request_pair(attempts=2)

    recorder.record(request, attempts)

    assert wait_until(lambda: AttemptLog.objects.count() == 2)
    assert stored_requests() == [request]
    assert stored_attempts() == attempts


def test_flushing_a_recorder_that_never_recorded_writes_nothing(make_recorder):
    recorder = make_recorder()

    flushed = recorder.flush_once()

    assert flushed is True
    assert recorder.waiting() == 0


# --- shutdown, spill and import ------------------------------------------------------


@pytest.mark.django_db(transaction=True)
def test_shutdown_with_the_database_down_spills_every_pending_row(
    log_settings, make_recorder, request_pair, failing_writes, monkeypatch, tmp_path
):
    monkeypatch.setattr(recorder_module, "SHUTDOWN_DEADLINE_SECONDS", 0.05)
    recorder = make_recorder()
    pairs = [request_pair(attempts=2), request_pair(attempts=0)]
    for request, attempts in pairs:
        recorder.record(request, attempts)

    recorder.shutdown()

    assert failing_writes[0] == 2
    assert recorder.waiting() == 0
    assert len(list((tmp_path / "log-spill").glob("*.jsonl"))) == 1
    lines = spill_lines(tmp_path)
    assert [line["request"]["id"] for line in lines] == [str(r["id"]) for r, _ in pairs]
    assert [[a["id"] for a in line["attempts"]] for line in lines] == [
        [str(a["id"]) for a in attempts] for _, attempts in pairs
    ]
    assert RequestLog.objects.count() == 0


@pytest.mark.django_db(transaction=True)
def test_importing_a_spill_writes_it_once_and_deletes_the_file(
    log_settings, make_recorder, request_pair, monkeypatch, tmp_path
):
    pairs = [request_pair(attempts=2), request_pair(attempts=1)]

    def spill() -> None:
        with monkeypatch.context() as down:
            down.setattr(recorder_module, "SHUTDOWN_DEADLINE_SECONDS", 0.0)
            down.setattr(recorder_module, "write_rows", _raise_operational_error)
            recorder = make_recorder()
            for request, attempts in pairs:
                recorder.record(request, attempts)
            recorder.shutdown()

    spill()
    imported = import_spill_files()

    assert imported == 2
    assert list((tmp_path / "log-spill").iterdir()) == []
    assert stored_requests() == [r for r, _ in pairs]
    assert stored_attempts() == [a for _, attempts in pairs for a in attempts]

    spill()  # the same ids spilled again, e.g. a commit whose outcome was unknown
    imported_again = import_spill_files()

    assert imported_again == 2
    assert list((tmp_path / "log-spill").iterdir()) == []
    assert RequestLog.objects.count() == 2
    assert AttemptLog.objects.count() == 3


def test_importing_without_a_spill_folder_imports_nothing(log_settings):
    assert import_spill_files() == 0


def test_a_spill_that_cannot_be_written_counts_the_rows_as_dropped(
    log_settings, make_recorder, request_pair, failing_writes, monkeypatch, tmp_path
):
    monkeypatch.setattr(recorder_module, "SHUTDOWN_DEADLINE_SECONDS", 0.0)
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("")
    log_settings.OMNIROUTE_DATA_DIR = blocker
    before = dropped("request_log", "shutdown")
    before_attempts = dropped("attempt_log", "shutdown")
    recorder = make_recorder()
    for request, attempts in [request_pair(attempts=2), request_pair(attempts=1)]:
        recorder.record(request, attempts)

    recorder.shutdown()

    assert recorder.waiting() == 0
    assert dropped("request_log", "shutdown") == before + 2
    assert dropped("attempt_log", "shutdown") == before_attempts + 3


def _raise_operational_error(entries):
    raise OperationalError("connection refused")


# --- issue #16 point 4: a hung database never holds the exit; one importer per file ---


def test_shutdown_honours_its_deadline_while_a_write_hangs(
    log_settings, make_recorder, request_pair, monkeypatch, tmp_path
):
    import threading

    release = threading.Event()

    def hang(entries):
        release.wait(30)  # a pool waiting on a database that is down
        raise OperationalError("connection timeout")

    monkeypatch.setattr(recorder_module, "SHUTDOWN_DEADLINE_SECONDS", 1.0)
    monkeypatch.setattr(recorder_module, "write_rows", hang)
    recorder = make_recorder()
    pairs = [request_pair(attempts=1) for _ in range(3)]
    for request, attempts in pairs:
        recorder.record(request, attempts)
    writer = threading.Thread(target=recorder.flush_once, daemon=True)
    writer.start()  # the batch is now in flight, stuck in the database call
    time.sleep(0.2)

    started = time.monotonic()
    recorder.shutdown()
    took = time.monotonic() - started
    release.set()

    assert took < 3
    spilled = [
        json.loads(line)["request"]["id"]
        for path in (tmp_path / "log-spill").glob("*.jsonl")
        for line in path.read_text().splitlines()
    ]
    assert sorted(spilled) == sorted(str(r["id"]) for r, _ in pairs)


def _spill_two_files(make_recorder, request_pair, monkeypatch) -> list[dict]:
    requests = []
    for _ in range(2):
        with monkeypatch.context() as down:
            down.setattr(recorder_module, "SHUTDOWN_DEADLINE_SECONDS", 0.0)
            down.setattr(recorder_module, "write_rows", _raise_operational_error)
            recorder = make_recorder()
            request, attempts = request_pair(attempts=1)
            recorder.record(request, attempts)
            recorder.shutdown()
            requests.append(request)
        time.sleep(0.002)  # distinct file names
    return requests


def test_two_importers_at_once_import_each_file_once(
    log_settings, make_recorder, request_pair, monkeypatch, tmp_path
):
    import threading

    _spill_two_files(make_recorder, request_pair, monkeypatch)
    written: list[int] = []

    def slow_write(entries):
        time.sleep(0.1)
        written.extend(1 for _ in entries)

    monkeypatch.setattr(recorder_module, "write_rows", slow_write)
    counts: list[int] = []
    errors: list[BaseException] = []

    def run() -> None:
        try:
            counts.append(import_spill_files())
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=run) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(10)

    assert errors == []
    assert sum(counts) == 2
    assert len(written) == 2
    assert list((tmp_path / "log-spill").iterdir()) == []


def test_a_file_a_dead_worker_had_claimed_is_imported(
    log_settings, make_recorder, request_pair, monkeypatch, tmp_path
):
    import subprocess
    import sys

    _spill_two_files(make_recorder, request_pair, monkeypatch)
    dead = int(
        subprocess.run(
            [sys.executable, "-c", "import os; print(os.getpid())"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout
    )
    first = sorted((tmp_path / "log-spill").glob("*.jsonl"))[0]
    first.rename(first.with_name(f"{first.name}.importing-{dead}"))
    alive = sorted((tmp_path / "log-spill").glob("*.jsonl"))[0]
    alive.rename(alive.with_name(f"{alive.name}.importing-{os.getpid() + 0}"))
    written: list[int] = []
    monkeypatch.setattr(
        recorder_module,
        "write_rows",
        lambda entries: written.extend([1] * len(entries)),
    )

    # the dead worker's claim is taken over; a live worker's (this one) is left
    assert import_spill_files() == 1
    assert [
        p.name.rpartition(".importing-")[2] for p in (tmp_path / "log-spill").iterdir()
    ] == [str(os.getpid())]
