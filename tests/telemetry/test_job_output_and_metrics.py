"""Spec 06: job command output, run counts and metric details.

- §3.1 commands: one summary line goes to stdout; the application log also goes to
  stdout (spec 08), so a command's own run must not add a second line there;
- §3.1 ``JobRun.counts``: every run of a sync job carries the six counts;
- §2 rule 3: ``omniroute_metrics_label_overflow_total{metric}`` names the metric as
  the spec does (``…_total`` for counters);
- §2 ``omniroute_log_buffer_rows{table}``: both tables' waiting rows.
"""

from __future__ import annotations

import logging
from io import StringIO
from pathlib import Path

import pytest
from django.core.management import call_command
from django.db import OperationalError
from prometheus_client import REGISTRY, CollectorRegistry, Counter, Histogram

from providers.jobs import TriggeredBy, run_job
from providers.models_dev import JOB_NAME
from telemetry import metrics
from telemetry import recorder as recorder_module

FIXTURE = Path(__file__).parents[1] / "fixtures" / "models-dev-sample.json"
SIX_COUNTS = {"created", "updated", "unchanged", "missing", "rejected", "deleted"}


@pytest.fixture
def small_minimum(settings):
    settings.OMNIROUTE_MODELS_DEV_MIN_PROVIDERS = 1
    return settings


def job_log_lines(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [
        r.getMessage()
        for r in caplog.records
        if r.name == "providers.jobs" and r.levelno >= logging.INFO
    ]


@pytest.mark.django_db
def test_a_command_run_logs_nothing_beside_its_summary_line(small_minimum, caplog):
    caplog.set_level(logging.INFO)
    out = StringIO()

    call_command(
        "sync_models_dev", "--source", str(FIXTURE), "--no-progress", stdout=out
    )

    (line,) = out.getvalue().splitlines()
    assert line.startswith("models.dev: 7 models (7 created, 0 updated")
    assert job_log_lines(caplog) == []


@pytest.mark.django_db
def test_a_failed_command_run_is_reported_by_its_summary_line_only(caplog):
    caplog.set_level(logging.INFO)
    out = StringIO()

    with pytest.raises(Exception, match="failed") as raised:
        call_command("sync_models_dev", "--source", "/nonexistent/api.json", stdout=out)

    assert getattr(raised.value, "returncode", None) == 1
    assert out.getvalue().startswith("sync_models_dev: failed: cannot read")
    assert job_log_lines(caplog) == []


@pytest.mark.django_db
def test_a_scheduled_run_is_still_logged(small_minimum, caplog):
    caplog.set_level(logging.INFO)

    run_job(JOB_NAME, triggered_by=TriggeredBy.BEAT, source=str(FIXTURE))

    assert job_log_lines(caplog) == [
        "job sync_models_dev: success models.dev: 7 models (7 created, 0 updated, "
        "0 unchanged, 0 missing)"
    ]


@pytest.mark.django_db
def test_an_unchanged_models_dev_run_records_all_six_counts(small_minimum):
    run_job(JOB_NAME, source=str(FIXTURE))

    second = run_job(JOB_NAME, source=str(FIXTURE))

    assert second.outcome == "unchanged"
    assert second.counts == dict.fromkeys(SIX_COUNTS, 0)


def test_label_overflow_names_a_counter_with_its_total_suffix(monkeypatch):
    registry = CollectorRegistry()
    counter = Counter("omniroute_audit_folded_total", "t", ("a",), registry=registry)
    histogram = Histogram(
        "omniroute_audit_folded_seconds", "t", ("a",), registry=registry
    )
    monkeypatch.setattr(metrics, "_MAX_SERIES", 0)

    metrics.bounded(counter, "x").inc()
    metrics.bounded(histogram, "x").observe(1)

    def folded(name: str) -> float | None:
        return REGISTRY.get_sample_value(
            "omniroute_metrics_label_overflow_total", {"metric": name}
        )

    assert folded("omniroute_audit_folded_total") == 1
    assert folded("omniroute_audit_folded_seconds") == 1
    assert (
        registry.get_sample_value("omniroute_audit_folded_total", {"a": "other"}) == 1
    )


@pytest.mark.django_db
def test_the_buffer_gauge_counts_waiting_attempt_rows_too(
    settings, tmp_path, monkeypatch, make_recorder, make_request_row, make_attempt_row
):
    settings.OMNIROUTE_DATA_DIR = tmp_path
    settings.OMNIROUTE_LOG_FLUSH_MS = 3_600_000
    settings.OMNIROUTE_LOG_BUFFER_ROWS = 100

    def down(entries):
        raise OperationalError("connection refused")

    monkeypatch.setattr(recorder_module, "write_rows", down)
    recorder = make_recorder()
    for attempts in (2, 1):
        request = make_request_row()
        rows = [make_attempt_row(request["id"], n) for n in range(1, attempts + 1)]
        recorder.record(request, rows)

    assert recorder.flush_once() is False

    def waiting(table: str) -> float | None:
        return REGISTRY.get_sample_value("omniroute_log_buffer_rows", {"table": table})

    assert waiting("request_log") == 2
    assert waiting("attempt_log") == 3
