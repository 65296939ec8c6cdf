"""Sending webhook deliveries (spec 02 §12.3): one try, its outcome, the next try.

``deliver(delivery_id)`` makes at most one try:

1. **Claim** the row with a conditional UPDATE (still pending, due, tries left): it
   adds one try and moves ``next_attempt_at`` to a lease end, so a second worker (a
   duplicate Celery message, another process's embedded worker) finds nothing to do.
   A sender that dies mid-try leaves the lease; the row is taken again after it.
2. **POST** the payload's raw JSON with the event, delivery id and
   ``t=<unix seconds>,v1=<hex HMAC-SHA256(secret, "<t>." + raw body)>`` headers,
   10 s timeout, no redirects (``providers.http.sync_post``).
3. **Record** it, only if the claim is still this sender's (same ``tries``): 2xx is
   delivered; 408, 429, 5xx and network errors are pending again after 10, 60, 300,
   1800 s (5 tries in all, then failed); anything else fails at once.  ``last_error``
   is sanitised and never holds the secret.

The next try is scheduled by ``schedule()``: with ``REDIS_URL`` a Celery message
(``countdown`` = the retry delay); otherwise the embedded worker below, which polls due
rows about once a second, so a restart resumes whatever is still pending.  The Celery
task (``telemetry.tasks.deliver_webhook_task``) is a wrapper over ``deliver``, so this
module does not import it: the app's ``ready`` hands it over (``send_through``).
"""

from __future__ import annotations

import hashlib
import hmac
import logging
import threading
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Protocol

import orjson
from django.conf import settings
from django.db import close_old_connections, connections
from django.db.models import F
from django.utils import timezone
from kombu.exceptions import OperationalError as BrokerError

from providers import crypto
from providers.http import SyncReply, sync_post
from telemetry import metrics
from telemetry.models import WebhookDelivery
from telemetry.sanitize import sanitize

logger = logging.getLogger(__name__)

TIMEOUT_SECONDS = 10.0  # spec 02 §12.3: per try
RETRY_DELAYS_SECONDS = (10, 60, 300, 1800)  # after tries 1..4; spec 02 §12.3
MAX_TRIES = len(RETRY_DELAYS_SECONDS) + 1
#: a claimed try may run this long before another worker may take the row again
LEASE_SECONDS = 60
#: a row counts as due this early: a message sent on one host can reach a Celery
#: worker whose clock is behind; well below the shortest retry delay
CLOCK_SKEW_SECONDS = 5
POLL_SECONDS = 1.0  # the embedded worker's look for due rows
POLL_BATCH = 50
RETRYABLE_STATUSES = frozenset({408, 429})
HTTP_SERVER_ERROR = 500
HTTP_OK_RANGE = range(200, 300)
ERROR_BODY_CHARS = 200


class DeliveryTask(Protocol):
    """The Celery task that makes one try (``telemetry.tasks``), as ``enqueue``
    sends it."""

    def apply_async(
        self, args: tuple[int], *, countdown: float | None, retry: bool
    ) -> object: ...


class _Queue:
    """The task ``enqueue`` sends, once the telemetry app is ready."""

    task: DeliveryTask | None = None


def send_through(task: DeliveryTask) -> None:
    """Send the deliveries ``enqueue`` is given as messages of ``task``."""
    _Queue.task = task


@dataclass(frozen=True, slots=True, kw_only=True)
class TryResult:
    """The outcome of one claimed try."""

    status: str  # WebhookDelivery.Status value after the try
    tries: int
    status_code: int | None = None
    retry_in_seconds: int | None = None


def sign(secret: str, body: bytes, timestamp: int) -> str:
    """The ``X-OmniRoute-Signature`` value for ``body`` sent at ``timestamp``."""
    message = f"{timestamp}.".encode() + body
    digest = hmac.new(secret.encode(), message, hashlib.sha256).hexdigest()
    return f"t={timestamp},v1={digest}"


def raw_body(payload: object) -> bytes:
    return orjson.dumps(payload)


def _claim(delivery_id: int, now: datetime) -> int | None:
    """Take the next try of a due row; returns its try number, or None."""
    claimed = WebhookDelivery.objects.filter(
        id=delivery_id,
        status=WebhookDelivery.Status.PENDING,
        next_attempt_at__lte=now + timedelta(seconds=CLOCK_SKEW_SECONDS),
        tries__lt=MAX_TRIES,
    ).update(
        tries=F("tries") + 1, next_attempt_at=now + timedelta(seconds=LEASE_SECONDS)
    )
    if not claimed:
        return None
    return int(
        WebhookDelivery.objects.values_list("tries", flat=True).get(id=delivery_id)
    )


def _error_text(reply: SyncReply, secret: str) -> str:
    if reply.status is None:
        text = reply.error or "network error"
    else:
        head = reply.head[:ERROR_BODY_CHARS].decode("utf-8", "replace").strip()
        text = f"HTTP {reply.status}" + (f": {head}" if head else "")
    if secret:
        text = text.replace(secret, "***")
    return sanitize(text)


def _is_retryable(reply: SyncReply) -> bool:
    status = reply.status
    return status is None or status in RETRYABLE_STATUSES or status >= HTTP_SERVER_ERROR


def _post(delivery: WebhookDelivery, secret: str) -> SyncReply:
    body = raw_body(delivery.payload)
    headers = {
        "Content-Type": "application/json",
        "X-OmniRoute-Event": delivery.event,
        "X-OmniRoute-Delivery": delivery.event_id,
        "X-OmniRoute-Signature": sign(secret, body, int(time.time())),
    }
    return sync_post(
        delivery.endpoint.url,
        content=body,
        headers=headers,
        timeout_s=TIMEOUT_SECONDS,
    )


def _outcome(reply: SyncReply | None, tries: int) -> TryResult:
    Status = WebhookDelivery.Status
    code = reply.status if reply is not None else None
    if reply is not None and code in HTTP_OK_RANGE:
        return TryResult(status=Status.DELIVERED, tries=tries, status_code=code)
    if reply is not None and _is_retryable(reply) and tries < MAX_TRIES:
        return TryResult(
            status=Status.PENDING,
            tries=tries,
            status_code=code,
            retry_in_seconds=RETRY_DELAYS_SECONDS[tries - 1],
        )
    return TryResult(status=Status.FAILED, tries=tries, status_code=code)


def deliver(delivery_id: int) -> TryResult | None:
    """Make the next try of one delivery (None: not due, taken or finished)."""
    tries = _claim(delivery_id, timezone.now())
    if tries is None:
        return None
    delivery = WebhookDelivery.objects.select_related("endpoint").get(id=delivery_id)
    endpoint = delivery.endpoint
    reply: SyncReply | None = None
    secret = ""
    if not endpoint.active:
        error = "endpoint is inactive"
    else:
        try:
            secret = endpoint.secret()
        except crypto.SecretUnreadable:
            error = "the endpoint's secret cannot be decrypted"
        else:
            reply = _post(delivery, secret)
            error = "" if reply.status in HTTP_OK_RANGE else _error_text(reply, secret)
    result = _outcome(reply, tries)
    now = timezone.now()
    WebhookDelivery.objects.filter(
        id=delivery_id, status=WebhookDelivery.Status.PENDING, tries=tries
    ).update(
        status=result.status,
        last_status_code=result.status_code,
        last_error=error,
        next_attempt_at=now + timedelta(seconds=result.retry_in_seconds or 0),
        delivered_at=now if result.status == WebhookDelivery.Status.DELIVERED else None,
    )
    logger.info(
        "webhook delivery %s (%s %s) try %d: %s%s",
        delivery_id,
        delivery.event,
        delivery.event_id,
        tries,
        result.status,
        f" (HTTP {result.status_code})" if result.status_code else "",
    )
    if result.retry_in_seconds is not None and settings.REDIS_URL:
        enqueue([delivery_id], countdown=result.retry_in_seconds)
    return result


def expire_stale_claims() -> int:
    """Fail rows whose last try's sender vanished (lease over, no tries left)."""
    return WebhookDelivery.objects.filter(
        status=WebhookDelivery.Status.PENDING,
        tries__gte=MAX_TRIES,
        next_attempt_at__lte=timezone.now(),
    ).update(
        status=WebhookDelivery.Status.FAILED,
        last_error="the last try never reported back",
    )


def due_delivery_ids(limit: int = POLL_BATCH) -> list[int]:
    rows = WebhookDelivery.objects.filter(
        status=WebhookDelivery.Status.PENDING,
        next_attempt_at__lte=timezone.now(),
        tries__lt=MAX_TRIES,
    ).order_by("next_attempt_at", "id")
    return list(rows.values_list("id", flat=True)[:limit])


def enqueue(delivery_ids: Sequence[int], *, countdown: float | None = None) -> int:
    """One Celery message per delivery; returns how many were sent.

    The first broker failure ends the batch: kombu spends seconds on a dead broker,
    so the rest would only repeat it.  It is logged once and each delivery not sent
    is counted; their rows stay pending.
    """
    task = _Queue.task
    if task is None:
        raise RuntimeError("webhook delivery: no Celery task (telemetry app not ready)")
    for sent, delivery_id in enumerate(delivery_ids):
        try:
            # No publish retries: the connection attempt already takes seconds.
            task.apply_async((delivery_id,), countdown=countdown, retry=False)
        except (BrokerError, OSError) as exc:
            lost = len(delivery_ids) - sent
            metrics.WEBHOOK_ENQUEUE_FAILURES.inc(lost)
            logger.error(  # noqa: TRY400 - one line, no traceback (spec 02 §12.4)
                "webhook deliveries %s: could not enqueue (broker unreachable): %s",
                ", ".join(str(i) for i in delivery_ids[sent:]),
                sanitize(exc),
            )
            return sent
    return len(delivery_ids)


def schedule(delivery_ids: Iterable[int]) -> None:
    """Hand new deliveries on (call after commit): Celery, or the embedded worker."""
    ids = list(delivery_ids)
    if not ids:
        return
    if settings.REDIS_URL:
        enqueue(ids)
        return
    worker.start()
    worker.wake()


class EmbeddedWorker:
    """Delivers due rows in this process when there is no broker (one thread)."""

    def __init__(self) -> None:
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None

    @property
    def is_running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def start(self) -> None:
        """Start the thread once per process; a no-op with a broker."""
        if settings.REDIS_URL or self.is_running:
            return
        with self._lock:
            if self.is_running:
                return
            self._stop.clear()
            self._thread = threading.Thread(
                target=self._run, name="omniroute-webhook-worker", daemon=True
            )
            self._thread.start()

    def wake(self) -> None:
        self._wake.set()

    def stop(self, timeout_s: float = 15.0) -> None:
        self._stop.set()
        self._wake.set()
        thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout_s)

    def run_once(self) -> int:
        """Deliver what is due now; returns the number of tries made."""
        expire_stale_claims()
        made = 0
        for delivery_id in due_delivery_ids():
            if self._stop.is_set():
                break
            if deliver(delivery_id) is not None:
                made += 1
        return made

    def _run(self) -> None:
        try:
            while not self._stop.is_set():
                try:
                    self.run_once()
                except Exception:
                    # A DB outage (or a bad row) must not end the thread; the rows
                    # wait, and a claimed row's lease keeps this from spinning.
                    logger.exception("webhook worker: delivery round failed")
                finally:
                    close_old_connections()
                self._wake.wait(POLL_SECONDS)
                self._wake.clear()
        finally:
            connections.close_all()


worker = EmbeddedWorker()
