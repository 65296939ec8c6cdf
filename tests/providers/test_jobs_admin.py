"""The admin's Jobs page and job run list (spec 06 §3.1): staff see every job's last
run and next due time; ``telemetry.run_job`` holders get "Run now"."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.contrib.auth.models import Permission, User
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from providers import jobs
from providers.models import CatalogModel, JobRun

pytestmark = pytest.mark.django_db
JOBS_URL = "/admin/providers/jobrun/jobs/"


def _client(user: User) -> Client:
    client = Client()
    client.force_login(user)
    return client


def _may_view_runs(user: User) -> User:
    user.user_permissions.add(
        Permission.objects.get(
            content_type__app_label="providers", codename="view_jobrun"
        )
    )
    return user


@pytest.fixture
def staff() -> Client:
    """Staff who may view job runs (the Jobs page shows them)."""
    return _client(
        _may_view_runs(User.objects.create_user("staff", password="pw", is_staff=True))
    )


@pytest.fixture
def runner() -> Client:
    """Staff who may view job runs and hold ``telemetry.run_job``."""
    user = _may_view_runs(
        User.objects.create_user("runner", password="pw", is_staff=True)
    )
    user.user_permissions.add(
        Permission.objects.get(content_type__app_label="telemetry", codename="run_job")
    )
    return _client(user)


@pytest.fixture
def superuser() -> Client:
    return _client(User.objects.create_superuser("root", password="pw"))


@pytest.fixture
def started(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, tuple]]:
    """Threads the page starts are recorded, not run."""
    calls: list[tuple[str, tuple]] = []

    class FakeThread:
        def __init__(self, *, target, args, name, daemon) -> None:
            self.call = (target.__name__, args)

        def start(self) -> None:
            calls.append(self.call)

    monkeypatch.setattr(jobs.threading, "Thread", FakeThread)
    return calls


def test_the_page_url_is_named() -> None:
    assert reverse("admin:providers_jobs") == JOBS_URL


def test_staff_see_every_job_with_its_last_run_and_next_due_time(staff: Client) -> None:
    started_at = timezone.now() - timedelta(minutes=5)
    JobRun.objects.create(
        job="sync_models_dev",
        started_at=started_at,
        finished_at=started_at + timedelta(seconds=2),
        outcome="success",
        counts={"created": 7, "updated": 0},
        message="models.dev: 7 models (7 created, 0 updated, 0 unchanged, 0 missing)",
        triggered_by="beat",
    )

    response = staff.get(JOBS_URL)

    assert response.status_code == 200
    page = response.content.decode()
    assert 'data-job="sync_models_dev"' in page
    assert "models.dev: 7 models (7 created" in page
    assert "7 created, 0 updated" in page
    assert "2.0 s" in page
    assert "<code>17 */6 * * *</code>" in page
    assert "every 600 s" in page  # compute_reliability_24h, an interval
    assert "Run now" not in page
    statuses = {row["name"]: row for row in response.context["rows"]}
    assert statuses["sync_models_dev"]["outcome"] == "success"
    assert statuses["sync_models_dev"]["next_due"] > started_at
    assert statuses["sync_models_dev"]["next_due"].minute == 17


def test_a_job_that_never_ran_shows_never(staff: Client) -> None:
    page = staff.get(JOBS_URL).content.decode()

    assert "never" in page


def test_anonymous_users_are_sent_to_the_login_page() -> None:
    response = Client().get(JOBS_URL)

    assert response.status_code == 302
    assert "/admin/login/" in response["Location"]


def test_staff_who_may_not_view_job_runs_cannot_open_the_page() -> None:
    """Issue #15 audit: the page showed job messages the Job runs list refused."""
    client = _client(User.objects.create_user("other", password="pw", is_staff=True))

    assert client.get(JOBS_URL).status_code == 403
    assert client.get("/admin/providers/jobrun/").status_code == 403


def test_staff_without_the_permission_cannot_run_a_job(
    staff: Client, started: list
) -> None:
    response = staff.post(JOBS_URL, {"job": "sync_models_dev"})

    assert response.status_code == 403
    assert started == []


def test_run_now_starts_a_background_thread_without_a_broker(
    runner: Client, started: list, settings
) -> None:
    settings.REDIS_URL = None
    page = runner.get(JOBS_URL).content.decode()
    assert "Run now" in page

    response = runner.post(JOBS_URL, {"job": "sync_models_dev"})

    assert response.status_code == 302
    assert response["Location"] == JOBS_URL
    assert started == [("_run_in_thread", ("sync_models_dev", "admin"))]


def test_run_now_enqueues_the_task_when_a_broker_is_set(
    superuser: Client,
    settings,
    monkeypatch: pytest.MonkeyPatch,
    django_capture_on_commit_callbacks,
) -> None:
    settings.REDIS_URL = "redis://127.0.0.1:6379/0"
    sent: list[tuple[str, dict]] = []
    from celery import current_app

    monkeypatch.setattr(
        current_app, "send_task", lambda name, kwargs: sent.append((name, kwargs))
    )

    with django_capture_on_commit_callbacks(execute=True):
        superuser.post(JOBS_URL, {"job": "sync_models_dev"})

    assert sent == [("providers.tasks.sync_models_dev_task", {"triggered_by": "admin"})]


def test_run_now_refuses_an_unknown_job(superuser: Client, started: list) -> None:
    response = superuser.post(JOBS_URL, {"job": "nope"})

    assert response.status_code == 400
    assert started == []


def test_the_background_thread_runs_the_job_as_admin(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    seen: list[tuple[str, str]] = []
    monkeypatch.setattr(
        jobs, "run_job", lambda name, triggered_by: seen.append((name, triggered_by))
    )
    monkeypatch.setattr(jobs.connections, "close_all", lambda: None)

    jobs._run_in_thread("sync_models_dev", "admin")

    assert seen == [("sync_models_dev", "admin")]


def test_job_runs_are_listed_read_only_with_filters(superuser: Client) -> None:
    now = timezone.now()
    JobRun.objects.create(
        job="sync_models_dev", started_at=now, outcome="", triggered_by="admin"
    )

    changelist = superuser.get("/admin/providers/jobrun/")
    add = superuser.get("/admin/providers/jobrun/add/")

    assert changelist.status_code == 200
    page = changelist.content.decode()
    assert "running" in page
    assert reverse("admin:providers_jobs") in page
    assert add.status_code == 403


def test_catalog_rows_are_read_only_and_deleting_one_bumps_the_config(
    superuser: Client,
) -> None:
    from providers import services

    now = timezone.now()
    model = CatalogModel.objects.create(
        source_provider="openai",
        model_id="gpt-x",
        provider_name="OpenAI",
        provider_npm="@ai-sdk/openai",
        provider_doc="d",
        name="GPT X",
        attachment=False,
        reasoning=False,
        tool_call=True,
        release_date="2025-01",
        last_updated="2025-01",
        open_weights=False,
        context_window=1000,
        output_limit=100,
        model_class="fast",
        first_seen_at=now,
        last_seen_at=now,
    )
    version = services.config_version()

    assert superuser.get("/admin/providers/catalogmodel/").status_code == 200
    assert superuser.get("/admin/providers/catalogmodel/add/").status_code == 403
    response = superuser.post(
        f"/admin/providers/catalogmodel/{model.pk}/delete/", {"post": "yes"}
    )

    assert response.status_code == 302
    assert CatalogModel.objects.count() == 0
    assert services.config_version() == version + 1


def test_a_long_message_is_cut_with_its_full_text_in_an_expander(staff: Client) -> None:
    message = "arena: every source failed: " + "GET https://example.invalid/x " * 12
    JobRun.objects.create(
        job="sync_arena_elo",
        started_at=timezone.now(),
        finished_at=timezone.now(),
        outcome="failed",
        message=message,
        triggered_by="beat",
    )

    page = staff.get(JOBS_URL).content.decode()

    row = page.split('data-job="sync_arena_elo"')[1].split("</tr>")[0]
    summary = row.split("<summary")[1].split("</summary>")[0]
    assert f'title="{message}"' in summary
    shown = summary.split(">", 1)[1]
    assert shown.endswith("…")
    assert message.startswith(shown[:-1])
    assert f'<div class="omr-full">{message}</div>' in row


def test_the_counts_wrap_between_items_never_inside_one(staff: Client) -> None:
    JobRun.objects.create(
        job="sync_models_dev",
        started_at=timezone.now(),
        finished_at=timezone.now(),
        outcome="success",
        counts={"created": 7, "updated": 0, "unchanged": 1520, "missing": 3},
        triggered_by="beat",
    )

    page = staff.get(JOBS_URL).content.decode()

    row = page.split('data-job="sync_models_dev"')[1].split("</tr>")[0]
    cell = row.split('<td class="counts">')[1].split("</td>")[0]
    items = cell.split(", ")  # the only places the line may break
    assert sorted(items) == sorted(  # jsonb keeps its own key order
        f'<span class="omr-count">{item}</span>'
        for item in ("7 created", "0 updated", "1520 unchanged", "3 missing")
    )
    style = page.split("#jobs td.counts {")[1].split("}")[0]
    assert "overflow-wrap" not in style
    assert "word-break" not in style
    assert "#jobs td.counts .omr-count { white-space: nowrap; }" in page
