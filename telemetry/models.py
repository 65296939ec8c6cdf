"""The request and attempt log (spec 06 §1.1, §1.2).  Written only by the recorder."""

from __future__ import annotations

import uuid

from django.db import models


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
