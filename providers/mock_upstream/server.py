"""Running the socket mock: ``MockServer``, a test thread, and the forever server/CLI.

``start_in_thread()`` runs one on a daemon thread for tests; ``serve()`` / ``main()``
and ``manage.py mock_upstream`` run one forever (uvloop if importable).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import sys
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any, Self

from providers.mock_upstream.core import (
    ANY_MODEL,
    DEFAULT_HOST,
    DEFAULT_MODEL_IDS,
    DEFAULT_PORT,
    LISTEN_BACKLOG,
    THREAD_START_TIMEOUT_SECONDS,
    THREAD_STOP_TIMEOUT_SECONDS,
    WAIT_POLL_SECONDS,
    MockBehaviour,
    MockState,
    Record,
)
from providers.mock_upstream.http1 import _Connection


class MockServer:
    """The mock on a real socket; call ``start()`` inside a running event loop."""

    def __init__(
        self, state: MockState | None = None, *, host: str = DEFAULT_HOST, port: int = 0
    ) -> None:
        self.state = state if state is not None else MockState()
        self.host = host
        self._requested_port = port
        self._server: asyncio.Server | None = None
        self._connections: set[_Connection] = set()

    async def start(self) -> None:
        loop = asyncio.get_running_loop()
        self._server = await loop.create_server(
            lambda: _Connection(self.state, self._connections),
            self.host,
            self._requested_port,
            backlog=LISTEN_BACKLOG,
            reuse_address=True,
        )

    @property
    def port(self) -> int:
        if self._server is None:
            raise RuntimeError("MockServer.start() has not run")
        return int(self._server.sockets[0].getsockname()[1])

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}/v1"

    async def serve_forever(self) -> None:
        if self._server is None:
            await self.start()
        assert self._server is not None
        await self._server.serve_forever()

    async def close(self) -> None:
        """Stop listening; drop open connections (their requests become cancelled)."""
        if self._server is None:
            return
        self._server.close()
        for connection in list(self._connections):
            connection.abort()
        await self._server.wait_closed()


# --- running it -----------------------------------------------------------------------


class RunningMock:
    """A ``MockServer`` on its own daemon thread; helpers act on its state directly."""

    def __init__(
        self,
        server: MockServer,
        loop: asyncio.AbstractEventLoop,
        thread: threading.Thread,
    ) -> None:
        self.server = server
        self.state = server.state
        self.port = server.port
        self.url = server.url
        self._loop = loop
        self._thread = thread

    def add(
        self, model: str = ANY_MODEL, *, times: int | None = None, **knobs: Any
    ) -> MockBehaviour:
        return self.state.add(model, times=times, **knobs)

    def reset(self) -> None:
        self.state.reset()

    def requests(self) -> list[Record]:
        return self.state.requests()

    def wait_for(
        self, outcome: str, *, count: int = 1, timeout_seconds: float = 2.0
    ) -> list[Record]:
        """Poll until ``count`` records have ``outcome``; return them."""
        deadline = time.monotonic() + timeout_seconds
        while True:
            found = [r for r in self.requests() if r["outcome"] == outcome]
            if len(found) >= count:
                return found
            if time.monotonic() >= deadline:
                raise TimeoutError(
                    f"{len(found)}/{count} requests {outcome!r}: {found}"
                )
            time.sleep(WAIT_POLL_SECONDS)

    def stop(self) -> None:
        if self._thread.is_alive():
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(THREAD_STOP_TIMEOUT_SECONDS)

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()


async def _shutdown(server: MockServer) -> None:
    await server.close()
    current = asyncio.current_task()
    tasks = [task for task in asyncio.all_tasks() if task is not current]
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)


def _run_loop(
    server: MockServer,
    loop: asyncio.AbstractEventLoop,
    ready: threading.Event,
    failures: list[OSError],
) -> None:
    asyncio.set_event_loop(loop)
    try:
        loop.run_until_complete(server.start())
    except OSError as exc:  # e.g. the port is taken; start_in_thread re-raises it
        failures.append(exc)
        ready.set()
        loop.close()
        return
    ready.set()
    try:
        loop.run_forever()
    finally:
        loop.run_until_complete(_shutdown(server))
        loop.close()


def start_in_thread(
    host: str = DEFAULT_HOST, port: int = 0, *, state: MockState | None = None
) -> RunningMock:
    """Serve the mock on ``host:port`` (0 = any free port) from a daemon thread."""
    server = MockServer(state, host=host, port=port)
    loop = asyncio.new_event_loop()
    ready = threading.Event()
    failures: list[OSError] = []
    thread = threading.Thread(
        target=_run_loop,
        args=(server, loop, ready, failures),
        name="mock-upstream",
        daemon=True,
    )
    thread.start()
    if not ready.wait(THREAD_START_TIMEOUT_SECONDS):
        raise RuntimeError("the mock upstream did not start in time")
    if failures:
        thread.join()
        raise failures[0]
    return RunningMock(server, loop, thread)


def _loop_factory() -> Callable[[], asyncio.AbstractEventLoop] | None:
    try:
        import uvloop  # optional: a faster loop for benchmarks
    except ImportError:
        return None
    return uvloop.new_event_loop


async def _serve_until_cancelled(
    server: MockServer, on_ready: Callable[[str], None] | None
) -> None:
    await server.start()
    if on_ready is not None:
        on_ready(server.url)
    try:
        await server.serve_forever()
    finally:
        await server.close()


def serve(
    host: str = DEFAULT_HOST,
    port: int = DEFAULT_PORT,
    *,
    state: MockState | None = None,
    on_ready: Callable[[str], None] | None = None,
) -> None:
    """Serve the mock forever in this thread (uvloop if importable); Ctrl-C stops it."""
    server = MockServer(state, host=host, port=port)
    with asyncio.Runner(loop_factory=_loop_factory()) as runner:
        runner.run(_serve_until_cancelled(server, on_ready))


def _announce(url: str) -> None:
    sys.stdout.write(f"mock upstream listening on {url}\n")
    sys.stdout.flush()


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m providers.mock_upstream",
        description="Serve the OmniRoute mock LLM provider (OpenAI + Anthropic).",
    )
    parser.add_argument("--host", default=DEFAULT_HOST)
    parser.add_argument("--port", type=int, default=DEFAULT_PORT)
    parser.add_argument(
        "--models",
        default=",".join(DEFAULT_MODEL_IDS),
        help="comma-separated model ids listed by GET /v1/models",
    )
    return parser


def model_ids_from(text: str) -> tuple[str, ...]:
    return tuple(part.strip() for part in text.split(",") if part.strip())


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    state = MockState(model_ids=model_ids_from(args.models))
    with contextlib.suppress(KeyboardInterrupt):
        serve(args.host, args.port, state=state, on_ready=_announce)
    return 0
