"""One pub/sub connection and one daemon thread per worker (spec 08 §3.2, §3.4).

The thread subscribes to every channel a listener asked for, hands each message to
its listeners, and runs the periodic jobs registered with ``every`` (the health
mirror's 5 s resync).  Listeners and jobs run on this thread: they must be short.

* **Connect.** Each (re)subscription calls the channel's ``on_connect``: messages
  published while the thread was away are lost, so a listener catches up there
  (the mirror resyncs, the config watcher re-reads the version).
* **Failure.** A Redis error drops the connection, reports to the link (which backs
  the stores off), and the thread reconnects after 1 s, doubling up to 5 s.  Jobs
  do not run while disconnected.
* The pub/sub socket has its own pool: it sits idle in a blocking read, which the
  request path's 50 ms timeout would break; a PING every few idle seconds notices a
  silently dead server.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from typing import Any, Protocol

import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

from providers.redis_backoff import BACKOFF_FIRST_SECONDS, BACKOFF_MAX_SECONDS

logger = logging.getLogger(__name__)

POLL_SECONDS = 0.1  # longest wait for a message before jobs and stop are checked
SOCKET_TIMEOUT_SECONDS = 5.0  # reading one message once it has started arriving
CONNECT_TIMEOUT_SECONDS = 1.0
HEALTH_CHECK_SECONDS = 5  # PING on an idle subscription

Handler = Callable[[bytes], None]


@dataclass(slots=True)
class _Channel:
    on_message: list[Handler] = field(default_factory=list)
    on_connect: list[Callable[[], None]] = field(default_factory=list)


@dataclass(slots=True)
class _Job:
    every_s: float
    fn: Callable[[], None]
    due: float = 0.0


class Link(Protocol):
    """What the thread needs of its link (a ``providers.redis_store.RedisLink``,
    which creates the subscriber): the server's URL, and where to report a
    failure so that the stores back off too."""

    url: str

    def failed(self, op: str, exc: BaseException) -> None: ...


class Subscriber:
    def __init__(self, link: Link, clock: Callable[[], float] = time.monotonic) -> None:
        self._link = link
        self._clock = clock
        self._lock = threading.Lock()
        self._channels: dict[str, _Channel] = {}
        self._jobs: list[_Job] = []
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._client = redis.Redis(
            connection_pool=redis.ConnectionPool.from_url(
                link.url,
                socket_timeout=SOCKET_TIMEOUT_SECONDS,
                socket_connect_timeout=CONNECT_TIMEOUT_SECONDS,
                health_check_interval=HEALTH_CHECK_SECONDS,
                retry=Retry(NoBackoff(), 0),
            )
        )

    def listen(
        self,
        channel: str,
        on_message: Handler,
        on_connect: Callable[[], None] | None = None,
    ) -> None:
        """Call ``on_message(data)`` for each message on ``channel`` (full name)."""
        with self._lock:
            found = self._channels.setdefault(channel, _Channel())
            found.on_message.append(on_message)
            if on_connect is not None:
                found.on_connect.append(on_connect)
        self._start()

    def every(self, seconds: float, fn: Callable[[], None]) -> None:
        """Run ``fn`` on the thread every ``seconds`` while connected."""
        with self._lock:
            self._jobs.append(_Job(seconds, fn, self._clock() + seconds))
        self._start()

    def hurry(self) -> None:
        """Make every job due now (Redis came back: catch up at once)."""
        with self._lock:
            for job in self._jobs:
                job.due = 0.0

    def stop(self, timeout_s: float = 2.0) -> None:
        self._stop.set()
        thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout_s)
        self._client.close()
        self._client.connection_pool.disconnect()

    def _start(self) -> None:
        with self._lock:
            if self._thread is not None or self._stop.is_set():
                return
            self._thread = threading.Thread(
                target=self._run, name="omniroute-redis-pubsub", daemon=True
            )
        self._thread.start()

    def _run(self) -> None:
        delay = BACKOFF_FIRST_SECONDS
        while not self._stop.is_set():
            connected = threading.Event()
            try:
                self._serve(connected)
            except redis.RedisError as exc:
                self._link.failed("subscribe", exc)
            if connected.is_set():
                delay = BACKOFF_FIRST_SECONDS
            if self._stop.wait(delay):
                return
            delay = min(delay * 2, BACKOFF_MAX_SECONDS)

    def _serve(self, connected: threading.Event) -> None:
        pubsub = self._client.pubsub(ignore_subscribe_messages=True)
        subscribed: set[str] = set()
        try:
            while not self._stop.is_set():
                with self._lock:
                    fresh = [c for c in self._channels if c not in subscribed]
                if fresh:
                    pubsub.subscribe(*fresh)
                    subscribed.update(fresh)
                    connected.set()
                    for name in fresh:
                        self._connected(name)
                message = pubsub.get_message(timeout=POLL_SECONDS)
                if message is not None and message.get("type") == "message":
                    self._dispatch(message)
                self._run_jobs()
        finally:
            pubsub.close()

    def _connected(self, channel: str) -> None:
        with self._lock:
            callbacks = list(self._channels[channel].on_connect)
        for callback in callbacks:
            self._safely(callback)

    def _dispatch(self, message: dict[str, Any]) -> None:
        channel = message["channel"]
        name = channel.decode() if isinstance(channel, bytes) else str(channel)
        with self._lock:
            found = self._channels.get(name)
            handlers = list(found.on_message) if found is not None else []
        data = message["data"]
        for handler in handlers:
            self._safely(partial(handler, data))

    def _run_jobs(self) -> None:
        now = self._clock()
        with self._lock:
            due = [job for job in self._jobs if now >= job.due]
            for job in due:
                job.due = now + job.every_s
        for job in due:
            self._safely(job.fn)

    @staticmethod
    def _safely(fn: Callable[[], None]) -> None:
        try:
            fn()
        except Exception:
            # One bad message or job must not stop the listener for every other.
            logger.exception("shared state: pub/sub listener failed")
