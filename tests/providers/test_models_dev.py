"""sync_models_dev on the models.dev fixture (spec 06 §3.2 "Acceptance (fixture)").

The fixture holds 4 providers and 7 models; the sanity minimum is lowered to 1 (as
the fixtures README asks).  Edge cases are made by editing a copy inside the test.
"""

from __future__ import annotations

import copy
import io
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
from django.core.management import CommandError, call_command
from django.utils import timezone

from providers import http, models_dev, services
from providers.models import CatalogModel, JobLock, JobRun
from providers.models_dev import parse
from tests.providers.conftest import MODELS_DEV_FIXTURE

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def _fixture_sized_minimum(settings) -> None:
    settings.OMNIROUTE_MODELS_DEV_MIN_PROVIDERS = 1


def sync(source: Path | str = MODELS_DEV_FIXTURE, *args: str) -> str:
    """Run the command; return its stdout (raises CommandError on exit codes 1, 3)."""
    out = io.StringIO()
    call_command(
        "sync_models_dev",
        "--source",
        str(source),
        "--no-progress",
        *args,
        stdout=out,
        stderr=io.StringIO(),
    )
    return out.getvalue()


def row(model_id: str) -> CatalogModel:
    return CatalogModel.objects.get(model_id=model_id)


# Acceptance.


def test_the_first_run_creates_seven_rows_and_prints_one_summary_line() -> None:
    out = sync()

    assert CatalogModel.objects.count() == 7
    (line,) = out.splitlines()
    assert line.startswith(
        "models.dev: 7 models (7 created, 0 updated, 0 unchanged, 0 missing) in "
    )
    assert line.endswith(" s")
    run = JobRun.objects.get()
    assert (run.outcome, run.triggered_by) == ("success", "command")
    assert run.counts == {
        "created": 7,
        "updated": 0,
        "unchanged": 0,
        "missing": 0,
        "rejected": 0,
        "deleted": 0,
    }
    assert len(run.payload_sha256) == 64


def test_a_second_run_is_unchanged_and_writes_nothing() -> None:
    sync()
    seen = dict(CatalogModel.objects.values_list("model_id", "last_seen_at"))
    version = services.config_version()

    out = sync()

    assert out.startswith("models.dev: unchanged")
    assert list(JobRun.objects.values_list("outcome", flat=True)) == [
        "unchanged",
        "success",
    ]
    assert dict(CatalogModel.objects.values_list("model_id", "last_seen_at")) == seen
    assert services.config_version() == version


def test_model_classes_follow_the_spec_rule() -> None:
    sync()

    assert dict(CatalogModel.objects.values_list("model_id", "model_class")) == {
        "claude-sonnet-4-5": "premium",
        "claude-haiku-4-5": "premium",
        "gpt-5": "premium",
        "gemini-2.5-pro": "premium",
        "deepseek-reasoner": "premium",
        "gpt-4o-mini": "standard",
        "gemini-2.0-flash": "standard",
    }


def test_capabilities_and_reasoning_efforts_are_derived() -> None:
    sync()

    assert row("deepseek-reasoner").capabilities == ["tools", "reasoning"]
    assert row("gpt-5").capabilities == ["tools", "vision", "reasoning", "json"]
    assert row("claude-sonnet-4-5").capabilities == ["tools", "vision", "reasoning"]
    assert row("gpt-4o-mini").capabilities == ["tools", "vision", "json"]
    assert row("gpt-5").reasoning_efforts == ["minimal", "low", "medium", "high"]
    assert row("claude-sonnet-4-5").reasoning_efforts == []
    assert row("deepseek-reasoner").reasoning_efforts == []


def test_gemini_2_0_flash_is_stored_deprecated() -> None:
    sync()

    assert row("gemini-2.0-flash").status == "deprecated"
    assert row("gemini-2.0-flash").is_deprecated
    assert row("gemini-2.5-pro").status == ""


def test_every_read_field_is_stored() -> None:
    sync()

    gpt5 = row("gpt-5")
    assert (gpt5.source_provider, gpt5.provider_name, gpt5.provider_npm) == (
        "openai",
        "OpenAI",
        "@ai-sdk/openai",
    )
    assert gpt5.provider_doc == "https://platform.openai.com/docs/models"
    assert (gpt5.name, gpt5.family, gpt5.knowledge) == ("GPT-5", "gpt", "2024-09-30")
    assert (gpt5.release_date, gpt5.last_updated) == ("2025-08-07", "2025-08-07")
    assert (gpt5.attachment, gpt5.reasoning, gpt5.tool_call) == (True, True, True)
    assert (gpt5.structured_output, gpt5.temperature, gpt5.open_weights) == (
        True,
        False,
        False,
    )
    assert (gpt5.input_modalities, gpt5.output_modalities) == (
        ["text", "image"],
        ["text"],
    )
    assert (gpt5.context_window, gpt5.input_limit, gpt5.output_limit) == (
        400_000,
        272_000,
        128_000,
    )
    assert (gpt5.input_cost, gpt5.output_cost, gpt5.cache_read_cost) == (
        1.25,
        10.0,
        0.125,
    )
    assert gpt5.cache_write_cost is None
    assert gpt5.reasoning_options == [
        {"type": "effort", "values": ["minimal", "low", "medium", "high"]}
    ]
    deepseek = row("deepseek-reasoner")
    assert deepseek.provider_api == "https://api.deepseek.com"
    assert deepseek.knowledge == "2025-09"  # month-only dates stay text
    assert deepseek.structured_output is None
    claude = row("claude-sonnet-4-5")
    assert (claude.cache_write_cost, claude.input_limit) == (3.75, None)


def test_context_tiers_are_stored_and_the_legacy_copy_ignored() -> None:
    sync()

    assert row("gemini-2.5-pro").cost_tiers == [
        {
            "type": "context",
            "size": 200_000,
            "input": 2.5,
            "output": 15.0,
            "cache_read": 0.25,
        }
    ]


def test_removing_google_marks_both_rows_missing_and_keeps_their_prices(
    models_dev: dict[str, Any], write_payload: Callable[[Any], Path]
) -> None:
    sync()
    del models_dev["google"]

    out = sync(write_payload(models_dev))

    assert "(0 created, 0 updated, 5 unchanged, 2 missing)" in out
    google = CatalogModel.objects.filter(source_provider="google")
    assert google.count() == 2
    assert all(r.missing_since is not None for r in google)
    assert row("gemini-2.5-pro").input_cost == 1.25
    assert row("gemini-2.0-flash").output_cost == 0.4
    assert CatalogModel.objects.filter(missing_since__isnull=True).count() == 5


def test_missing_rows_keep_their_first_missing_time_and_clear_on_return(
    models_dev: dict[str, Any], write_payload: Callable[[Any], Path]
) -> None:
    sync()
    without_google = copy.deepcopy(models_dev)
    del without_google["google"]
    sync(write_payload(without_google))
    first_missing = row("gemini-2.5-pro").missing_since
    without_google["openai"]["models"]["gpt-5"]["name"] = "GPT-5 (renamed)"

    sync(write_payload(without_google))
    assert row("gemini-2.5-pro").missing_since == first_missing

    out = sync(write_payload(models_dev))

    assert "(0 created, 3 updated, 4 unchanged, 0 missing)" in out
    assert row("gemini-2.5-pro").missing_since is None
    assert row("gpt-5").name == "GPT-5"


def test_a_changed_price_counts_one_update(
    models_dev: dict[str, Any], write_payload: Callable[[Any], Path]
) -> None:
    sync()
    first_seen = row("gpt-5").first_seen_at
    models_dev["openai"]["models"]["gpt-5"]["cost"]["input"] = 1.5

    out = sync(write_payload(models_dev))

    assert "(0 created, 1 updated, 6 unchanged, 0 missing)" in out
    assert row("gpt-5").input_cost == 1.5
    assert row("gpt-5").first_seen_at == first_seen
    assert row("gpt-5").last_seen_at > first_seen


def test_a_successful_apply_bumps_the_config_revision() -> None:
    before = services.config_version()

    sync()

    assert services.config_version() == before + 1


# Sanity, bad entries, edge cases.


def test_fewer_providers_than_the_minimum_fails_and_writes_nothing(settings) -> None:
    settings.OMNIROUTE_MODELS_DEV_MIN_PROVIDERS = 50

    with pytest.raises(CommandError) as caught:
        sync()

    assert caught.value.returncode == 1
    assert CatalogModel.objects.count() == 0
    run = JobRun.objects.get()
    assert run.outcome == "failed"
    assert run.message == (
        "models.dev: 4 providers, fewer than the minimum of 50; nothing written"
    )


@pytest.mark.parametrize("payload", [[1, 2], "text", 42])
def test_a_payload_that_is_not_an_object_fails(
    payload: Any, write_payload: Callable[[Any], Path]
) -> None:
    with pytest.raises(CommandError):
        sync(write_payload(payload))

    assert CatalogModel.objects.count() == 0
    assert JobRun.objects.get().message == "models.dev: payload is not a JSON object"


def test_invalid_json_fails(tmp_path: Path) -> None:
    path = tmp_path / "bad.json"
    path.write_text("{not json", encoding="utf-8")

    with pytest.raises(CommandError):
        sync(path)

    assert JobRun.objects.get().message.startswith("models.dev: payload is not JSON")


@pytest.mark.parametrize(
    ("path", "value"),
    [
        (("tool_call",), "yes"),
        (("limit", "context"), "1M"),
        (("limit", "context"), True),
        (("limit",), None),
        (("modalities", "input"), "text"),
        (("release_date",), 20250807),
        (("cost", "input"), "1.25"),
        (("cost", "output"), -1),
        (("reasoning_options",), {"type": "effort"}),
        (("id",), "x" * 257),
    ],
)
def test_a_model_with_a_wrong_type_is_rejected_and_the_rest_applied(
    models_dev: dict[str, Any], path: tuple[str, ...], value: Any
) -> None:
    target = models_dev["openai"]["models"]["gpt-5"]
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = value

    parsed = parse(json.dumps(models_dev).encode())

    assert parsed.rejected == 1
    assert len(parsed.rows) == 6
    assert ("openai", "gpt-5") in parsed.rejected_keys


def test_a_model_missing_a_required_field_is_rejected(
    models_dev: dict[str, Any],
) -> None:
    del models_dev["openai"]["models"]["gpt-5"]["open_weights"]

    parsed = parse(json.dumps(models_dev).encode())

    assert (parsed.rejected, len(parsed.rows)) == (1, 6)


def test_a_provider_with_a_wrong_type_is_rejected_with_its_models(
    models_dev: dict[str, Any],
) -> None:
    models_dev["google"]["models"] = ["gemini-2.5-pro"]

    parsed = parse(json.dumps(models_dev).encode())

    assert parsed.rejected == 1
    assert parsed.rejected_providers == frozenset({"google"})
    assert {r.source_provider for r in parsed.rows} == {
        "anthropic",
        "openai",
        "deepseek",
    }


def test_rejected_entries_keep_their_stored_rows_untouched(
    models_dev: dict[str, Any], write_payload: Callable[[Any], Path]
) -> None:
    sync()
    models_dev["openai"]["models"]["gpt-5"]["tool_call"] = "yes"
    models_dev["google"]["name"] = 7

    out = sync(write_payload(models_dev))

    assert "4 models (0 created, 0 updated, 4 unchanged, 0 missing, 2 rejected)" in out
    assert CatalogModel.objects.filter(missing_since__isnull=False).count() == 0
    assert row("gpt-5").tool_call is True
    assert JobRun.objects.first().counts["rejected"] == 2


def test_a_model_without_cost_is_unpriced(models_dev: dict[str, Any]) -> None:
    del models_dev["openai"]["models"]["gpt-4o-mini"]["cost"]

    parsed = parse(json.dumps(models_dev).encode())

    mini = next(r for r in parsed.rows if r.model_id == "gpt-4o-mini")
    assert (mini.input_cost, mini.output_cost, mini.cache_read_cost) == (
        None,
        None,
        None,
    )
    assert mini.cost_tiers == []
    assert parsed.rejected == 0


def test_unknown_keys_are_ignored(models_dev: dict[str, Any]) -> None:
    plain = parse(json.dumps(models_dev).encode())
    models_dev["openai"]["brand_new"] = {"x": 1}
    models_dev["openai"]["models"]["gpt-5"]["brand_new"] = [1, 2]
    models_dev["openai"]["models"]["gpt-5"]["limit"]["brand_new"] = "x"
    models_dev["openai"]["models"]["gpt-5"]["cost"]["brand_new"] = 3

    extended = parse(json.dumps(models_dev).encode())

    assert extended.rows == plain.rows
    assert extended.rejected == 0


def test_ids_with_slashes_and_colons_are_plain_strings(
    models_dev: dict[str, Any],
) -> None:
    model = models_dev["deepseek"]["models"].pop("deepseek-reasoner")
    model["id"] = "deepseek/deepseek-r1:free"
    models_dev["deepseek"]["models"]["deepseek/deepseek-r1:free"] = model

    parsed = parse(json.dumps(models_dev).encode())

    assert ("deepseek", "deepseek/deepseek-r1:free") in {r.key for r in parsed.rows}


def test_a_dry_run_writes_nothing_but_the_job_run() -> None:
    version = services.config_version()

    out = sync(MODELS_DEV_FIXTURE, "--dry-run")

    assert "7 models (7 created" in out
    assert "dry run" in out
    assert CatalogModel.objects.count() == 0
    assert services.config_version() == version
    run = JobRun.objects.get()
    assert run.outcome == "dry_run"
    assert run.counts["created"] == 7


def test_a_dry_run_does_not_count_as_the_last_successful_payload() -> None:
    sync(MODELS_DEV_FIXTURE, "--dry-run")

    out = sync()

    assert "7 created" in out


def test_a_held_lock_skips_the_run_with_exit_code_3() -> None:
    JobLock.objects.create(
        job="sync_models_dev",
        locked_until=timezone.now() + timezone.timedelta(minutes=3),
    )

    with pytest.raises(CommandError) as caught:
        sync()

    assert caught.value.returncode == 3
    assert JobRun.objects.get().outcome == "skipped_locked"
    assert CatalogModel.objects.count() == 0


def test_the_source_url_is_fetched_through_the_client_factory(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    seen: list[str] = []
    original = http.job_client

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(str(request.url))
        return httpx.Response(200, content=MODELS_DEV_FIXTURE.read_bytes())

    monkeypatch.setattr(
        http,
        "job_client",
        lambda *, timeout_s=30.0, transport=None: original(
            timeout_s=timeout_s, transport=httpx.MockTransport(handler)
        ),
    )

    out = sync("https://models.test/api.json")

    assert seen == ["https://models.test/api.json"]
    assert "7 created" in out


def test_the_configured_url_is_the_default_source(
    monkeypatch: pytest.MonkeyPatch, settings
) -> None:
    settings.OMNIROUTE_MODELS_DEV_URL = "https://mirror.test/api.json"
    seen: list[str] = []
    monkeypatch.setattr(
        models_dev,
        "read_source",
        lambda source: seen.append(source) or MODELS_DEV_FIXTURE.read_bytes(),
    )

    call_command("sync_models_dev", "--no-progress", stdout=io.StringIO())

    assert seen == ["https://mirror.test/api.json"]


def test_an_unreachable_source_fails_the_run(monkeypatch: pytest.MonkeyPatch) -> None:
    original = http.job_client

    def refuse(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("refused", request=request)

    monkeypatch.setattr(
        http,
        "job_client",
        lambda *, timeout_s=30.0, transport=None: original(
            timeout_s=timeout_s, transport=httpx.MockTransport(refuse)
        ),
    )
    monkeypatch.setattr("providers.http.time.sleep", lambda seconds: None)

    with pytest.raises(CommandError) as caught:
        sync("https://models.test/api.json")

    assert caught.value.returncode == 1
    assert "ConnectError" in JobRun.objects.get().message


def test_the_task_runs_the_job_as_beat() -> None:
    from providers.tasks import sync_models_dev_task

    sync_models_dev_task.run()

    assert JobRun.objects.get().triggered_by == "beat"


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_a_progress_bar_goes_to_stderr_on_a_terminal() -> None:
    err, out = _Terminal(), io.StringIO()

    call_command(
        "sync_models_dev", "--source", str(MODELS_DEV_FIXTURE), stdout=out, stderr=err
    )

    assert "\r[" in err.getvalue()
    assert "] 7/7" in err.getvalue()
    assert len(out.getvalue().splitlines()) == 1


def test_no_progress_keeps_stderr_quiet_on_a_terminal() -> None:
    err = _Terminal()

    call_command(
        "sync_models_dev",
        "--source",
        str(MODELS_DEV_FIXTURE),
        "--no-progress",
        stdout=io.StringIO(),
        stderr=err,
    )

    assert err.getvalue() == ""
