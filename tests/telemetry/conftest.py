"""Builders for request/attempt log rows and fresh recorders (spec 06 §1.5)."""

from __future__ import annotations

import atexit
import itertools
import uuid
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any

import pytest

from telemetry.recorder import Recorder

T0 = datetime(2025, 6, 1, 12, 0, 0, 123000, tzinfo=UTC)


@pytest.fixture
def make_request_row() -> Callable[..., dict[str, Any]]:
    """``make_request_row(**overrides)``: every ``RequestLog`` attname, as a producer
    (``RunRecord.rows()``) builds it: uuid id, aware datetimes, Decimal cost, JSON."""

    made = itertools.count()

    def make(**overrides: Any) -> dict[str, Any]:
        created = T0 + timedelta(seconds=next(made))  # rows sort in creation order
        row: dict[str, Any] = {
            "id": uuid.uuid4(),
            "created_at": created,
            "finished_at": created + timedelta(milliseconds=1234),
            "api_key_id": 7,
            "api_key_prefix": "omr_ab12",
            "endpoint": "/v1/chat/completions",
            "stream": True,
            "requested_model": "auto",
            "route": "combo:fast",
            "strategy": "priority",
            "served_model": "openai/gpt-4o-mini",
            "provider": "openai",
            "connection": "main",
            "status": "success",
            "http_status": 200,
            "reason": None,
            "error_message": None,
            "attempt_count": 2,
            "failover": True,
            "skips": [
                {
                    "model": "anthropic/claude-3-5-haiku",
                    "connection": "main",
                    "slot": 0,
                    "via": "fast",
                    "reason": "cooldown",
                }
            ],
            "auto_decision": None,
            "latency_ms": 1234,
            "ttft_ms": 310,
            "overhead_ms": None,
            "prompt_tokens": 1200,
            "completion_tokens": 45,
            "cached_tokens": 0,
            "usage_source": "upstream",
            "cost_usd": Decimal("0.0001234567"),
            "session_id": None,
            "session_source": None,
            "smart_alias": None,
            "smart_mode": None,
            "tier": None,
            "tier_source": None,
            "tier_score": None,
            "tier_signals": None,
            "tier_target": None,
            "client_disconnected": False,
            "node": "web-1:4242",
            "config_version": 12,
        }
        row.update(overrides)
        return row

    return make


@pytest.fixture
def make_attempt_row() -> Callable[..., dict[str, Any]]:
    """``make_attempt_row(request_id, attempt_no, **overrides)``: every ``AttemptLog``
    attname."""

    def make(request_id: uuid.UUID, attempt_no: int = 1, **overrides: Any) -> dict:
        row: dict[str, Any] = {
            "id": uuid.uuid4(),
            "request_id": request_id,
            "attempt_no": attempt_no,
            "started_at": T0 + timedelta(milliseconds=5 * attempt_no),
            "provider": "openai",
            "model": "gpt-4o-mini",
            "connection": "main",
            "target": "openai/gpt-4o-mini@main",
            "slot": attempt_no - 1,
            "via": "fast",
            "reason": None,
            "detail": None,
            "result": "success",
            "http_status": 200,
            "latency_ms": 1200,
            "ttfb_ms": 250,
            "ttft_ms": 300,
            "prompt_tokens": 1200,
            "completion_tokens": 45,
            "cached_tokens": None,
            "cost_usd": Decimal("0.0001234567"),
            "billable": True,
            "error_message": None,
            "cooldown_trigger": None,
            "passthrough": False,
            "dropped": ["logprobs"],
        }
        row.update(overrides)
        return row

    return make


@pytest.fixture
def make_recorder() -> Iterator[Callable[[], Recorder]]:
    """``make_recorder()``: a fresh ``Recorder``; its flusher thread is stopped and its
    exit hook removed at teardown, so nothing outlives the test."""
    made: list[Recorder] = []

    def make() -> Recorder:
        recorder = Recorder()
        made.append(recorder)
        return recorder

    yield make
    for recorder in made:
        atexit.unregister(recorder.shutdown)
        recorder._stop.set()
        recorder._wake.set()
        if recorder._thread is not None:
            recorder._thread.join(timeout=10)
