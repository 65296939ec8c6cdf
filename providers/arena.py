"""``sync_arena_elo``: LMArena leaderboards into ``ArenaScore`` rows (spec 06 §3.3).

Each run:

0. deletes the expired rows, and nothing else, before anything is fetched, so
   scores outlive a source outage for up to ``SCORE_TTL`` (7 days);
1. fetch: every URL of ``OMNIROUTE_ARENA_URLS`` (or ``--source``, several given
   comma-separated or repeated); a datasets-server URL is paged with
   ``&offset=N&length=100`` until ``num_rows_total`` rows are read.  A URL that
   cannot be fetched or read is skipped and named in the message; the run fails
   only when every URL fails;
2. parse (``arena_formats.parse``, pure): the rows of categories ``overall`` and
   ``coding``;
3. ``snapshot`` (pure): per (source, category) only the rows of its latest publish
   date; a category with fewer than ``OMNIROUTE_ARENA_MIN_MODELS`` valid rows is
   rejected whole (its stored rows stay until they expire); ``fitness`` per
   (source, category, publish date) and ``confidence`` per row;
4. ``Matcher.match`` (pure): the Arena name -> a bare model id, or None;
5. ``plan`` (pure diff on the natural key) and ``apply`` (one transaction).

Name matching is ``providers.arena_names``.

Where the spec is silent:

- *Idempotence.* Every valid row a run sees is upserted with a fresh ``synced_at``
  and ``expires_at`` (7 days after the last run that saw it, so a board LMArena does
  not republish for a week does not vanish while its source answers); the outcome
  is ``unchanged`` when no stored value changed and no expired row was deleted.
  The payload SHA-256 is recorded but not used to skip the run, since that would
  also skip the renewal.
- *Source* of a row: ``hf:<dataset>/<config>/<split>`` for a datasets-server URL
  (the default two URLs are one source), else the URL or path as given.
- Two rows of one name in one (source, category, snapshot): the first stands, the
  other counts ``rejected``.  ``missing`` counts stored rows of a snapshot this run
  also read whose name it no longer lists; they are kept until they expire.
- An unreadable payload (neither format) is a failed URL, like a fetch error.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass
from datetime import UTC, date, datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from providers.arena_formats import (
    ArenaRow,
    Format,
    FormatError,
    Page,
    is_datasets_server,
    page_url,
    parse,
    peek_envelope,
    source_label,
)
from providers.arena_names import Matcher, load_matcher
from providers.http import FetchError
from providers.jobs import (
    JobContext,
    JobError,
    JobResult,
    JobSpec,
    Outcome,
    read_source,
    register,
)
from providers.models import ArenaScore

JOB_NAME = "sync_arena_elo"
SOFT_LIMIT_SECONDS = 120  # spec 06 §3.1
HARD_LIMIT_SECONDS = 180
SCORE_TTL = timedelta(days=7)  # spec 06 §3.3: expires_at = synced_at + 7 days
BATCH_ROWS = 1000
MAX_PAGES = 200  # 20 000 rows: a real board holds ~400 models per category
FITNESS_FLOOR = 0.40  # spec 04 §9.2: a model 300+ points behind the leader
FITNESS_SPAN = 0.58  # the leader scores FITNESS_FLOOR + FITNESS_SPAN = 0.98
FITNESS_WINDOW_POINTS = 300.0
FITNESS_DECIMALS = 4
HIGH_CONFIDENCE_VOTES = 5000
MEDIUM_CONFIDENCE_VOTES = 1000
Key = tuple[str, str, str, date]  # (source, category, model_name, publish_date)
Confidence = ArenaScore.Confidence


class SoftLimitReachedError(JobError):
    """The soft time limit passed while fetching: the whole run fails."""


# Fitness and confidence.


def fitness_of(rating: float, leader: float) -> float:
    """``0.40 + 0.58 × clamp01(1 − (leader − rating)/300)``, 4 decimals."""
    closeness = min(1.0, max(0.0, 1 - (leader - rating) / FITNESS_WINDOW_POINTS))
    return round(FITNESS_FLOOR + FITNESS_SPAN * closeness, FITNESS_DECIMALS)


def confidence_of(votes: int | None) -> str:
    if votes is None:
        return Confidence.UNKNOWN
    if votes >= HIGH_CONFIDENCE_VOTES:
        return Confidence.HIGH
    if votes >= MEDIUM_CONFIDENCE_VOTES:
        return Confidence.MEDIUM
    return Confidence.LOW


# The snapshot rules.


@dataclass(frozen=True, slots=True, kw_only=True)
class ScoreRow:
    """The stored values of one ``ArenaScore`` (bookkeeping times aside)."""

    source: str
    category: str
    model_name: str
    publish_date: date
    rating: float
    rating_lower: float | None
    rating_upper: float | None
    votes: int | None
    rank: int | None
    confidence: str
    fitness: float
    matched_model: str | None

    @property
    def key(self) -> Key:
        return (self.source, self.category, self.model_name, self.publish_date)

    def values(self) -> dict[str, Any]:
        return asdict(self)


KEY_FIELDS = ("source", "category", "model_name", "publish_date")
DATA_FIELDS = (
    "rating",
    "rating_lower",
    "rating_upper",
    "votes",
    "rank",
    "confidence",
    "fitness",
    "matched_model",
)


@dataclass(frozen=True, slots=True, kw_only=True)
class Snapshot:
    rows: tuple[ScoreRow, ...]
    rejected: int
    notes: tuple[str, ...]  # rejected categories, for the message
    boards: frozenset[tuple[str, str, date]]  # (source, category, publish_date) kept


def snapshot(
    pages: Iterable[tuple[str, Page]], *, minimum: int, matcher: Matcher
) -> Snapshot:
    """Parsed pages (with their source labels) -> the rows to store.  Pure."""
    groups: dict[tuple[str, str], list[ArenaRow]] = {}
    rejected = 0
    for source, page in pages:
        rejected += page.rejected
        for row in page.rows:
            groups.setdefault((source, row.category), []).append(row)
    rows: list[ScoreRow] = []
    notes: list[str] = []
    boards: set[tuple[str, str, date]] = set()
    for (source, category), found in groups.items():
        latest = max(row.publish_date for row in found)
        board: dict[str, ArenaRow] = {}
        for row in found:
            if row.publish_date != latest:
                continue  # an older snapshot: skipped, not rejected
            if row.model_name in board:
                rejected += 1
                continue
            board[row.model_name] = row
        if len(board) < minimum:
            rejected += len(board)
            notes.append(
                f"{category} of {source} rejected: {len(board)} rows, fewer than "
                f"the minimum of {minimum}"
            )
            continue
        boards.add((source, category, latest))
        leader = max(row.rating for row in board.values())
        rows.extend(
            ScoreRow(
                source=source,
                category=category,
                model_name=row.model_name,
                publish_date=latest,
                rating=row.rating,
                rating_lower=row.rating_lower,
                rating_upper=row.rating_upper,
                votes=row.votes,
                rank=row.rank,
                confidence=confidence_of(row.votes),
                fitness=fitness_of(row.rating, leader),
                matched_model=matcher.match(row.model_name),
            )
            for row in board.values()
        )
    return Snapshot(
        rows=tuple(rows),
        rejected=rejected,
        notes=tuple(notes),
        boards=frozenset(boards),
    )


# Planning and applying.


@dataclass(frozen=True, slots=True, kw_only=True)
class Plan:
    create: tuple[ScoreRow, ...] = ()
    update: tuple[ScoreRow, ...] = ()
    unchanged: tuple[ScoreRow, ...] = ()
    missing: int = 0
    rejected: int = 0

    def counts(self, *, deleted: int) -> dict[str, int]:
        return {
            "created": len(self.create),
            "updated": len(self.update),
            "unchanged": len(self.unchanged),
            "missing": self.missing,
            "rejected": self.rejected,
            "deleted": deleted,
        }

    @property
    def rows(self) -> tuple[ScoreRow, ...]:
        return (*self.create, *self.update, *self.unchanged)


def plan(snap: Snapshot, existing: Mapping[Key, Mapping[str, Any]]) -> Plan:
    """Diff the snapshot against stored unexpired rows (``DATA_FIELDS`` by natural
    key).  Pure."""
    create, update, unchanged = [], [], []
    for row in snap.rows:
        stored = existing.get(row.key)
        if stored is None:
            create.append(row)
        elif any(stored.get(name) != getattr(row, name) for name in DATA_FIELDS):
            update.append(row)
        else:
            unchanged.append(row)
    seen = {row.key for row in snap.rows}
    missing = sum(
        1
        for key in existing
        if key not in seen and (key[0], key[1], key[3]) in snap.boards
    )
    return Plan(
        create=tuple(create),
        update=tuple(update),
        unchanged=tuple(unchanged),
        missing=missing,
        rejected=snap.rejected,
    )


def stored_rows(sources: Iterable[str], now: datetime) -> dict[Key, dict[str, Any]]:
    """The unexpired stored rows of ``sources``, as ``plan`` compares them."""
    return {
        (row["source"], row["category"], row["model_name"], row["publish_date"]): row
        for row in ArenaScore.objects.filter(
            source__in=set(sources), expires_at__gt=now
        ).values(*KEY_FIELDS, *DATA_FIELDS)
    }


def expired(now: datetime) -> Any:
    return ArenaScore.objects.filter(expires_at__lte=now)


def delete_expired(now: datetime) -> int:
    deleted, _ = expired(now).delete()
    return deleted


@transaction.atomic
def apply(the_plan: Plan, *, now: datetime) -> None:
    """Upsert every row the run saw, renewing ``synced_at`` and ``expires_at``."""
    objects = [
        ArenaScore(**row.values(), synced_at=now, expires_at=now + SCORE_TTL)
        for row in the_plan.rows
    ]
    for start in range(0, len(objects), BATCH_ROWS):
        ArenaScore.objects.bulk_create(
            objects[start : start + BATCH_ROWS],
            update_conflicts=True,
            unique_fields=KEY_FIELDS,
            update_fields=(*DATA_FIELDS, "synced_at", "expires_at"),
        )


# Fetching.


def configured_sources(source: str | None) -> list[str]:
    """``--source`` (comma-separated) or ``OMNIROUTE_ARENA_URLS``."""
    if source:
        return [item.strip() for item in source.split(",") if item.strip()]
    return list(settings.OMNIROUTE_ARENA_URLS)


def fetch_pages(
    source: str,
    *,
    get: Callable[[str], bytes] | None = None,
    context: JobContext | None = None,
) -> list[tuple[str, bytes]]:
    """``[(url, payload)]``: one payload, or every page of a datasets-server URL."""
    get = get or read_source
    if not is_datasets_server(source):
        return [(source, get(source))]
    pages: list[tuple[str, bytes]] = []
    offset = 0
    while True:
        if context is not None and context.past_soft_limit():
            raise SoftLimitReachedError("arena: soft time limit reached while paging")
        url = page_url(source, offset)
        payload = get(url)
        pages.append((url, payload))
        envelope = peek_envelope(payload)
        if envelope is None:
            return pages  # not an envelope: parse decides what it is
        total, on_page = envelope
        offset += on_page
        if on_page == 0 or offset >= total:
            return pages
        if len(pages) >= MAX_PAGES:
            raise FetchError(f"{source}: more than {MAX_PAGES} pages")


@dataclass(slots=True)
class Fetched:
    pages: list[tuple[str, Page]]
    failures: list[str]
    sha256: str


def fetch_all(
    sources: Sequence[str], *, fmt: str, today: date, context: JobContext
) -> Fetched:
    """Fetch and parse every source; a source that fails is recorded, not raised."""
    pages: list[tuple[str, Page]] = []
    failures: list[str] = []
    digest = hashlib.sha256()
    for done, source in enumerate(sources, start=1):
        try:
            raw = fetch_pages(source, context=context)
            parsed = [parse(payload, fmt=fmt, today=today) for _, payload in raw]
        except SoftLimitReachedError:
            raise
        except (FetchError, JobError) as exc:  # their messages name the source
            failures.append(str(exc))
        except FormatError as exc:
            failures.append(f"{source}: {exc}")
        else:
            label = source_label(source)
            pages.extend((label, page) for page in parsed)
            for url, payload in raw:
                digest.update(url.encode() + b"\n" + payload + b"\n")
        context.progress(done, len(sources))
    return Fetched(pages=pages, failures=failures, sha256=digest.hexdigest())


# The job.


def summary(
    snap: Snapshot, the_plan: Plan, *, deleted: int, failures: list[str]
) -> str:
    counts = the_plan.counts(deleted=deleted)
    matched = len({row.model_name for row in snap.rows if row.matched_model})
    names = len({row.model_name for row in snap.rows})
    parts = [
        f"arena: {len(snap.rows)} scores ({counts['created']} created, "
        f"{counts['updated']} updated, {counts['unchanged']} unchanged, "
        f"{counts['missing']} missing), {matched} of {names} names matched"
    ]
    if counts["rejected"]:
        parts.append(f"{counts['rejected']} rows rejected")
    if deleted:
        parts.append(f"{deleted} expired rows deleted")
    parts.extend(snap.notes)
    parts.extend(f"source failed: {failure}" for failure in failures)
    return "; ".join(parts)


def sync_arena_elo(
    context: JobContext, *, clock: Callable[[], datetime] = timezone.now
) -> JobResult:
    now = clock()
    sources = configured_sources(context.source)
    if not sources:
        raise JobError("arena: no source configured (OMNIROUTE_ARENA_URLS is empty)")
    deleted = expired(now).count() if context.dry_run else delete_expired(now)
    fmt = str(context.options.get("format") or settings.OMNIROUTE_ARENA_FORMAT)
    fetched = fetch_all(
        sources, fmt=Format(fmt), today=now.astimezone(UTC).date(), context=context
    )
    if len(fetched.failures) == len(sources):
        return JobResult(
            outcome=Outcome.FAILED,
            counts={"deleted": deleted},
            message="arena: every source failed: " + "; ".join(fetched.failures),
        )
    snap = snapshot(
        fetched.pages,
        minimum=settings.OMNIROUTE_ARENA_MIN_MODELS,
        matcher=load_matcher(),
    )
    labels = {label for label, _ in fetched.pages}
    the_plan = plan(snap, stored_rows(labels, now))
    text = summary(snap, the_plan, deleted=deleted, failures=fetched.failures)
    counts = the_plan.counts(deleted=deleted)
    if context.dry_run:
        return JobResult(
            outcome=Outcome.DRY_RUN,
            counts=counts,
            message=f"{text} (dry run, nothing written)",
            payload_sha256=fetched.sha256,
        )
    if context.past_soft_limit():
        raise JobError("arena: soft time limit reached before writing")
    apply(the_plan, now=now)
    changed = bool(the_plan.create or the_plan.update or deleted)
    return JobResult(
        outcome=Outcome.SUCCESS if changed else Outcome.UNCHANGED,
        counts=counts,
        message=text,
        payload_sha256=fetched.sha256,
    )


JOB = register(
    JobSpec(
        name=JOB_NAME,
        func=sync_arena_elo,
        soft_s=SOFT_LIMIT_SECONDS,
        hard_s=HARD_LIMIT_SECONDS,
        schedule="23 3 * * *",
        task="providers.tasks.sync_arena_elo_task",
    )
)
