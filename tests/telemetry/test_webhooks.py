"""Webhook delivery of gateway events (spec 02 §12.3, §12.4), against a real receiver.

The receiver is a ``http.server`` on 127.0.0.1 in a thread: it records each request
and answers with scripted statuses.  Tests with background threads use
``transaction=True`` and stop those threads (which close their DB connections) before
the database is flushed.
"""

from __future__ import annotations

import hashlib
import hmac
import logging
import socket
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import timedelta
from email.message import Message
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import orjson
import pytest
from django.contrib.auth.models import User
from django.test import Client
from django.utils import timezone
from kombu.exceptions import OperationalError
from prometheus_client import REGISTRY

from gateway.config.snapshot import build_table
from gateway.kernel.types import RoutingTable, WebhookTarget
from providers.services import config_version
from telemetry import services, webhook_delivery, webhooks
from telemetry.models import WebhookDelivery, WebhookEndpoint
from telemetry.tasks import deliver_webhook_task

SECRET = "whsec-test-0123456789abcdef-SIGNING"
FAILURES_METRIC = "omniroute_webhook_enqueue_failures_total"
Status = WebhookDelivery.Status


@dataclass
class Received:
    headers: Message
    body: bytes


@dataclass
class Receiver:
    url: str = ""
    statuses: list[int] = field(default_factory=list)
    reply_body: bytes = b"ok"
    delay_s: float = 0.0
    requests: list[Received] = field(default_factory=list)


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    """A loopback webhook receiver; answers 200 once ``statuses`` is used up."""
    rec = Receiver()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
            rec.requests.append(Received(headers=self.headers, body=body))
            time.sleep(rec.delay_s)
            status = rec.statuses.pop(0) if rec.statuses else 200
            self.send_response(status)
            self.send_header("Content-Length", str(len(rec.reply_body)))
            self.end_headers()
            self.wfile.write(rec.reply_body)

        def log_message(self, *args: Any) -> None:
            return

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(
        target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
    )
    thread.start()
    rec.url = f"http://127.0.0.1:{server.server_address[1]}/hook"
    yield rec
    server.shutdown()
    server.server_close()
    thread.join(5)


@pytest.fixture
def make_endpoint() -> Callable[..., WebhookEndpoint]:
    def make(
        url: str,
        *,
        secret: str | None = SECRET,
        events: tuple[str, ...] = ("model_failover",),
        active: bool = True,
    ) -> WebhookEndpoint:
        endpoint = WebhookEndpoint(url=url, events=list(events), active=active)
        services.save_webhook_endpoint(endpoint, secret=secret)
        return endpoint

    return make


def failover_event(event_id: str | None = None) -> dict[str, Any]:
    return {
        "event": "model_failover",
        "id": event_id or str(uuid.uuid4()),
        "occurred_at": "2026-01-31T12:00:00.123Z",
        "request_id": "req-1",
        "api_key": "k",
        "endpoint": "/v1/chat/completions",
        "stream": False,
        "to_slot": 1,
        "from_model": "pa/m1",
        "to_model": "pb/m2",
        "reason": "server_error",
        "http_status": 503,
    }


def make_delivery(endpoint: WebhookEndpoint, **overrides: Any) -> WebhookDelivery:
    event = failover_event()
    fields: dict[str, Any] = {
        "endpoint": endpoint,
        "event_id": event["id"],
        "event": event["event"],
        "payload": event,
    }
    return WebhookDelivery.objects.create(**{**fields, **overrides})


def make_due(delivery: WebhookDelivery) -> None:
    WebhookDelivery.objects.filter(id=delivery.id).update(
        next_attempt_at=timezone.now()
    )


def wait_for(predicate: Callable[[], bool], timeout_s: float = 10.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.02)


def closed_port_url() -> str:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return f"http://127.0.0.1:{port}/hook"


def failures() -> float:
    return REGISTRY.get_sample_value(FAILURES_METRIC) or 0.0


@pytest.fixture
def threads(
    monkeypatch: pytest.MonkeyPatch, transactional_db: None, settings: Any
) -> Iterator[tuple[webhooks.Publisher, webhook_delivery.EmbeddedWorker]]:
    """Fresh publisher and embedded worker; stopped before the DB is flushed."""
    settings.REDIS_URL = None
    publisher = webhooks.Publisher()
    worker = webhook_delivery.EmbeddedWorker()
    monkeypatch.setattr(webhooks, "publisher", publisher)
    monkeypatch.setattr(webhook_delivery, "worker", worker)
    yield publisher, worker
    publisher.stop()
    worker.stop()


# --- one try --------------------------------------------------------------------------


@pytest.mark.django_db
def test_the_signature_verifies_with_the_spec_formula(receiver, make_endpoint):
    delivery = make_delivery(make_endpoint(receiver.url))

    webhook_delivery.deliver(delivery.id)

    (request,) = receiver.requests
    signature = request.headers["X-OmniRoute-Signature"]
    t_part, v1_part = signature.split(",")
    assert t_part.startswith("t=")
    assert v1_part.startswith("v1=")
    t = t_part[2:]
    expected = hmac.new(
        SECRET.encode(), f"{t}.".encode() + request.body, hashlib.sha256
    ).hexdigest()
    assert hmac.compare_digest(v1_part[3:], expected)
    assert abs(int(t) - time.time()) <= 5


@pytest.mark.django_db
def test_the_headers_and_body_are_exact(receiver, make_endpoint):
    delivery = make_delivery(make_endpoint(receiver.url))

    webhook_delivery.deliver(delivery.id)

    (request,) = receiver.requests
    headers = request.headers
    assert headers["Content-Type"] == "application/json"
    assert headers["X-OmniRoute-Event"] == "model_failover"
    assert headers["X-OmniRoute-Delivery"] == delivery.event_id
    omniroute = sorted(
        k.lower() for k in headers if k.lower().startswith("x-omniroute")
    )
    assert omniroute == [
        "x-omniroute-delivery",
        "x-omniroute-event",
        "x-omniroute-signature",
    ]
    assert orjson.loads(request.body) == delivery.payload


@pytest.mark.django_db
def test_a_2xx_marks_the_delivery_delivered(receiver, make_endpoint):
    receiver.statuses = [204]
    delivery = make_delivery(make_endpoint(receiver.url))

    result = webhook_delivery.deliver(delivery.id)

    delivery.refresh_from_db()
    assert result is not None
    assert result.status == Status.DELIVERED
    assert (delivery.status, delivery.tries, delivery.last_status_code) == (
        Status.DELIVERED,
        1,
        204,
    )
    assert delivery.delivered_at is not None
    assert delivery.last_error == ""


@pytest.mark.django_db
def test_500_then_200_is_delivered_on_the_second_try(receiver, make_endpoint):
    receiver.statuses = [500, 200]
    delivery = make_delivery(make_endpoint(receiver.url))

    before = timezone.now()
    webhook_delivery.deliver(delivery.id)
    delivery.refresh_from_db()
    assert (delivery.status, delivery.tries, delivery.last_status_code) == (
        Status.PENDING,
        1,
        500,
    )
    assert delivery.next_attempt_at - before >= timedelta(seconds=10)
    assert webhook_delivery.deliver(delivery.id) is None  # not due yet

    make_due(delivery)
    webhook_delivery.deliver(delivery.id)

    delivery.refresh_from_db()
    assert (delivery.status, delivery.tries, delivery.last_status_code) == (
        Status.DELIVERED,
        2,
        200,
    )
    assert len(receiver.requests) == 2


@pytest.mark.django_db
def test_a_400_fails_at_once(receiver, make_endpoint):
    receiver.statuses = [400]
    receiver.reply_body = b"bad payload"
    delivery = make_delivery(make_endpoint(receiver.url))

    webhook_delivery.deliver(delivery.id)

    delivery.refresh_from_db()
    assert (delivery.status, delivery.tries, delivery.last_status_code) == (
        Status.FAILED,
        1,
        400,
    )
    assert delivery.last_error == "HTTP 400: bad payload"


@pytest.mark.django_db
def test_a_redirect_is_not_followed_and_fails(receiver, make_endpoint):
    receiver.statuses = [302]
    delivery = make_delivery(make_endpoint(receiver.url))

    webhook_delivery.deliver(delivery.id)

    delivery.refresh_from_db()
    assert (delivery.status, len(receiver.requests)) == (Status.FAILED, 1)


@pytest.mark.parametrize("status", [408, 429, 502, 503])
@pytest.mark.django_db
def test_408_429_and_5xx_are_retried(receiver, make_endpoint, status):
    receiver.statuses = [status]
    delivery = make_delivery(make_endpoint(receiver.url))

    webhook_delivery.deliver(delivery.id)

    delivery.refresh_from_db()
    assert (delivery.status, delivery.last_status_code) == (Status.PENDING, status)


@pytest.mark.django_db
def test_five_failures_fail_the_delivery_after_the_spec_delays(receiver, make_endpoint):
    receiver.statuses = [500] * 5
    delivery = make_delivery(make_endpoint(receiver.url))

    delays = []
    for _ in range(5):
        make_due(delivery)
        before = timezone.now()
        result = webhook_delivery.deliver(delivery.id)
        assert result is not None
        if result.retry_in_seconds is not None:
            delivery.refresh_from_db()
            delays.append(round((delivery.next_attempt_at - before).total_seconds()))

    delivery.refresh_from_db()
    assert delays == [10, 60, 300, 1800]
    assert (delivery.status, delivery.tries) == (Status.FAILED, 5)
    make_due(delivery)
    assert webhook_delivery.deliver(delivery.id) is None
    assert len(receiver.requests) == 5


@pytest.mark.django_db
def test_a_network_error_is_retried(make_endpoint):
    delivery = make_delivery(make_endpoint(closed_port_url()))

    webhook_delivery.deliver(delivery.id)

    delivery.refresh_from_db()
    assert (delivery.status, delivery.tries) == (Status.PENDING, 1)
    assert delivery.last_status_code is None
    assert delivery.last_error.startswith("ConnectError")


@pytest.mark.django_db
def test_an_inactive_endpoint_fails_its_pending_delivery(receiver, make_endpoint):
    endpoint = make_endpoint(receiver.url)
    delivery = make_delivery(endpoint)
    endpoint.active = False
    services.save_webhook_endpoint(endpoint)

    webhook_delivery.deliver(delivery.id)

    delivery.refresh_from_db()
    assert (delivery.status, delivery.last_error) == (
        Status.FAILED,
        "endpoint is inactive",
    )
    assert receiver.requests == []


@pytest.mark.django_db(transaction=True)
def test_two_workers_never_send_the_same_try(receiver, make_endpoint):
    receiver.delay_s = 0.3
    delivery = make_delivery(make_endpoint(receiver.url))
    results: list[object] = []

    def send() -> None:
        try:
            results.append(webhook_delivery.deliver(delivery.id))
        finally:
            from django.db import connection

            connection.close()

    senders = [threading.Thread(target=send) for _ in range(4)]
    for sender in senders:
        sender.start()
    for sender in senders:
        sender.join(10)

    assert len(receiver.requests) == 1
    assert sum(r is not None for r in results) == 1
    delivery.refresh_from_db()
    assert (delivery.status, delivery.tries) == (Status.DELIVERED, 1)


# --- the secret ----------------------------------------------------------------------


@pytest.fixture
def admin_client() -> Client:
    user = User.objects.create_superuser("root", "root@example.com", "pw")
    client = Client()
    client.force_login(user)
    return client


@pytest.mark.django_db
def test_the_secret_never_appears_in_admin_html_logs_or_last_error(
    receiver, make_endpoint, admin_client, caplog
):
    caplog.set_level(logging.DEBUG)
    receiver.statuses = [500]
    receiver.reply_body = f"invalid signature for secret {SECRET}".encode()
    endpoint = make_endpoint(receiver.url)
    delivery = make_delivery(endpoint)

    webhook_delivery.deliver(delivery.id)

    delivery.refresh_from_db()
    assert SECRET not in delivery.last_error
    assert delivery.last_error.startswith("HTTP 500: invalid signature for secret")
    assert SECRET not in endpoint.secret_encrypted
    pages = [
        "/admin/telemetry/webhookendpoint/",
        f"/admin/telemetry/webhookendpoint/{endpoint.id}/change/",
        "/admin/telemetry/webhookdelivery/",
        f"/admin/telemetry/webhookdelivery/{delivery.id}/change/",
    ]
    for page in pages:
        response = admin_client.get(page)
        assert response.status_code == 200, page
        html = response.content.decode()
        assert SECRET not in html, page
        assert endpoint.secret_encrypted not in html, page
    assert SECRET not in caplog.text


@pytest.mark.django_db
def test_the_admin_says_only_whether_a_signing_secret_is_set(
    make_endpoint, admin_client
):
    endpoint = make_endpoint("https://hooks.example.com/a")
    unset = WebhookEndpoint.objects.create(url="https://hooks.example.com/b")

    listing = admin_client.get("/admin/telemetry/webhookendpoint/").content.decode()
    change = admin_client.get(
        f"/admin/telemetry/webhookendpoint/{endpoint.id}/change/"
    ).content.decode()

    for html in (listing, change):
        assert "signing secret set" in html
        assert SECRET[-4:] not in html  # no part of it, as for a provider key
        assert "••••" not in html
    assert "signing secret not set" in listing
    assert unset.secret_display == ""
    assert not hasattr(endpoint, "secret_last4")  # nothing of it kept in the clear
    stored = WebhookEndpoint.objects.filter(pk=endpoint.pk).values().get()
    assert not any(SECRET[-4:] in str(value) for value in stored.values())


@pytest.mark.django_db
def test_no_export_or_rest_resource_carries_a_webhook_secret(
    make_endpoint, admin_client
):
    from combos.config_export import export_yaml

    make_endpoint("https://hooks.example.com/a")

    exported = export_yaml()  # webhooks are not part of the YAML file
    api = admin_client.get("/api/webhooks/")

    assert SECRET[-4:] not in exported
    assert "hooks.example.com" not in exported
    assert api.status_code == 404  # the REST API has no webhook resource
    assert SECRET[-4:] not in api.content.decode()


@pytest.mark.django_db
def test_saving_an_endpoint_in_the_admin_bumps_the_config_revision(admin_client):
    before = config_version()

    response = admin_client.post(
        "/admin/telemetry/webhookendpoint/add/",
        {
            "url": "https://hooks.example.com/omniroute",
            "events": ["model_failover"],
            "active": "on",
            "secret": "",
        },
    )

    assert response.status_code == 200  # the one-time secret page
    endpoint = WebhookEndpoint.objects.get()
    assert config_version() == before + 1
    generated = endpoint.secret()
    assert len(generated) == 64
    assert int(generated, 16) >= 0
    assert generated in response.content.decode()
    assert endpoint.events == ["model_failover"]

    change = f"/admin/telemetry/webhookendpoint/{endpoint.id}/change/"
    assert generated not in admin_client.get(change).content.decode()
    response = admin_client.post(
        change, {"url": endpoint.url, "events": [], "active": "on", "secret": ""}
    )
    assert response.status_code == 302
    endpoint.refresh_from_db()
    assert endpoint.secret() == generated  # empty keeps the stored secret
    assert endpoint.events == []
    assert config_version() == before + 2


@pytest.mark.django_db
def test_the_admin_refuses_a_non_http_url_and_unknown_events(admin_client):
    response = admin_client.post(
        "/admin/telemetry/webhookendpoint/add/",
        {"url": "ftp://hooks.example.com/x", "events": ["ping"], "active": "on"},
    )

    assert response.status_code == 200
    errors = response.context["adminform"].form.errors
    assert set(errors) == {"url", "events"}
    assert not WebhookEndpoint.objects.exists()


@pytest.mark.django_db
def test_the_delivery_admin_is_read_only_with_filters(admin_client, make_endpoint):
    make_delivery(make_endpoint("https://hooks.example.com/a"))
    make_delivery(make_endpoint("https://hooks.example.com/b"))

    listing = admin_client.get("/admin/telemetry/webhookdelivery/?status=pending")
    add = admin_client.get("/admin/telemetry/webhookdelivery/add/")

    assert listing.status_code == 200
    assert add.status_code == 403
    filters = [spec.title for spec in listing.context["cl"].filter_specs]
    assert filters == ["status", "event", "endpoint"]


# --- publishing ----------------------------------------------------------------------


@pytest.mark.django_db(transaction=True)
def test_publishing_with_no_subscriber_does_nothing(threads, make_endpoint):
    publisher, worker = threads
    make_endpoint("https://hooks.example.com/a", events=())
    make_endpoint("https://hooks.example.com/b", active=False)
    table = build_table()

    webhooks.publish_events([failover_event()], table)
    webhooks.publish_events([failover_event()], RoutingTable())

    assert publisher._thread is None
    assert not worker.is_running
    assert not WebhookDelivery.objects.exists()


@pytest.mark.django_db(transaction=True)
def test_publishing_creates_one_row_per_endpoint_once_per_event_id(
    threads, receiver, make_endpoint
):
    publisher, _ = threads
    first = make_endpoint(receiver.url)
    second = make_endpoint(receiver.url)
    make_endpoint(receiver.url, events=())
    event = failover_event()

    webhooks.publish_events([event], build_table())
    webhooks.publish_events([event], build_table())
    publisher.stop()  # writes what was queued

    rows = WebhookDelivery.objects.filter(event_id=event["id"])
    assert sorted(rows.values_list("endpoint_id", flat=True)) == [first.id, second.id]
    wait_for(lambda: rows.filter(status=Status.DELIVERED).count() == 2)
    assert len(receiver.requests) == 2


@pytest.mark.django_db(transaction=True)
def test_the_embedded_worker_retries_until_delivered(
    threads, receiver, make_endpoint, monkeypatch
):
    monkeypatch.setattr(webhook_delivery, "RETRY_DELAYS_SECONDS", (0, 0, 0, 0))
    receiver.statuses = [500, 503]
    make_endpoint(receiver.url)
    event = failover_event()

    webhooks.publish_events([event], build_table())

    row = WebhookDelivery.objects.filter(event_id=event["id"])
    wait_for(lambda: row.filter(status=Status.DELIVERED).exists())
    assert row.get().tries == 3
    assert [r.headers["X-OmniRoute-Delivery"] for r in receiver.requests] == [
        event["id"]
    ] * 3


@pytest.mark.django_db(transaction=True)
def test_a_restarted_process_resumes_pending_rows(threads, receiver, make_endpoint):
    _, worker = threads
    delivery = make_delivery(make_endpoint(receiver.url), tries=1)

    webhooks.start()

    assert worker.is_running
    wait_for(lambda: WebhookDelivery.objects.get(id=delivery.id).status == "delivered")
    assert WebhookDelivery.objects.get(id=delivery.id).tries == 2


def test_a_full_queue_drops_and_counts_without_raising(monkeypatch, caplog):
    publisher = webhooks.Publisher(maxsize=1)
    monkeypatch.setattr(publisher, "_start", lambda: None)  # nobody drains it
    monkeypatch.setattr(webhooks, "publisher", publisher)
    table = RoutingTable(
        webhooks=(
            WebhookTarget(endpoint_id=1, events=frozenset({"model_failover"})),
            WebhookTarget(endpoint_id=2, events=frozenset({"model_failover"})),
        )
    )
    before = failures()

    webhooks.publish_events([failover_event(), failover_event()], table)

    assert failures() == before + 2
    assert [r.levelname for r in caplog.records] == ["ERROR"]


def test_subscribers_come_from_the_table_only():
    table = RoutingTable(
        webhooks=(
            WebhookTarget(endpoint_id=1, events=frozenset({"model_failover"})),
            WebhookTarget(endpoint_id=2, events=frozenset()),
            WebhookTarget(
                endpoint_id=3, events=frozenset({"model_failover"}), active=False
            ),
        )
    )

    assert webhooks.subscribers(table, "model_failover") == (1,)
    assert webhooks.subscribers(table, "ping") == ()


# --- Celery ---------------------------------------------------------------------------


@pytest.mark.django_db
def test_the_celery_task_delivers_when_called_directly(receiver, make_endpoint):
    endpoint = make_endpoint(receiver.url)
    first, second = make_delivery(endpoint), make_delivery(endpoint)

    deliver_webhook_task.run(first.id)
    deliver_webhook_task.apply(args=(second.id,))
    deliver_webhook_task.run(first.id)  # a duplicate message sends nothing

    statuses = WebhookDelivery.objects.values_list("status", flat=True)
    assert list(statuses) == [Status.DELIVERED, Status.DELIVERED]
    assert len(receiver.requests) == 2


@pytest.mark.django_db
def test_with_a_broker_a_retry_is_enqueued_with_its_countdown(
    receiver, make_endpoint, monkeypatch, settings
):
    settings.REDIS_URL = "redis://127.0.0.1:6379/0"
    sent: list[tuple[Any, Any]] = []
    monkeypatch.setattr(
        deliver_webhook_task,
        "apply_async",
        lambda args, countdown=None, retry=True: sent.append((args, countdown)),
    )
    receiver.statuses = [503]
    delivery = make_delivery(make_endpoint(receiver.url))

    webhook_delivery.deliver(delivery.id)

    assert sent == [((delivery.id,), 10)]


@pytest.mark.django_db
def test_new_deliveries_are_enqueued_after_commit_with_a_broker(
    make_endpoint, monkeypatch, settings, django_capture_on_commit_callbacks
):
    settings.REDIS_URL = "redis://127.0.0.1:6379/0"
    sent: list[Any] = []
    monkeypatch.setattr(
        deliver_webhook_task,
        "apply_async",
        lambda args, countdown=None, retry=True: sent.append(args),
    )
    endpoint = make_endpoint("https://hooks.example.com/a")

    with django_capture_on_commit_callbacks(execute=True):
        created = services.create_deliveries(failover_event(), [endpoint.id])
        assert sent == []

    assert sent == [(created[0],)]


@pytest.mark.django_db
def test_an_unreachable_broker_costs_one_error_line_and_a_count(
    make_endpoint, monkeypatch, settings, caplog
):
    settings.REDIS_URL = "redis://127.0.0.1:1/0"

    def refuse(*args: Any, **kwargs: Any) -> None:
        raise OperationalError("Error 111 connecting to 127.0.0.1:1.")

    monkeypatch.setattr(deliver_webhook_task, "apply_async", refuse)
    before = failures()

    sent = webhook_delivery.enqueue([41])

    assert sent == 0
    assert failures() == before + 1
    errors = [r for r in caplog.records if r.levelno >= logging.ERROR]
    assert len(errors) == 1
    assert "could not enqueue" in errors[0].getMessage()


# --- snapshot and admin action ------------------------------------------------------


@pytest.mark.django_db
def test_the_snapshot_includes_active_endpoints_only(make_endpoint):
    active = make_endpoint("https://hooks.example.com/a")
    make_endpoint("https://hooks.example.com/b", active=False)
    silent = make_endpoint("https://hooks.example.com/c", events=())

    table = build_table()

    assert table.webhooks == (
        WebhookTarget(endpoint_id=active.id, events=frozenset({"model_failover"})),
        WebhookTarget(endpoint_id=silent.id, events=frozenset()),
    )


@pytest.mark.django_db(transaction=True)
def test_send_test_event_queues_a_ping_the_worker_sends(
    threads, receiver, make_endpoint, admin_client
):
    endpoint = make_endpoint(receiver.url, events=())
    inactive = make_endpoint(receiver.url, active=False)

    response = admin_client.post(
        "/admin/telemetry/webhookendpoint/",
        {
            "action": "send_test_event",
            "_selected_action": [endpoint.id, inactive.id],
        },
        follow=True,
    )

    assert "Test event queued for 1 endpoint(s) (1 inactive endpoint(s) skipped)" in (
        response.content.decode()
    )
    ping = WebhookDelivery.objects.get()
    assert (ping.endpoint_id, ping.event) == (endpoint.id, "ping")
    assert set(ping.payload) == {"event", "id", "occurred_at"}
    wait_for(lambda: WebhookDelivery.objects.get().status == Status.DELIVERED)
    (request,) = receiver.requests
    assert request.headers["X-OmniRoute-Event"] == "ping"
    assert request.headers["X-OmniRoute-Delivery"] == ping.payload["id"]


@pytest.mark.django_db
def test_a_typed_secret_survives_a_failed_save_and_the_created_page_is_not_reposted(
    admin_client,
):
    typed = "whsec-typed-secret-abcdef123456"
    failed = admin_client.post(
        "/admin/telemetry/webhookendpoint/add/",
        {"url": "not a url", "secret": typed, "events": ["model_failover"]},
    )
    assert failed.status_code == 200
    assert f'value="{typed}"' in failed.content.decode()  # kept, not lost
    assert WebhookEndpoint.objects.count() == 0

    # a generated secret is shown once, on a page that a reload does not re-post
    created = admin_client.post(
        "/admin/telemetry/webhookendpoint/add/",
        {"url": "https://hooks.example.com/new", "events": ["model_failover"]},
    )
    endpoint = WebhookEndpoint.objects.get()
    html = created.content.decode()
    assert 'id="webhook-secret"' in html
    change_url = f"/admin/telemetry/webhookendpoint/{endpoint.pk}/change/"
    assert f'history.replaceState(null, "", "{change_url}")' in html
    # the change page never renders the stored secret
    change = admin_client.get(change_url)
    assert 'name="secret"' in change.content.decode()
    assert 'name="secret" value=' not in change.content.decode()
