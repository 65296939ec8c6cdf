"""Request/attempt log writer: never blocks a response (spec 06 §1.5).

``record(request_row, attempt_rows)`` is called once per request at its end and only
does ``put_nowait`` into a bounded per-process queue.  A daemon thread writes batches
every ``OMNIROUTE_LOG_FLUSH_MS`` (or at 500 waiting requests) in one transaction,
request rows first; inserts ignore primary-key conflicts so a retried batch never
duplicates.  A failed batch stays and is retried after 1, 2, 4, 8, 16, then every
30 s.  A full queue drops the new request (counted).  ``shutdown()`` flushes with a
10 s deadline and spills what it cannot write to ``<data dir>/log-spill/*.jsonl``,
which ``import_spill_files()`` loads (idempotently) at the next start.

With ``OMNIROUTE_LOG_SYNC=true`` (tests) ``record_now`` writes inside the request.
"""

from __future__ import annotations

import atexit
import json
import logging
import os
import queue
import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from django.conf import settings
from django.db import close_old_connections, connections, transaction

from telemetry import metrics
from telemetry.models import AttemptLog, RequestLog

logger = logging.getLogger(__name__)

BATCH_REQUESTS = 500
RETRY_DELAYS_SECONDS = (1, 2, 4, 8, 16, 30)
SHUTDOWN_DEADLINE_SECONDS = 10.0


@dataclass(slots=True)
class _Entry:
    request: dict[str, Any]
    attempts: list[dict[str, Any]]


def _without_nul(value: Any) -> Any:
    """``value`` without NUL characters, which PostgreSQL text and JSON refuse: one
    in a client's model name would otherwise fail the request's whole batch."""
    if isinstance(value, str):
        return value.replace("\x00", "") if "\x00" in value else value
    if isinstance(value, dict):
        return {_without_nul(k): _without_nul(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_without_nul(v) for v in value]
    return value


class _Inserter:
    """``INSERT … ON CONFLICT DO NOTHING`` by ``executemany`` for one model.

    The ORM's ``bulk_create`` spends ~250 µs of Python per request row pair (model
    instances, SQL compilation), which the writer thread takes from the event loop
    through the GIL.  Here the column list and one converter per field are computed
    once per backend, and each row costs a few dict lookups and C-level adaptation.
    """

    def __init__(self, model: Any, vendor: str, ops: Any, conn: Any) -> None:
        fields = list(model._meta.concrete_fields)
        self.keys = [f.attname for f in fields]
        self.converters = [self._converter(f, vendor, ops, conn) for f in fields]
        columns = ", ".join(ops.quote_name(f.column) for f in fields)
        marks = ", ".join(["%s"] * len(fields))
        table = ops.quote_name(model._meta.db_table)
        if vendor == "sqlite":
            self.sql = f"INSERT OR IGNORE INTO {table} ({columns}) VALUES ({marks})"
        else:
            self.sql = (
                f"INSERT INTO {table} ({columns}) VALUES ({marks}) "
                "ON CONFLICT DO NOTHING"
            )

    @staticmethod
    def _converter(field: Any, vendor: str, ops: Any, conn: Any) -> Any:
        target = field.target_field if field.is_relation else field
        kind = target.get_internal_type()
        if kind in ("CharField", "TextField"):
            return _without_nul
        if kind == "UUIDField":
            return (lambda v: v.hex) if vendor == "sqlite" else None
        if kind == "DateTimeField":
            return ops.adapt_datetimefield_value
        if kind == "DecimalField":
            digits, places = field.max_digits, field.decimal_places
            return lambda v: ops.adapt_decimalfield_value(v, digits, places)
        if kind == "JSONField":
            return lambda v: field.get_db_prep_value(_without_nul(v), conn)
        return None

    def rows(self, dicts: Iterable[dict[str, Any]]) -> list[tuple[Any, ...]]:
        pairs = list(zip(self.keys, self.converters, strict=True))
        out = []
        for data in dicts:
            row = []
            for key, convert in pairs:
                value = data.get(key)
                row.append(
                    value if value is None or convert is None else convert(value)
                )
            out.append(tuple(row))
        return out


_inserters: dict[tuple[str, str], _Inserter] = {}


def _inserter(model: Any) -> _Inserter:
    conn = connections["default"]
    key = (conn.vendor, model._meta.label)
    found = _inserters.get(key)
    if found is None:
        found = _inserters[key] = _Inserter(model, conn.vendor, conn.ops, conn)
    return found


def write_rows(entries: Iterable[_Entry]) -> None:
    """One transaction: request rows first, then their attempts (duplicates ignored)."""
    items = list(entries)
    requests = _inserter(RequestLog)
    attempts = _inserter(AttemptLog)
    request_rows = requests.rows(e.request for e in items)
    attempt_rows = attempts.rows(a for e in items for a in e.attempts)
    with transaction.atomic(), connections["default"].cursor() as cursor:
        cursor.executemany(requests.sql, request_rows)
        if attempt_rows:
            cursor.executemany(attempts.sql, attempt_rows)


class Recorder:
    def __init__(self) -> None:
        self._queue: queue.Queue[_Entry] | None = None
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._pending: list[_Entry] = []
        #: the batch being written now, outside the lock (a shutdown that cannot
        #: wait for it spills it too; the import ignores rows already written)
        self._writing: list[_Entry] = []
        self._lock = threading.Lock()
        #: one batch is written at a time (the writer thread, a test, the shutdown)
        self._flushing = threading.Lock()

    def _ensure(self) -> queue.Queue[_Entry]:
        if self._queue is None:
            with self._lock:
                if self._queue is None:
                    self._queue = queue.Queue(
                        maxsize=settings.OMNIROUTE_LOG_BUFFER_ROWS
                    )
                    self._start()
        return self._queue

    def _start(self) -> None:
        self._thread = threading.Thread(
            target=self._run, name="omniroute-log-writer", daemon=True
        )
        self._thread.start()
        atexit.register(self.shutdown)

    def record(self, request: dict[str, Any], attempts: list[dict[str, Any]]) -> None:
        """Queue one request and its attempts; drops (and counts) when full."""
        buffer = self._ensure()
        try:
            buffer.put_nowait(_Entry(request, attempts))
        except queue.Full:
            metrics.LOG_ROWS_DROPPED.labels("request_log", "buffer_full").inc()
            if attempts:
                metrics.LOG_ROWS_DROPPED.labels("attempt_log", "buffer_full").inc(
                    len(attempts)
                )
            return
        if buffer.qsize() >= BATCH_REQUESTS:
            self._wake.set()

    def _drain(self) -> list[_Entry]:
        # Called under ``self._lock``: must not go through ``_ensure`` (same lock).
        buffer = self._queue
        batch = self._pending
        self._pending = []
        while buffer is not None and len(batch) < BATCH_REQUESTS:
            try:
                batch.append(buffer.get_nowait())
            except queue.Empty:
                break
        return batch

    def _run(self) -> None:
        failures = 0
        interval = settings.OMNIROUTE_LOG_FLUSH_MS / 1000
        while not self._stop.is_set():
            delay = (
                interval
                if failures == 0
                else RETRY_DELAYS_SECONDS[min(failures, len(RETRY_DELAYS_SECONDS)) - 1]
            )
            self._wake.wait(delay)
            self._wake.clear()
            if self._stop.is_set():
                break
            failures = 0 if self.flush_once() else failures + 1

    def flush_once(self) -> bool:
        """Write one batch; on failure keep it for the next try.  True on success.
        One flush at a time; the queue's lock is not held during the write, so a
        database that hangs never blocks ``record`` nor a shutdown's spill (issue
        #16)."""
        with self._flushing:
            with self._lock:
                batch = self._drain()
                if not batch:
                    return True
                self._writing = batch
            try:
                write_rows(batch)
            except Exception:
                # Any DB failure: keep the rows, count, retry with backoff.
                logger.exception(
                    "request log flush failed; %d requests kept", len(batch)
                )
                metrics.LOG_FLUSH_FAILURES.inc()
                with self._lock:
                    if self._writing is batch:  # not spilled by a shutdown meanwhile
                        self._pending = batch + self._pending
                return False
            finally:
                with self._lock:
                    if self._writing is batch:
                        self._writing = []
                close_old_connections()
                metrics.LOG_BUFFER_ROWS.labels("request_log").set(self.waiting())
                metrics.LOG_BUFFER_ROWS.labels("attempt_log").set(
                    self.waiting_attempts()
                )
        return True

    def waiting(self) -> int:
        size = self._queue.qsize() if self._queue is not None else 0
        return size + len(self._pending)

    def waiting_attempts(self) -> int:
        """Attempt rows of the waiting requests (spec 06 §2: the gauge per table)."""
        queued = list(self._queue.queue) if self._queue is not None else []
        return sum(len(entry.attempts) for entry in (*self._pending, *queued))

    def shutdown(self) -> None:
        """Final flush within ``SHUTDOWN_DEADLINE_SECONDS``, whatever the database
        does; what is not written by then is spilled to a file (issue #16: a write
        blocked on a database that is down no longer holds the exit)."""
        if self._queue is None:
            return
        self._stop.set()
        self._wake.set()
        deadline = time.monotonic() + SHUTDOWN_DEADLINE_SECONDS
        finisher = threading.Thread(
            target=self._flush_until, args=(deadline,), daemon=True
        )
        finisher.start()
        finisher.join(max(0.0, deadline - time.monotonic()))
        if self.waiting() or self._writing:
            self._spill()

    def _flush_until(self, deadline: float) -> None:
        while self.waiting() and time.monotonic() < deadline:
            if not self.flush_once():
                time.sleep(0.5)

    def _spill(self) -> None:
        with self._lock:
            batch = self._writing + self._drain() + self._drain_all()
            self._writing = []
        if not batch:
            return
        folder = Path(settings.OMNIROUTE_DATA_DIR) / "log-spill"
        node = settings.OMNIROUTE_NODE.replace(":", "-")
        path = folder / f"{node}-{int(time.time() * 1000)}.jsonl"
        try:
            folder.mkdir(parents=True, exist_ok=True)
            with path.open("a", encoding="utf-8") as handle:
                for entry in batch:
                    line = {"request": entry.request, "attempts": entry.attempts}
                    handle.write(json.dumps(line, default=str) + "\n")
        except OSError:
            logger.exception("could not spill %d log rows", len(batch))
            metrics.LOG_ROWS_DROPPED.labels("request_log", "shutdown").inc(len(batch))
            attempts = sum(len(entry.attempts) for entry in batch)
            if attempts:
                metrics.LOG_ROWS_DROPPED.labels("attempt_log", "shutdown").inc(attempts)

    def _drain_all(self) -> list[_Entry]:
        rest: list[_Entry] = []
        while self._queue is not None:
            try:
                rest.append(self._queue.get_nowait())
            except queue.Empty:
                break
        return rest


_REVIVED_KINDS = frozenset({"UUIDField", "DateTimeField", "DecimalField"})


def _revive(model: Any, data: dict[str, Any]) -> dict[str, Any]:
    """Spilled uuids, datetimes and decimals are JSON strings; the converters (SQLite:
    ``.hex``, aware-datetime adaptation) need the Python types back."""
    out = dict(data)
    for field in model._meta.concrete_fields:
        target = field.target_field if field.is_relation else field
        value = out.get(field.attname)
        if value is not None and target.get_internal_type() in _REVIVED_KINDS:
            out[field.attname] = target.to_python(value)
    return out


#: a spill file one worker is importing: ``<name>.jsonl.importing-<pid>``
_CLAIMED = ".importing-"


def _claimable(folder: Path) -> list[Path]:
    """Spill files nobody imports: new ones, and those a dead worker had claimed."""
    found = list(folder.glob("*.jsonl"))
    for path in folder.glob(f"*.jsonl{_CLAIMED}*"):
        pid = path.name.rpartition(_CLAIMED)[2]
        if pid.isdigit() and not _alive(int(pid)):
            found.append(path)
    return sorted(found)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def import_spill_files() -> int:
    """Load spill files left by an earlier shutdown; idempotent by primary key.
    Each file is claimed first by an atomic rename, so of several workers starting
    at once exactly one imports it (issue #16)."""
    folder = Path(settings.OMNIROUTE_DATA_DIR) / "log-spill"
    if not folder.is_dir():
        return 0
    count = 0
    for path in _claimable(folder):
        base = path.name.partition(_CLAIMED)[0]
        claimed = path.with_name(f"{base}{_CLAIMED}{os.getpid()}")
        try:
            path.rename(claimed)
        except FileNotFoundError:  # another worker claimed it first
            continue
        entries = [
            _Entry(
                _revive(RequestLog, data["request"]),
                [_revive(AttemptLog, a) for a in data["attempts"]],
            )
            for data in map(
                json.loads, claimed.read_text(encoding="utf-8").splitlines()
            )
        ]
        write_rows(entries)
        claimed.unlink()
        count += len(entries)
    return count


recorder = Recorder()


def record(request: dict[str, Any], attempts: list[dict[str, Any]]) -> None:
    recorder.record(request, attempts)


def record_now(request: dict[str, Any], attempts: list[dict[str, Any]]) -> None:
    """Synchronous write (``OMNIROUTE_LOG_SYNC``); call from a worker thread."""
    try:
        write_rows([_Entry(request, attempts)])
    finally:
        close_old_connections()
