"""Graceful shutdown of a real uvicorn process (spec 08 §4), and a hard kill.

Each test starts its OWN gateway (the session gateway must survive the suite) with
the start logic of ``conftest.Gateway``, then kills it.  The request log is read from
the gateway's SQLite file after the process has exited.
"""

from __future__ import annotations

import json
import signal
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from providers.mock_upstream import RunningMock, start_in_thread
from tests.integration.conftest import (
    KEY_ALL,
    Gateway,
    base_config,
    free_port,
    inherited_env,
)

pytestmark = pytest.mark.integration
MESSAGES = [{"role": "user", "content": "hi"}]
AUTH = {"Authorization": f"Bearer {KEY_ALL}"}
GRACE_SECONDS = 2
SLACK_SECONDS = 3.0  # CUT_TAIL_SECONDS + scheduling


@pytest.fixture
def own_mock() -> Iterator[RunningMock]:
    with start_in_thread() as running:
        yield running


def _own_gateway(mock: RunningMock, **extra: str) -> Gateway:
    data_dir = Path(tempfile.mkdtemp(prefix="omniroute-shutdown-"))
    env = inherited_env()
    env.update(
        {
            "DJANGO_SETTINGS_MODULE": "omniroute_site.settings",
            "OMNIROUTE_DATA_DIR": str(data_dir),
            "OMNIROUTE_CONFIG_POLL_MS": "200",
            "OMNIROUTE_SHUTDOWN_GRACE_SECONDS": str(GRACE_SECONDS),
            "PYTHONUNBUFFERED": "1",
            **extra,
        }
    )
    gateway = Gateway(data_dir, free_port(), env)
    gateway.start()
    result = gateway.apply(base_config(mock.url))
    assert result.returncode == 0, result.stderr
    return gateway


def _kill(gateway: Gateway) -> None:
    process = gateway.process
    if process is not None and process.poll() is None:
        process.kill()
        process.wait(timeout=10)


def _rows(gateway: Gateway) -> list[dict[str, Any]]:
    return [dict(row) for row in gateway.requests_log()]


class StreamReader(threading.Thread):
    """Reads one streaming request in the background, line by line."""

    def __init__(self, url: str, model: str) -> None:
        super().__init__(daemon=True)
        self.url = url
        self.model = model
        self.events: list[Any] = []
        self.first = threading.Event()
        self.ended_at: float | None = None
        self.error: BaseException | None = None

    def run(self) -> None:
        body = {"model": self.model, "stream": True, "messages": MESSAGES}
        try:
            with (
                httpx.Client(timeout=30) as http,
                http.stream(
                    "POST", f"{self.url}/v1/chat/completions", json=body, headers=AUTH
                ) as response,
            ):
                assert response.status_code == 200
                for line in response.iter_lines():
                    if line.startswith("data: "):
                        payload = line[len("data: ") :]
                        self.events.append(
                            payload if payload == "[DONE]" else json.loads(payload)
                        )
                        self.first.set()
        except BaseException as exc:  # reported by the test
            self.error = exc
        finally:
            self.ended_at = time.monotonic()
            self.first.set()


class Waiting(threading.Thread):
    """One non-streaming request in the background."""

    def __init__(self, url: str, model: str) -> None:
        super().__init__(daemon=True)
        self.url = url
        self.model = model
        self.response: httpx.Response | None = None

    def run(self) -> None:
        self.response = httpx.post(
            f"{self.url}/v1/chat/completions",
            json={"model": self.model, "messages": MESSAGES},
            headers=AUTH,
            timeout=30,
        )


def _ready_status(url: str) -> tuple[int, Any]:
    response = httpx.get(f"{url}/readyz", timeout=2)
    return response.status_code, response.json()


def _open_requests(gateway: Gateway, mock: RunningMock) -> tuple[StreamReader, Waiting]:
    """A finished request, then a slow stream and a hanging request left open."""
    finished = httpx.post(
        f"{gateway.url}/v1/chat/completions",
        json={"model": "pb/m2", "messages": MESSAGES},
        headers=AUTH,
        timeout=10,
    )
    assert finished.status_code == 200
    mock.add("m1", token_delay_ms=200, tokens=500)  # ~100 s of tokens
    mock.add("m3", hang=True)
    stream = StreamReader(gateway.url, "pa/m1")
    stream.start()
    assert stream.first.wait(10), "the stream never started"
    assert stream.error is None
    hanging = Waiting(gateway.url, "pc/m3")
    hanging.start()
    mock.wait_for("pending", count=2, timeout_seconds=5)
    return stream, hanging


def _assert_draining_refuses_new_work(url: str) -> None:
    """uvicorn keeps serving during the drain: readiness fails, new work is refused."""
    deadline = time.monotonic() + 1.0
    status, body = _ready_status(url)
    while status != 503 and time.monotonic() < deadline:
        time.sleep(0.05)
        status, body = _ready_status(url)
    assert (status, body) == (503, {"status": "draining"})
    refused = httpx.post(
        f"{url}/v1/chat/completions",
        json={"model": "pb/m2", "messages": MESSAGES},
        headers=AUTH,
        timeout=5,
    )
    assert refused.status_code == 503
    assert refused.headers["retry-after"] == "1"
    assert refused.json()["error"] == {
        "message": "Gateway is shutting down",
        "type": "api_error",
        "param": None,
        "code": "shutting_down",
    }


def _assert_stream_cut_at_the_grace(stream: StreamReader, signalled: float) -> None:
    stream.join(GRACE_SECONDS + SLACK_SECONDS + 2)
    assert not stream.is_alive(), "the stream was not ended"
    assert stream.error is None, stream.error
    assert stream.ended_at is not None
    assert stream.ended_at - signalled > GRACE_SECONDS - 0.5
    assert stream.ended_at - signalled < GRACE_SECONDS + SLACK_SECONDS
    assert stream.events[-1] == "[DONE]"
    tail = stream.events[-2]
    # spec 09 §7: one choice whose finish_reason is "error"
    assert tail["choices"] == [{"index": 0, "delta": {}, "finish_reason": "error"}]
    assert tail["error"] == {
        "message": "Gateway is shutting down",
        "type": "api_error",
        "code": "shutting_down",
    }
    assert tail["omniroute"]["served_model"] == "pa/m1"


def _assert_every_row_logged(gateway: Gateway) -> None:
    rows = {(r["requested_model"], r["http_status"]): r for r in _rows(gateway)}
    assert len(rows) == 4, rows
    assert rows["pb/m2", 200]["status"] == "success"
    cut = rows["pa/m1", 200]
    assert (cut["status"], cut["reason"]) == ("interrupted", "shutting_down")
    assert cut["client_disconnected"] == 0
    assert [a["result"] for a in gateway.attempts_log(cut["id"])] == ["cancelled"]
    hung = rows["pc/m3", 503]
    assert (hung["status"], hung["reason"]) == ("refused", "shutting_down")
    assert [a["result"] for a in gateway.attempts_log(hung["id"])] == ["cancelled"]
    new = rows["", 503]  # refused before its body was read
    assert (new["status"], new["reason"]) == ("refused", "shutting_down")
    assert not (gateway.data_dir / "log-spill").exists()


def test_sigterm_drains_cuts_open_requests_at_the_grace_and_logs_every_row(
    own_mock,
):
    # The final flush is the only writer: no sync writes, no periodic flush in time.
    gateway = _own_gateway(
        own_mock, OMNIROUTE_LOG_SYNC="false", OMNIROUTE_LOG_FLUSH_MS="60000"
    )
    try:
        stream, hanging = _open_requests(gateway, own_mock)
        assert gateway.process is not None
        gateway.process.send_signal(signal.SIGTERM)
        signalled = time.monotonic()
        _assert_draining_refuses_new_work(gateway.url)
        _assert_stream_cut_at_the_grace(stream, signalled)
        hanging.join(5)
        assert hanging.response is not None
        assert hanging.response.status_code == 503
        assert hanging.response.headers["retry-after"] == "1"
        assert hanging.response.json()["error"]["code"] == "shutting_down"
        gateway.process.wait(timeout=10)
        # uvicorn re-raises the signal it handled once it is done: -SIGTERM.
        assert gateway.process.returncode in (0, -signal.SIGTERM)
        assert time.monotonic() - signalled < 15
    finally:
        _kill(gateway)
    _assert_every_row_logged(gateway)
    log = gateway.log.read_text()
    assert "Traceback" not in log, log
    assert "Application shutdown complete" in log


def test_a_worker_killed_mid_stream_keeps_the_rows_already_flushed(own_mock):
    flush_ms = 200
    gateway = _own_gateway(
        own_mock, OMNIROUTE_LOG_SYNC="false", OMNIROUTE_LOG_FLUSH_MS=str(flush_ms)
    )
    try:
        for _ in range(3):
            done = httpx.post(
                f"{gateway.url}/v1/chat/completions",
                json={"model": "pb/m2", "messages": MESSAGES},
                headers=AUTH,
                timeout=10,
            )
            assert done.status_code == 200
        own_mock.add("m1", token_delay_ms=200, tokens=500)
        stream = StreamReader(gateway.url, "pa/m1")
        stream.start()
        assert stream.first.wait(10)
        # A finished request is on disk one flush interval (+ the write) after it ends.
        time.sleep(5 * flush_ms / 1000)
        assert gateway.process is not None
        gateway.process.send_signal(signal.SIGKILL)
        gateway.process.wait(timeout=10)
        stream.join(5)
    finally:
        _kill(gateway)

    rows = _rows(gateway)
    assert [(r["requested_model"], r["status"]) for r in rows] == [
        ("pb/m2", "success")
    ] * 3
    for row in rows:
        assert len(gateway.attempts_log(row["id"])) == 1
    # The stream never ended, so it never had a row to write: SIGKILL loses it.
    assert stream.error is not None or stream.events[-1] != "[DONE]"
