"""The mock's constants, its behaviours, the per-model script and the request record.

This is the bottom of the package: it imports nothing else from it.
"""

from __future__ import annotations

import itertools
import threading
import time
from collections import deque
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, fields
from enum import StrEnum
from typing import Any, Literal

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 9100
DEFAULT_MODEL_IDS = ("mock-small", "mock-large")  # listed by GET /v1/models
ANY_MODEL = "*"
MAX_RECORDS = 1000  # the request record keeps only the newest requests
MAX_HEAD_BYTES = 64 * 1024  # request line + headers; more gets 431
MAX_BODY_BYTES = 32 * 1024 * 1024  # more gets 413
LISTEN_BACKLOG = 1024  # benchmarks open hundreds of connections at once
CHARS_PER_TOKEN = 4  # usage estimate: prompt tokens = len(json(messages)) // 4
MS_PER_SECOND = 1000.0
TOKEN_CACHE_SIZE = 1024  # distinct (content, token count) splits kept
THREAD_START_TIMEOUT_SECONDS = 5.0
THREAD_STOP_TIMEOUT_SECONDS = 5.0
WAIT_POLL_SECONDS = 0.005

JSON_TYPE = "application/json"
SSE_TYPE = "text/event-stream"
_SUCCESS = range(200, 300)
_STATUS_RANGE = range(100, 600)

Record = dict[str, Any]
Part = tuple[float, bytes]  # (delay in seconds before sending, bytes)
ResetMode = Literal["before_headers", "mid_body"]
RESET_MODES = ("before_headers", "mid_body")


class Outcome(StrEnum):
    PENDING = "pending"
    COMPLETED = "completed"
    ERROR = "error"
    RESET = "reset"
    CANCELLED = "cancelled"


class Ending(StrEnum):
    DONE = "done"
    RESET = "reset"
    HANG = "hang"


class MockConnectionReset(ConnectionResetError):
    """Raised by the ASGI runner where the socket server would send a TCP RST."""


# --- behaviours and the script --------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class MockBehaviour:
    """How to answer one request.  Every field is a knob of ``POST /_mock/behaviours``.

    Delays are in milliseconds; ``ttft_ms``, ``token_delay_ms``, ``drop_after_tokens``
    and ``stream_error`` only apply to streams.  Precedence: ``hang``, then
    ``reset="before_headers"``, then ``raw_body``, ``body``, a non-2xx ``status``
    (``error_body`` or a dialect-shaped default), then the normal answer.
    """

    status: int = 200
    error_body: Mapping[str, Any] | None = None
    headers: Mapping[str, str] = field(default_factory=dict)
    latency_ms: float = 0.0
    ttft_ms: float = 0.0
    token_delay_ms: float = 0.0
    content: str | None = None
    tokens: int | None = None
    reset: ResetMode | None = None
    drop_after_tokens: int | None = None
    hang: bool = False
    role_then_hang: bool = False
    stream_error: Mapping[str, Any] | None = None
    usage: bool = True
    tool_calls: Sequence[Mapping[str, Any]] | None = None
    body: Any = None
    raw_body: str | None = None

    def __post_init__(self) -> None:
        if self.status not in _STATUS_RANGE:
            raise ValueError(f"status must be 100..599, not {self.status!r}")
        if self.reset is not None and self.reset not in RESET_MODES:
            raise ValueError(f"reset must be one of {RESET_MODES}, not {self.reset!r}")
        for name in ("latency_ms", "ttft_ms", "token_delay_ms"):
            if getattr(self, name) < 0:
                raise ValueError(f"{name} must be >= 0")
        for name in ("tokens", "drop_after_tokens"):
            value = getattr(self, name)
            if value is not None and value < 0:
                raise ValueError(f"{name} must be >= 0")

    @classmethod
    def from_knobs(cls, knobs: Mapping[str, Any]) -> MockBehaviour:
        unknown = sorted(set(knobs) - KNOBS)
        if unknown:
            raise ValueError(f"unknown knob(s) {unknown}; known: {sorted(KNOBS)}")
        return cls(**knobs)


KNOBS = frozenset(f.name for f in fields(MockBehaviour))
DEFAULT_BEHAVIOUR = MockBehaviour()


class _Entry:
    __slots__ = ("behaviour", "remaining")

    def __init__(self, behaviour: MockBehaviour, remaining: int) -> None:
        self.behaviour = behaviour
        self.remaining = remaining


class _Chain:
    __slots__ = ("counted", "permanent")

    def __init__(self) -> None:
        self.counted: deque[_Entry] = deque()
        self.permanent: MockBehaviour | None = None

    def take(self) -> MockBehaviour | None:
        if not self.counted:
            return self.permanent
        entry = self.counted[0]
        entry.remaining -= 1
        if entry.remaining <= 0:
            self.counted.popleft()
        return entry.behaviour


class MockScript:
    """Behaviours keyed by model id (``"*"`` = any); thread-safe."""

    def __init__(self) -> None:
        self._chains: dict[str, _Chain] = {}
        self._lock = threading.Lock()

    def add(
        self,
        behaviour: MockBehaviour,
        *,
        model: str = ANY_MODEL,
        times: int | None = None,
    ) -> None:
        if times is not None and times < 1:
            raise ValueError(
                "times must be >= 1 (or omitted for a permanent behaviour)"
            )
        with self._lock:
            chain = self._chains.setdefault(model, _Chain())
            if times is None:
                chain.permanent = behaviour
            else:
                chain.counted.append(_Entry(behaviour, times))

    def pick(self, model: str | None) -> MockBehaviour:
        if not self._chains:  # the benchmark path: nothing scripted, no lock
            return DEFAULT_BEHAVIOUR
        with self._lock:
            for key in (model, ANY_MODEL):
                chain = self._chains.get(key) if key is not None else None
                behaviour = chain.take() if chain is not None else None
                if behaviour is not None:
                    return behaviour
        return DEFAULT_BEHAVIOUR

    def clear(self) -> None:
        with self._lock:
            self._chains.clear()

    def model_ids(self) -> list[str]:
        with self._lock:
            return [key for key in self._chains if key != ANY_MODEL]


class RequestLog:
    """The bounded record of requests seen; thread-safe."""

    def __init__(self, max_records: int = MAX_RECORDS) -> None:
        self._records: deque[Record] = deque(maxlen=max_records)
        self._lock = threading.Lock()

    def start(
        self,
        *,
        path: str,
        model: str | None,
        headers: dict[str, str],
        body: Any,
        is_stream: bool,
    ) -> Record:
        record: Record = {
            "path": path,
            "model": model,
            "headers": headers,
            "body": body,
            "stream": is_stream,
            "outcome": Outcome.PENDING.value,
            "started_at": time.time(),
            "finished_at": None,
        }
        with self._lock:
            self._records.append(record)
        return record

    @staticmethod
    def finish(record: Record | None, outcome: Outcome) -> None:
        """Set the final outcome; the first one wins."""
        if record is not None and record["outcome"] == Outcome.PENDING:
            record["outcome"] = outcome.value
            record["finished_at"] = time.time()

    def snapshot(self) -> list[Record]:
        with self._lock:
            return [dict(record) for record in self._records]

    def clear(self) -> None:
        with self._lock:
            self._records.clear()


class MockState:
    """The control state shared by the runners: script, request record, model list."""

    def __init__(
        self,
        *,
        model_ids: Iterable[str] = DEFAULT_MODEL_IDS,
        max_records: int = MAX_RECORDS,
    ) -> None:
        self.script = MockScript()
        self.log = RequestLog(max_records)
        self.model_ids = tuple(model_ids)
        self._ids = itertools.count(1)
        #: a wire's own state that outlives ``reset`` (``wire_vertex``'s tokens)
        self.extras: dict[str, Any] = {}

    def add(
        self, model: str = ANY_MODEL, *, times: int | None = None, **knobs: Any
    ) -> MockBehaviour:
        behaviour = MockBehaviour.from_knobs(knobs)
        self.script.add(behaviour, model=model, times=times)
        return behaviour

    def reset(self) -> None:
        self.script.clear()
        self.log.clear()

    def requests(self) -> list[Record]:
        return self.log.snapshot()

    def next_id(self) -> int:
        return next(self._ids)
