"""sync_arena_elo on the Arena fixtures (spec 06 §3.3 "Acceptance").

The catalog the name matching needs comes from the models.dev fixture, loaded by
its own job; the Arena minimum is lowered to 1 (as the fixtures README asks).  Edge
cases are made by editing a copy of a fixture inside the test.  No network: URLs go
to an ``httpx.MockTransport`` through the client factory.
"""

from __future__ import annotations

import copy
import io
import json
from collections.abc import Callable
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import httpx
import pytest
from django.core.management import CommandError, call_command
from django.utils import timezone

from providers import http
from providers.models import ArenaAlias, ArenaScore, JobRun, Provider, ProviderModel
from tests.providers.conftest import MODELS_DEV_FIXTURE

pytestmark = pytest.mark.django_db

FIXTURES = Path(__file__).parents[1] / "fixtures"
ARENA_FIXTURE = FIXTURES / "arena-sample.json"
CATALOG_FIXTURE = FIXTURES / "arena-catalog-sample.json"
_ARENA = json.loads(ARENA_FIXTURE.read_text(encoding="utf-8"))
PUBLISHED = date(2026, 8, 19)
HF = "https://datasets-server.huggingface.co"
OVERALL_URL = (
    f"{HF}/filter?dataset=lmarena-ai%2Fleaderboard-dataset&config=text_style_control"
    "&split=latest&where=%22category%22%3D%27overall%27"
)
CODING_URL = OVERALL_URL.replace("%27overall%27", "%27coding%27")


@pytest.fixture(autouse=True)
def _fixture_sized_minimums(settings) -> None:
    settings.OMNIROUTE_MODELS_DEV_MIN_PROVIDERS = 1
    settings.OMNIROUTE_ARENA_MIN_MODELS = 1
    settings.OMNIROUTE_ARENA_FORMAT = "auto"


@pytest.fixture(autouse=True)
def catalog() -> None:
    """The models.dev fixture's 7 models: what Arena names match against."""
    call_command(
        "sync_models_dev",
        "--source",
        str(MODELS_DEV_FIXTURE),
        "--no-progress",
        stdout=io.StringIO(),
    )


@pytest.fixture
def arena() -> dict[str, Any]:
    """A fresh copy of the datasets-server fixture, to edit inside a test."""
    return copy.deepcopy(_ARENA)


@pytest.fixture
def write(tmp_path: Path) -> Callable[..., Path]:
    """``write(data)`` -> a new JSON file; ``write(text=...)`` -> a text file;
    ``name=`` rewrites one file, so that runs read the same source."""
    counter = iter(range(1000))

    def make(
        data: Any = None, *, text: str | None = None, name: str | None = None
    ) -> Path:
        path = tmp_path / (name or f"arena-{next(counter)}.json")
        path.write_text(json.dumps(data) if text is None else text, encoding="utf-8")
        return path

    return make


@pytest.fixture
def serve(monkeypatch: pytest.MonkeyPatch) -> Callable[..., list[str]]:
    """``serve(handler)``: every fetch goes to ``handler``; returns the URLs seen."""
    original = http.job_client

    def install(handler: Callable[[httpx.Request], httpx.Response]) -> list[str]:
        seen: list[str] = []

        def record(request: httpx.Request) -> httpx.Response:
            seen.append(str(request.url))
            return handler(request)

        monkeypatch.setattr(
            http,
            "job_client",
            lambda *, timeout_s=30.0, transport=None: original(
                timeout_s=timeout_s, transport=httpx.MockTransport(record)
            ),
        )
        monkeypatch.setattr("providers.http.time.sleep", lambda seconds: None)
        return seen

    return install


def sync(*sources: Path | str, args: tuple[str, ...] = ()) -> str:
    """Run the command on ``sources``; return stdout (CommandError on exit 1, 3)."""
    out = io.StringIO()
    source_args = [arg for s in sources for arg in ("--source", str(s))]
    call_command(
        "sync_arena_elo",
        *source_args,
        "--no-progress",
        *args,
        stdout=out,
        stderr=io.StringIO(),
    )
    return out.getvalue()


def score(name: str, category: str = "overall") -> ArenaScore:
    return ArenaScore.objects.get(model_name=name, category=category)


def matches() -> dict[str, str | None]:
    return dict(
        ArenaScore.objects.filter(category="overall").values_list(
            "model_name", "matched_model"
        )
    )


def last_run() -> JobRun:
    return JobRun.objects.filter(job="sync_arena_elo").first()  # newest first


# Acceptance (spec 06 §3.3).


def test_the_sample_stores_22_rows() -> None:
    out = sync(ARENA_FIXTURE)

    assert ArenaScore.objects.count() == 22
    assert ArenaScore.objects.filter(category="overall").count() == 11
    assert ArenaScore.objects.filter(category="coding").count() == 11
    assert set(ArenaScore.objects.values_list("publish_date", flat=True)) == {PUBLISHED}
    (line,) = out.splitlines()
    assert line.startswith(
        "arena: 22 scores (22 created, 0 updated, 0 unchanged, 0 missing), "
        "7 of 11 names matched in "
    )
    run = last_run()
    assert run.outcome == "success"
    assert run.counts == {
        "created": 22,
        "updated": 0,
        "unchanged": 0,
        "missing": 0,
        "rejected": 0,
        "deleted": 0,
    }
    assert len(run.payload_sha256) == 64


def test_names_match_by_date_stripping_exactly_and_through_the_seeded_aliases() -> None:
    sync(ARENA_FIXTURE)

    assert matches() == {
        "claude-sonnet-4-5-20250929": "claude-sonnet-4-5",
        "claude-haiku-4-5-20251001": "claude-haiku-4-5",
        "gpt-4o-mini-2024-07-18": "gpt-4o-mini",
        "gemini-2.5-pro": "gemini-2.5-pro",
        "gpt-5-high": "gpt-5",
        "gemini-2.0-flash-001": "gemini-2.0-flash",
        "deepseek-v3.2-thinking": "deepseek-reasoner",
        "claude-opus-4-7": None,
        "gemini-3.1-pro-preview": None,
        "kimi-k2.6": None,
        "claude-sonnet-4-5-20250929-high-32k": None,
    }
    coding = dict(
        ArenaScore.objects.filter(category="coding").values_list(
            "model_name", "matched_model"
        )
    )
    assert coding == matches()


def test_fitness_is_leader_relative_per_board() -> None:
    sync(ARENA_FIXTURE)

    assert score("claude-opus-4-7").fitness == 0.98
    assert score("gemini-2.5-pro").fitness == 0.8855
    assert score("gpt-4o-mini-2024-07-18").fitness == 0.6390
    assert score("claude-haiku-4-5-20251001", "coding").fitness == 0.8502
    assert score("claude-opus-4-7", "coding").fitness == 0.98


def test_a_second_run_is_unchanged() -> None:
    sync(ARENA_FIXTURE)
    stored = list(
        ArenaScore.objects.order_by("pk").values(
            "pk", "model_name", "category", "rating", "fitness", "matched_model"
        )
    )

    out = sync(ARENA_FIXTURE)

    assert out.startswith(
        "arena: 22 scores (0 created, 0 updated, 22 unchanged, 0 missing)"
    )
    assert [run.outcome for run in JobRun.objects.filter(job="sync_arena_elo")] == [
        "unchanged",
        "success",
    ]
    assert (
        list(
            ArenaScore.objects.order_by("pk").values(
                "pk", "model_name", "category", "rating", "fitness", "matched_model"
            )
        )
        == stored
    )


def test_the_arena_catalog_sample_stores_18_rows() -> None:
    before = timezone.now().astimezone(UTC).date()

    sync(CATALOG_FIXTURE)

    assert ArenaScore.objects.count() == 18
    assert score("gemini-3-pro").fitness == 0.98
    assert score("gpt-5-high").fitness == 0.8267
    assert score("gpt-5-high").matched_model == "gpt-5"
    gemini = score("gemini-2.5-pro")
    assert (gemini.rank, gemini.votes, gemini.confidence) == (2, None, "unknown")
    assert (gemini.rating_lower, gemini.rating_upper) == (
        1461.0214308481243,
        1467.9021455827035,
    )
    assert score("claude-opus-4-5-20251101-thinking-32k", "coding").rank == 1
    assert score("gpt-4o-mini-2024-07-18", "coding").rank == 9
    assert ArenaScore.objects.values("publish_date").distinct().count() == 1
    assert score("gemini-3-pro").publish_date in {
        before,
        timezone.now().astimezone(UTC).date(),
    }


# Stored fields.


def test_each_row_stores_the_spec_fields() -> None:
    sync(ARENA_FIXTURE)

    row = score("gemini-2.5-pro")
    assert row.source == str(ARENA_FIXTURE)  # a file: its path as given
    assert row.category == "overall"
    assert row.publish_date == PUBLISHED
    assert row.rating == 1445.2363383735908
    assert (row.rating_lower, row.rating_upper) == (
        1442.7521530322706,
        1447.720523714911,
    )
    assert (row.votes, row.rank, row.confidence) == (124829, 72, "high")
    assert row.expires_at - row.synced_at == timedelta(days=7)


def test_confidence_follows_the_vote_count() -> None:
    sync(ARENA_FIXTURE)

    assert score("gpt-5-high", "coding").confidence == "high"  # 6 413 votes
    assert score("gemini-2.0-flash-001", "coding").confidence == "high"  # 7 007
    assert {
        name: score(name, "coding").votes
        for name in ("deepseek-v3.2-thinking", "gpt-5-high")
    } == {"deepseek-v3.2-thinking": 8552, "gpt-5-high": 6413}


@pytest.mark.parametrize(
    ("votes", "expected"),
    [
        (5000, "high"),
        (4999, "medium"),
        (1000, "medium"),
        (999, "low"),
        (None, "unknown"),
    ],
)
def test_confidence_bands(
    arena: dict[str, Any], write: Callable[..., Path], votes: int | None, expected: str
) -> None:
    arena["rows"][5]["row"]["vote_count"] = votes

    sync(write(arena))

    assert score("gemini-2.5-pro").confidence == expected
    assert score("gemini-2.5-pro").votes == votes


# Edge cases (copies of the fixture, edited here).


def test_a_row_with_truncated_cells_is_rejected(
    arena: dict[str, Any], write: Callable[..., Path]
) -> None:
    arena["rows"][5]["truncated_cells"] = ["license"]

    out = sync(write(arena))

    assert ArenaScore.objects.count() == 21
    assert not ArenaScore.objects.filter(
        model_name="gemini-2.5-pro", category="overall"
    ).exists()
    assert "1 rows rejected" in out
    assert last_run().counts["rejected"] == 1


def test_a_null_bound_is_stored_as_null(
    arena: dict[str, Any], write: Callable[..., Path]
) -> None:
    arena["rows"][5]["row"]["rating_lower"] = None
    del arena["rows"][6]["row"]["rating_upper"]

    sync(write(arena))

    assert ArenaScore.objects.count() == 22
    assert score("gemini-2.5-pro").rating_lower is None
    assert score("gemini-2.5-pro").rating_upper == 1447.720523714911
    assert score("gpt-5-high").rating_upper is None


@pytest.mark.parametrize(
    ("column", "value"),
    [
        ("rating", None),
        ("rating", "1445"),
        ("rating", True),
        ("rating", float("nan")),
        ("model_name", ""),
        ("model_name", 7),
        ("vote_count", -1),
        ("vote_count", 1.5),
        ("leaderboard_publish_date", "19 August"),
        ("category", None),
    ],
)
def test_an_invalid_row_is_rejected_and_the_rest_stored(
    arena: dict[str, Any], write: Callable[..., Path], column: str, value: Any
) -> None:
    arena["rows"][5]["row"][column] = value

    sync(write(arena))

    assert ArenaScore.objects.count() == 21
    assert last_run().counts["rejected"] == 1


def test_other_categories_are_skipped_not_rejected(
    arena: dict[str, Any], write: Callable[..., Path]
) -> None:
    for entry in arena["rows"][11:]:
        entry["row"]["category"] = "creative_writing"

    sync(write(arena))

    assert set(ArenaScore.objects.values_list("category", flat=True)) == {"overall"}
    assert last_run().counts["rejected"] == 0


def test_only_the_latest_publish_date_of_a_category_is_kept(
    arena: dict[str, Any], write: Callable[..., Path]
) -> None:
    older = copy.deepcopy(arena["rows"][0])
    older["row"]["leaderboard_publish_date"] = "2026-08-12"
    older["row"]["rating"] = 1600.0
    arena["rows"].append(older)

    sync(write(arena))

    assert ArenaScore.objects.count() == 22
    assert set(ArenaScore.objects.values_list("publish_date", flat=True)) == {PUBLISHED}
    assert score("claude-opus-4-7").fitness == 0.98  # the old rating is not the leader


def test_a_category_below_the_minimum_is_rejected_and_its_rows_stay(
    arena: dict[str, Any], write: Callable[..., Path], settings
) -> None:
    sync(write(_ARENA, name="board.json"))
    for entry in arena["rows"]:
        entry["row"]["leaderboard_publish_date"] = "2026-08-26"
    del arena["rows"][-1]  # coding keeps 10 rows
    settings.OMNIROUTE_ARENA_MIN_MODELS = 11

    out = sync(write(arena, name="board.json"))

    assert "coding of " in out
    assert "rejected: 10 rows, fewer than the minimum of 11" in out
    published = ArenaScore.objects.values_list("category", "publish_date")
    assert sorted({(c, d.isoformat()) for c, d in published}) == [
        ("coding", "2026-08-19"),
        ("overall", "2026-08-19"),
        ("overall", "2026-08-26"),
    ]
    assert ArenaScore.objects.count() == 33
    assert last_run().counts["rejected"] == 10
    assert last_run().outcome == "success"


def test_the_default_minimum_rejects_the_small_sample(settings) -> None:
    settings.OMNIROUTE_ARENA_MIN_MODELS = 20

    out = sync(ARENA_FIXTURE)

    assert ArenaScore.objects.count() == 0
    assert "overall of " in out
    assert "rejected: 11 rows, fewer than the minimum of 20" in out
    assert last_run().outcome == "unchanged"


def test_each_run_first_deletes_expired_rows_and_nothing_else() -> None:
    now = timezone.now()

    def stored(name: str, expires_at: datetime, source: str = "elsewhere") -> None:
        ArenaScore.objects.create(
            source=source,
            category="overall",
            model_name=name,
            publish_date=date(2026, 8, 1),
            rating=1400.0,
            fitness=0.9,
            confidence="high",
            synced_at=expires_at - timedelta(days=7),
            expires_at=expires_at,
        )

    stored("expired", now - timedelta(seconds=1))
    stored("still-valid", now + timedelta(days=1))

    out = sync(ARENA_FIXTURE)

    assert not ArenaScore.objects.filter(model_name="expired").exists()
    assert ArenaScore.objects.filter(model_name="still-valid").exists()
    assert ArenaScore.objects.count() == 23
    assert last_run().counts["deleted"] == 1
    assert "1 expired rows deleted" in out


def test_a_second_run_renews_the_expiry_of_the_rows_it_sees() -> None:
    sync(ARENA_FIXTURE)
    first = score("gemini-2.5-pro").expires_at

    sync(ARENA_FIXTURE)

    renewed = score("gemini-2.5-pro")
    assert renewed.expires_at >= first
    assert renewed.expires_at - renewed.synced_at == timedelta(days=7)


def test_a_changed_rating_updates_the_row_and_its_board(
    arena: dict[str, Any], write: Callable[..., Path]
) -> None:
    sync(write(_ARENA, name="board.json"))
    arena["rows"][0]["row"]["rating"] = 1400.0  # the overall leader falls behind

    out = sync(write(arena, name="board.json"))

    assert "(0 created, 11 updated, 11 unchanged, 0 missing)" in out
    assert score("claude-opus-4-7").fitness == 0.8134  # 86.2 points behind
    assert score("gemini-3.1-pro-preview").fitness == 0.98


def test_a_name_gone_from_a_stored_snapshot_counts_missing_and_stays(
    arena: dict[str, Any], write: Callable[..., Path]
) -> None:
    sync(write(_ARENA, name="board.json"))
    del arena["rows"][2]  # kimi-k2.6, overall

    out = sync(write(arena, name="board.json"))

    assert "(0 created, 0 updated, 21 unchanged, 1 missing)" in out
    assert ArenaScore.objects.filter(model_name="kimi-k2.6").count() == 2


# Name matching.


def test_the_alias_ignore_leaves_a_name_unmatched(write: Callable[..., Path]) -> None:
    ArenaAlias.objects.create(arena_name="claude-haiku-4-5-20251001", model_id="ignore")

    sync(ARENA_FIXTURE)

    assert score("claude-haiku-4-5-20251001").matched_model is None
    assert score("claude-haiku-4-5-20251001", "coding").matched_model is None


def test_an_alias_to_an_unknown_id_falls_through_to_the_other_rules() -> None:
    ArenaAlias.objects.create(
        arena_name="claude-haiku-4-5-20251001", model_id="not-a-model"
    )

    sync(ARENA_FIXTURE)

    assert score("claude-haiku-4-5-20251001").matched_model == "claude-haiku-4-5"


def test_a_configured_model_id_matches_too() -> None:
    provider = Provider.objects.create(slug="anthropic-direct", kind="anthropic")
    ProviderModel.objects.create(provider=provider, model_id="claude-opus-4-7")

    sync(ARENA_FIXTURE)

    assert score("claude-opus-4-7").matched_model == "claude-opus-4-7"


@pytest.mark.parametrize(
    ("arena_name", "expected"),
    [
        ("GPT-4o-mini", "gpt-4o-mini"),
        ("  gpt-4o-mini  ", "gpt-4o-mini"),
        ("openai/gpt-4o-mini", "gpt-4o-mini"),
        ("openai/gpt-4o-mini-2024-07-18", "gpt-4o-mini"),
        ("gpt-4o-mini-20240718", "gpt-4o-mini"),
        ("Gemini 2.5 Pro", "gemini-2.5-pro"),
        ("a/openai/gpt-4o-mini", None),  # only one vendor prefix
        ("gpt-4o-mini-high", None),  # no suffix stripping but dates
        ("gpt-4o", None),  # no prefix matching
        ("gpt-4o-mini (2024)", None),
        ("gpt-4o-mini-2024-07", None),
    ],
)
def test_name_matching_rules(arena_name: str, expected: str | None) -> None:
    from providers.arena_names import load_matcher

    assert load_matcher().match(arena_name) == expected


# Formats.


def _plain_rows(arena: dict[str, Any]) -> list[dict[str, Any]]:
    return [entry["row"] for entry in arena["rows"]]


def test_a_json_array_of_rows_reads_as_hf_rows(
    arena: dict[str, Any], write: Callable[..., Path]
) -> None:
    sync(write(_plain_rows(arena)))

    assert ArenaScore.objects.count() == 22
    assert score("gemini-2.5-pro").fitness == 0.8855


def test_json_lines_of_rows_read_as_hf_rows(
    arena: dict[str, Any], write: Callable[..., Path]
) -> None:
    lines = "\n".join(json.dumps(row) for row in _plain_rows(arena)) + "\n"

    sync(write(text=lines))

    assert ArenaScore.objects.count() == 22
    assert score("claude-haiku-4-5-20251001", "coding").fitness == 0.8502


def test_a_broken_json_lines_line_is_one_rejected_row(
    arena: dict[str, Any], write: Callable[..., Path]
) -> None:
    lines = [json.dumps(row) for row in _plain_rows(arena)]
    lines[3] = lines[3][:40]

    sync(write(text="\n".join(lines)))

    assert ArenaScore.objects.count() == 21
    assert last_run().counts["rejected"] == 1


def test_a_forced_format_that_does_not_fit_fails_the_source() -> None:
    with pytest.raises(CommandError) as caught:
        sync(ARENA_FIXTURE, args=("--format", "arena-catalog"))

    assert caught.value.returncode == 1
    assert "payload is not arena-catalog" in last_run().message


def test_the_configured_format_is_used(settings) -> None:
    settings.OMNIROUTE_ARENA_FORMAT = "hf-rows"

    with pytest.raises(CommandError):
        sync(CATALOG_FIXTURE)

    assert "payload is not hf-rows" in last_run().message


def test_a_payload_in_neither_format_fails(write: Callable[..., Path]) -> None:
    with pytest.raises(CommandError):
        sync(write({"hello": "world"}))

    assert last_run().outcome == "failed"
    assert ArenaScore.objects.count() == 0


# Several sources, failures, paging.


def test_source_may_be_repeated_or_comma_separated(
    arena: dict[str, Any], write: Callable[..., Path]
) -> None:
    overall = write({**arena, "rows": arena["rows"][:11]})
    coding = write({**arena, "rows": arena["rows"][11:]})

    sync(overall, coding)
    repeated = list(ArenaScore.objects.values_list("category", "model_name"))
    ArenaScore.objects.all().delete()
    sync(f"{overall},{coding}")

    assert len(repeated) == 22
    assert sorted(ArenaScore.objects.values_list("category", "model_name")) == sorted(
        repeated
    )


def _page(request: httpx.Request, rows: list[Any], cap: int = 100) -> httpx.Response:
    """The datasets-server answer for ``request``'s offset and length."""
    query = parse_qs(urlsplit(str(request.url)).query)
    offset, length = int(query["offset"][0]), int(query["length"][0])
    body = {**_ARENA, "rows": rows[offset : offset + min(length, cap)]}
    body["num_rows_total"] = len(rows)
    return httpx.Response(200, json=body)


def test_the_configured_datasets_server_urls_are_read_page_by_page(
    serve: Callable[..., list[str]], settings
) -> None:
    settings.OMNIROUTE_ARENA_URLS = [OVERALL_URL, CODING_URL]

    def handler(request: httpx.Request) -> httpx.Response:
        category = "coding" if "coding" in str(request.url) else "overall"
        rows = [e for e in _ARENA["rows"] if e["row"]["category"] == category]
        return _page(request, rows)

    seen = serve(handler)

    call_command("sync_arena_elo", "--no-progress", stdout=io.StringIO())

    assert seen == [
        f"{OVERALL_URL}&offset=0&length=100",
        f"{CODING_URL}&offset=0&length=100",
    ]
    assert ArenaScore.objects.count() == 22
    assert set(ArenaScore.objects.values_list("source", flat=True)) == {
        "hf:lmarena-ai/leaderboard-dataset/text_style_control/latest"
    }


def test_paging_continues_until_num_rows_total(
    serve: Callable[..., list[str]],
) -> None:
    seen = serve(lambda request: _page(request, _ARENA["rows"], cap=8))

    sync(OVERALL_URL)

    assert [parse_qs(urlsplit(url).query)["offset"][0] for url in seen] == [
        "0",
        "8",
        "16",
    ]
    assert all(url.endswith("&length=100") for url in seen)
    assert ArenaScore.objects.count() == 22


def test_one_unreachable_url_does_not_fail_the_others(
    serve: Callable[..., list[str]],
) -> None:
    good = "https://arena.test/leaderboard.json"
    bad = "https://down.test/leaderboard.json"

    def handler(request: httpx.Request) -> httpx.Response:
        if request.url.host == "down.test":
            raise httpx.ConnectError("refused", request=request)
        return httpx.Response(200, content=ARENA_FIXTURE.read_bytes())

    serve(handler)

    out = sync(bad, good)

    assert ArenaScore.objects.count() == 22
    assert last_run().outcome == "success"
    assert f"source failed: GET {bad}: ConnectError" in out


def test_the_run_fails_when_every_url_fails(serve: Callable[..., list[str]]) -> None:
    ArenaScore.objects.create(
        source="elsewhere",
        category="overall",
        model_name="old",
        publish_date=date(2026, 8, 1),
        rating=1400.0,
        fitness=0.9,
        confidence="high",
        synced_at=timezone.now() - timedelta(days=8),
        expires_at=timezone.now() - timedelta(days=1),
    )
    serve(lambda request: httpx.Response(404))

    with pytest.raises(CommandError) as caught:
        sync("https://a.test/x.json", "https://b.test/y.json")

    assert caught.value.returncode == 1
    run = last_run()
    assert run.outcome == "failed"
    assert run.message.startswith(
        "arena: every source failed: GET https://a.test/x.json: HTTP 404; "
        "GET https://b.test/y.json: HTTP 404"
    )
    assert "HTTP 404" in run.message
    assert run.counts == {"deleted": 1}
    assert ArenaScore.objects.count() == 0


def test_a_missing_file_is_a_failed_source(write: Callable[..., Path]) -> None:
    out = sync("/nonexistent/arena.json", ARENA_FIXTURE)

    assert "source failed: cannot read /nonexistent/arena.json" in out
    assert ArenaScore.objects.count() == 22


# Runs.


def test_a_dry_run_writes_nothing_but_the_job_run() -> None:
    out = sync(ARENA_FIXTURE, args=("--dry-run",))

    assert "22 created" in out
    assert "dry run" in out
    assert ArenaScore.objects.count() == 0
    assert last_run().outcome == "dry_run"


def test_the_task_runs_the_job_as_beat(settings) -> None:
    from providers.tasks import sync_arena_elo_task

    settings.OMNIROUTE_ARENA_URLS = [str(ARENA_FIXTURE)]

    sync_arena_elo_task.run()

    run = last_run()
    assert (run.triggered_by, run.outcome) == ("beat", "success")
    assert ArenaScore.objects.count() == 22
