"""The request and attempt log (spec 06 §1.1, §1.2), written only by the recorder;
webhook endpoints and their deliveries (spec 02 §12)."""

from __future__ import annotations

import uuid

from django.core.exceptions import ValidationError
from django.core.validators import URLValidator
from django.db import models
from django.utils import timezone

from providers import crypto


class RequestLog(models.Model):
    class Status(models.TextChoices):
        SUCCESS = "success"
        UPSTREAM_FAILED = "upstream_failed"
        REFUSED = "refused"
        INTERRUPTED = "interrupted"
        CLIENT_CLOSED = "client_closed"

    class UsageSource(models.TextChoices):
        UPSTREAM = "upstream"
        ESTIMATED = "estimated"
        NONE = "none"

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    created_at = models.DateTimeField()
    finished_at = models.DateTimeField(null=True)
    api_key = models.ForeignKey(
        "combos.ApiKey", null=True, on_delete=models.SET_NULL, db_constraint=False
    )
    api_key_prefix = models.CharField(max_length=16, blank=True)
    endpoint = models.CharField(max_length=64)
    stream = models.BooleanField(default=False)
    requested_model = models.CharField(max_length=256, blank=True)
    route = models.CharField(max_length=200, blank=True)
    strategy = models.CharField(max_length=64, null=True, blank=True)
    served_model = models.CharField(max_length=300, null=True, blank=True)
    provider = models.CharField(max_length=64, null=True, blank=True)
    connection = models.CharField(max_length=64, null=True, blank=True)
    status = models.CharField(max_length=16, choices=Status.choices)
    http_status = models.PositiveSmallIntegerField()
    reason = models.CharField(max_length=64, null=True, blank=True)
    error_message = models.CharField(max_length=1000, null=True, blank=True)
    attempt_count = models.PositiveIntegerField(default=0)
    failover = models.BooleanField(default=False)
    skips = models.JSONField(null=True, blank=True)
    auto_decision = models.JSONField(null=True, blank=True)
    latency_ms = models.PositiveIntegerField(default=0)
    ttft_ms = models.PositiveIntegerField(null=True, blank=True)
    overhead_ms = models.PositiveIntegerField(null=True, blank=True)
    prompt_tokens = models.PositiveIntegerField(null=True, blank=True)
    completion_tokens = models.PositiveIntegerField(null=True, blank=True)
    cached_tokens = models.PositiveIntegerField(null=True, blank=True)
    usage_source = models.CharField(
        max_length=16, choices=UsageSource.choices, default=UsageSource.NONE
    )
    cost_usd = models.DecimalField(
        max_digits=18, decimal_places=10, null=True, blank=True
    )
    session_id = models.CharField(max_length=200, null=True, blank=True)
    session_source = models.CharField(max_length=64, null=True, blank=True)
    smart_alias = models.CharField(max_length=100, null=True, blank=True)
    smart_mode = models.CharField(max_length=16, null=True, blank=True)
    tier = models.CharField(max_length=8, null=True, blank=True)
    tier_source = models.CharField(max_length=32, null=True, blank=True)
    tier_score = models.IntegerField(null=True, blank=True)
    tier_signals = models.JSONField(null=True, blank=True)
    tier_target = models.CharField(max_length=300, null=True, blank=True)
    client_disconnected = models.BooleanField(default=False)
    node = models.CharField(max_length=200, blank=True)
    config_version = models.BigIntegerField(default=0)

    class Meta:
        ordering = ("-created_at",)
        indexes = (
            models.Index(fields=("created_at",), name="reqlog_created"),
            models.Index(fields=("api_key", "created_at"), name="reqlog_key_created"),
            models.Index(fields=("api_key", "session_id"), name="reqlog_key_session"),
            models.Index(
                fields=("served_model", "created_at"), name="reqlog_model_created"
            ),
        )

    def __str__(self) -> str:
        return f"{self.id} {self.requested_model} {self.http_status}"


class AttemptLog(models.Model):
    class Result(models.TextChoices):
        SUCCESS = "success"
        CONNECTION_ERROR = "connection_error"
        TIMEOUT = "timeout"
        FIRST_TOKEN_TIMEOUT = "first_token_timeout"
        SERVER_ERROR = "server_error"
        RATE_LIMIT = "rate_limit"
        AUTH_ERROR = "auth_error"
        NOT_FOUND = "not_found"
        CLIENT_ERROR = "client_error"
        EMPTY_RESPONSE = "empty_response"
        STREAM_INTERRUPTED = "stream_interrupted"
        CANCELLED = "cancelled"

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    request = models.ForeignKey(
        RequestLog, on_delete=models.CASCADE, related_name="attempts"
    )
    attempt_no = models.PositiveIntegerField()
    started_at = models.DateTimeField()
    provider = models.CharField(max_length=64)
    model = models.CharField(max_length=256)
    connection = models.CharField(max_length=64)
    target = models.CharField(max_length=400)
    slot = models.PositiveIntegerField(default=0)
    via = models.CharField(max_length=200, null=True, blank=True)
    reason = models.CharField(max_length=32, null=True, blank=True)
    detail = models.CharField(max_length=32, null=True, blank=True)
    result = models.CharField(max_length=24, choices=Result.choices)
    http_status = models.PositiveSmallIntegerField(null=True, blank=True)
    latency_ms = models.PositiveIntegerField(null=True, blank=True)
    ttfb_ms = models.PositiveIntegerField(null=True, blank=True)
    ttft_ms = models.PositiveIntegerField(null=True, blank=True)
    prompt_tokens = models.PositiveIntegerField(null=True, blank=True)
    completion_tokens = models.PositiveIntegerField(null=True, blank=True)
    cached_tokens = models.PositiveIntegerField(null=True, blank=True)
    cost_usd = models.DecimalField(
        max_digits=18, decimal_places=10, null=True, blank=True
    )
    billable = models.BooleanField(default=False)
    error_message = models.CharField(max_length=1000, null=True, blank=True)
    cooldown_trigger = models.CharField(max_length=16, null=True, blank=True)
    #: spec 09 §2.11: the client's body went upstream as sent (same dialect)
    passthrough = models.BooleanField(default=False)
    #: spec 09 §2.6: the request paths this attempt's translation left out
    dropped = models.JSONField(default=list, blank=True)

    class Meta:
        ordering = ("request", "attempt_no")
        indexes = (
            models.Index(fields=("started_at",), name="attempt_started"),
            models.Index(
                fields=("provider", "model", "connection", "started_at"),
                name="attempt_target_started",
            ),
        )

    def __str__(self) -> str:
        return f"{self.target} {self.result}"


class WebhookEndpoint(models.Model):
    """A receiver of gateway events (spec 02 §12.3); not part of the YAML file."""

    class Event(models.TextChoices):
        MODEL_FAILOVER = "model_failover"

    #: the event the admin's "Send test event" sends; no endpoint subscribes to it
    PING = "ping"

    url = models.URLField(
        max_length=2000, validators=(URLValidator(schemes=("http", "https")),)
    )
    # A Fernet token (``providers.crypto``); the plaintext never reaches the admin.
    # No part of it is kept in the clear or shown (issue #15): the admin says "set".
    secret_encrypted = models.TextField()
    events = models.JSONField(default=list, blank=True)
    active = models.BooleanField(default=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ("id",)

    def __str__(self) -> str:
        return self.url

    def clean(self) -> None:
        events = self.events if isinstance(self.events, list) else None
        allowed = set(self.Event.values)
        if events is None or any(e not in allowed for e in events):
            raise ValidationError(
                {"events": f"must be a list of: {', '.join(sorted(allowed))}"}
            )
        self.events = [e for e in self.Event.values if e in events]

    def set_secret(self, value: str) -> None:
        self.secret_encrypted = crypto.encrypt(value)

    def secret(self) -> str:
        """The plaintext signing key (raises ``crypto.SecretUnreadable``)."""
        return crypto.decrypt(self.secret_encrypted)

    @property
    def secret_display(self) -> str:
        """What the admin may show: ``set`` or nothing, never any part of the
        secret (as ``Connection.api_key_display``, issue #15)."""
        return "set" if self.secret_encrypted else ""


class WebhookDelivery(models.Model):
    """One event for one endpoint; its pending state is the row (spec 02 §12.3)."""

    class Status(models.TextChoices):
        PENDING = "pending"
        DELIVERED = "delivered"
        FAILED = "failed"

    endpoint = models.ForeignKey(
        WebhookEndpoint, on_delete=models.CASCADE, related_name="deliveries"
    )
    event_id = models.CharField(max_length=64)
    event = models.CharField(max_length=64)
    payload = models.JSONField()
    status = models.CharField(
        max_length=16, choices=Status.choices, default=Status.PENDING
    )
    tries = models.PositiveSmallIntegerField(default=0)
    last_status_code = models.PositiveSmallIntegerField(null=True, blank=True)
    last_error = models.CharField(max_length=1000, blank=True)
    created_at = models.DateTimeField(default=timezone.now)
    # While a try is in flight this holds its lease end, so no other worker takes it.
    next_attempt_at = models.DateTimeField(default=timezone.now)
    delivered_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ("-created_at", "-id")
        constraints = (
            models.UniqueConstraint(
                fields=("endpoint", "event_id"), name="webhook_delivery_once"
            ),
        )
        indexes = (
            models.Index(fields=("status", "next_attempt_at"), name="webhook_due"),
        )
        verbose_name_plural = "webhook deliveries"

    def __str__(self) -> str:
        return f"{self.event} {self.event_id} -> {self.endpoint_id}"


class ReliabilityStat(models.Model):
    """One 24 h statistics row per (provider, model, connection), plus the per-model
    aggregate under ``connection = "*"`` (spec 06 §3.4); replaced by each run of
    ``compute_reliability_24h``.  Null means unknown (below the minimum count)."""

    #: the ``connection`` value of the per-(provider, model) aggregate row
    ALL_CONNECTIONS = "*"

    provider = models.CharField(max_length=64)
    model = models.CharField(max_length=256)
    connection = models.CharField(max_length=64)
    samples = models.PositiveIntegerField()
    failures = models.PositiveIntegerField()
    failure_rate = models.FloatField(null=True, blank=True)
    reliability = models.FloatField(null=True, blank=True)
    good_rate = models.FloatField(null=True, blank=True)
    p50_latency_ms = models.PositiveIntegerField(null=True, blank=True)
    p95_latency_ms = models.PositiveIntegerField(null=True, blank=True)
    p95_ttft_ms = models.PositiveIntegerField(null=True, blank=True)
    window_start = models.DateTimeField()
    window_end = models.DateTimeField()
    computed_at = models.DateTimeField()

    class Meta:
        ordering = ("provider", "model", "connection")
        constraints = (
            models.UniqueConstraint(
                fields=("provider", "model", "connection"),
                name="reliability_stat_target",
            ),
        )
        # Spec 06 §3.1: staff with this permission get "Run now" on the Jobs page.
        # It lives here, on a real table, rather than on a table-less model that
        # ``dumpdata`` or the admin could trip over.
        permissions = (("run_job", "Can run scheduled jobs now"),)

    def __str__(self) -> str:
        return f"{self.provider}/{self.model}@{self.connection}"


class UsageHourly(models.Model):
    """Attempts, failures, latency and usage per hour and (provider, model,
    connection), for the dashboards (spec 06 §3.4, §4.1).  ``hour`` is the UTC hour
    the attempts started in; the reliability job rewrites the last three hours.

    All rows of an hour are written by one run, so they share ``computed_at``; an
    hour holds all its attempts only when that is at or after the hour's end."""

    hour = models.DateTimeField()
    provider = models.CharField(max_length=64)
    model = models.CharField(max_length=256)
    connection = models.CharField(max_length=64)
    #: every attempt, including cancelled ones and client errors
    attempts = models.PositiveIntegerField()
    #: attempts that count for reliability (not ``cancelled``, not ``client_error``)
    samples = models.PositiveIntegerField()
    #: samples whose result is not ``success``
    failures = models.PositiveIntegerField()
    p50_latency_ms = models.PositiveIntegerField(null=True, blank=True)
    p95_latency_ms = models.PositiveIntegerField(null=True, blank=True)
    p95_ttft_ms = models.PositiveIntegerField(null=True, blank=True)
    prompt_tokens = models.PositiveBigIntegerField(default=0)
    completion_tokens = models.PositiveBigIntegerField(default=0)
    cached_tokens = models.PositiveBigIntegerField(default=0)
    #: upstream cost of every attempt that had a known price (billable or not)
    cost_usd = models.DecimalField(
        max_digits=18, decimal_places=10, null=True, blank=True
    )
    #: the run's clock when it wrote the row; null on rows older than this field
    computed_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ("-hour", "provider", "model", "connection")
        constraints = (
            models.UniqueConstraint(
                fields=("hour", "provider", "model", "connection"),
                name="usage_hourly_target",
            ),
        )
        verbose_name_plural = "usage hourly"

    def __str__(self) -> str:
        return (
            f"{self.hour:%Y-%m-%d %H}h {self.provider}/{self.model}@{self.connection}"
        )
