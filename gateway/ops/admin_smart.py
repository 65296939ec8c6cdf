"""Admin page per smart route alias (spec 05 §2): config, the last 24 h, a tester.

``smart_route_view`` (staff only, wrapped by ``admin_site.admin_view``; it also needs
the ``combos.view_smartroute`` permission) renders for one ``SmartRoute``:

1. its configuration and the gateway-wide ``smart_routing_mode`` (the DB row, which
   every worker picks up within the config watcher's delay);
2. ``alias_stats``: the ``RequestLog`` rows of the last 24 h with that
   ``smart_alias``, read with two aggregate queries.  The first groups by (tier,
   tier_source, smart_mode, tier_score), at most 2 × 5 × 2 × 23 groups, and gives
   the easy/hard split, the split by source and the score histogram in the
   ``omniroute_smartroute_score`` buckets (a score goes to the smallest bound ≥ it).
   The second groups by the signal list and reads at most ``SIGNAL_GROUPS_LIMIT``
   combinations, the most frequent first, so Python never walks rows;
3. ``try_request``: "Classify this request", the body through ``smart.classify``
   with this alias's threshold and ``smart.decide_tier`` as a request *without a
   session*, so no pin is read or written, and the target ``enforce`` would use.

The logged tiers are those decided when each request ran, under the threshold and
mode of that moment; the histogram is what tells how a new threshold would split.
"""

from __future__ import annotations

from bisect import bisect_left
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, get_args

import orjson
from django import forms
from django.contrib import admin
from django.core.exceptions import PermissionDenied
from django.db.models import Count
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404
from django.template.response import TemplateResponse
from django.utils import timezone

from combos.models import SmartRoute
from gateway.config.snapshot import read_settings
from gateway.inbound.chat import GATEWAY_FIELDS
from gateway.kernel import smart
from telemetry.models import RequestLog

TEMPLATE = "admin/smart_route.html"
WINDOW = timedelta(hours=24)
#: distinct signal lists read; v1 allows about 12 000, real traffic shows a few dozen
SIGNAL_GROUPS_LIMIT = 1000
TOP_SIGNALS = 10
TIERS: tuple[smart.Tier, ...] = ("easy", "hard")
TIER_SOURCES: tuple[str, ...] = get_args(smart.TierSource)


@dataclass(frozen=True, slots=True, kw_only=True)
class Bucket:
    """One histogram bar: scores ``low..high`` (``high`` None: above the last)."""

    low: int
    high: int | None
    count: int
    width_pct: int  # bar length relative to the fullest bucket
    side: str  # easy | hard | mixed: where the bucket lies against the threshold
    threshold_before: bool  # the threshold line is drawn just above this bar

    @property
    def label(self) -> str:
        if self.high is None:
            return f"> {self.low - 1}"
        return str(self.high) if self.low == self.high else f"{self.low}–{self.high}"


@dataclass(frozen=True, slots=True, kw_only=True)
class SourceRow:
    source: str
    easy: int
    hard: int

    @property
    def total(self) -> int:
        return self.easy + self.hard


@dataclass(frozen=True, slots=True, kw_only=True)
class AliasStats:
    total: int
    easy: int
    hard: int
    by_source: tuple[SourceRow, ...]
    by_mode: tuple[tuple[str, int], ...]
    buckets: tuple[Bucket, ...]
    scored: int  # rows with a score (bypassed requests have none)
    at_or_above: int  # scored rows with score >= the current threshold
    signals: tuple[tuple[str, int], ...]  # (name, rows): most frequent, then by name
    signals_capped: bool

    def pct(self, part: int) -> float:
        return 100.0 * part / self.total if self.total else 0.0

    @property
    def easy_pct(self) -> float:
        return self.pct(self.easy)

    @property
    def hard_pct(self) -> float:
        return self.pct(self.hard)

    @property
    def at_or_above_pct(self) -> float:
        return 100.0 * self.at_or_above / self.scored if self.scored else 0.0

    @property
    def threshold_after_all(self) -> bool:
        """Every bucket lies below the threshold: the line goes under the last bar."""
        return not any(b.threshold_before for b in self.buckets)


def _side(low: int, high: int | None, threshold: int) -> str:
    """Where scores ``low..high`` lie against ``threshold`` (hard at ``>=``)."""
    if high is not None and high < threshold:
        return "easy"
    return "hard" if low >= threshold else "mixed"


def _buckets(scores: Mapping[int, int], threshold: int) -> tuple[Bucket, ...]:
    counts = [0] * (len(smart.SCORE_BUCKETS) + 1)  # the last one: above 22
    for score, n in scores.items():
        counts[bisect_left(smart.SCORE_BUCKETS, score)] += n
    ranges: list[tuple[int, int | None]] = []
    low = 0
    for bound in smart.SCORE_BUCKETS:
        ranges.append((low, bound))
        low = bound + 1
    ranges.append((low, None))
    fullest = max(counts) or 1
    found: list[Bucket] = []
    marked = False
    for (low, high), count in zip(ranges, counts, strict=True):
        if high is None and not count:
            continue  # the classifier never scores above 22; show it only if seen
        side = _side(low, high, threshold)
        width = max(1, round(100 * count / fullest)) if count else 0
        found.append(
            Bucket(
                low=low,
                high=high,
                count=count,
                width_pct=width,
                side=side,
                threshold_before=side != "easy" and not marked,
            )
        )
        marked = marked or side != "easy"
    return tuple(found)


def _signal_counts(groups: Iterable[Mapping[str, Any]]) -> Counter[str]:
    counts: Counter[str] = Counter()
    for group in groups:
        signals = group["tier_signals"]
        if isinstance(signals, list):
            for signal in signals:
                counts[smart.signal_name(str(signal))] += group["n"]
    return counts


def alias_stats(alias: str, threshold: int, now: datetime) -> AliasStats:
    """The last ``WINDOW`` of ``alias``'s request log, in two aggregate queries."""
    recent = RequestLog.objects.filter(
        smart_alias=alias, created_at__gte=now - WINDOW
    ).order_by()
    groups = recent.values("tier", "tier_source", "smart_mode", "tier_score").annotate(
        n=Count("id")
    )
    signal_groups = list(
        recent.values("tier_signals")
        .annotate(n=Count("id"))
        .order_by("-n")[:SIGNAL_GROUPS_LIMIT]
    )
    tiers: Counter[str] = Counter()
    sources: defaultdict[str, Counter[str]] = defaultdict(Counter)
    modes: Counter[str] = Counter()
    scores: Counter[int] = Counter()
    for group in groups:
        n = group["n"]
        tiers[group["tier"] or "?"] += n
        sources[group["tier_source"] or "?"][group["tier"] or "?"] += n
        modes[group["smart_mode"] or "?"] += n
        if group["tier_score"] is not None:
            scores[group["tier_score"]] += n
    known = [s for s in TIER_SOURCES if s in sources]
    return AliasStats(
        total=sum(tiers.values()),
        easy=tiers["easy"],
        hard=tiers["hard"],
        by_source=tuple(
            SourceRow(source=s, easy=sources[s]["easy"], hard=sources[s]["hard"])
            for s in [*known, *sorted(set(sources) - set(known))]
        ),
        by_mode=tuple(sorted(modes.items())),
        buckets=_buckets(scores, threshold),
        scored=sum(scores.values()),
        at_or_above=sum(n for score, n in scores.items() if score >= threshold),
        signals=tuple(
            sorted(_signal_counts(signal_groups).items(), key=lambda s: (-s[1], s[0]))
        )[:TOP_SIGNALS],
        signals_capped=len(signal_groups) == SIGNAL_GROUPS_LIMIT,
    )


# --- "Classify this request" --------------------------------------------------------


def parse_tester_body(text: str) -> dict[str, Any]:
    """A JSON chat body (text starting with ``{``), or plain text as one user message.

    The gateway's extension fields (``models``, ``session_id``, ...) are dropped,
    as the gateway drops them before classifying.
    """
    if not text.lstrip().startswith("{"):
        return {"messages": [{"role": "user", "content": text}]}
    try:
        body = orjson.loads(text)
    except orjson.JSONDecodeError as exc:
        raise forms.ValidationError(f"Invalid JSON: {exc}") from exc
    if not isinstance(body, dict):
        raise forms.ValidationError("The JSON must be an object (a chat body).")
    if not isinstance(body.get("messages"), list):
        raise forms.ValidationError("A chat body needs a 'messages' list.")
    return {k: v for k, v in body.items() if k not in GATEWAY_FIELDS}


class ClassifyForm(forms.Form):
    body = forms.CharField(
        strip=False,
        widget=forms.Textarea(attrs={"rows": 10, "cols": 90}),
        help_text='A chat body as JSON ({"messages": [...], "tools": [...], ...}) '
        "or plain text, which becomes one user message.",
    )
    tier_header = forms.CharField(
        required=False,
        max_length=100,
        label="X-OmniRoute-Tier",
        help_text="easy or hard forces the tier; empty = header absent.",
    )
    smart_header = forms.CharField(
        required=False,
        max_length=100,
        label="X-OmniRoute-Smart-Routing",
        help_text="off bypasses the classifier; empty = header absent.",
    )

    def clean_body(self) -> dict[str, Any]:
        return parse_tester_body(self.cleaned_data["body"])


@dataclass(frozen=True, slots=True, kw_only=True)
class TesterResult:
    verdict: smart.Verdict  # computed even when the gateway would not classify
    classified: bool  # False under Smart-Routing: off
    tier: str  # the tier used
    source: str  # tier_source
    signals: tuple[str, ...]  # as logged: the verdict's, plus header_ignored
    enforce_target: str  # the alias's target in enforce mode
    hard_target: str  # observe and off modes always send the alias here


def try_request(
    route: SmartRoute,
    body: Mapping[str, Any],
    *,
    smart_header: str | None,
    tier_header: str | None,
) -> TesterResult:
    """Classify ``body`` for ``route`` as a request without a session (no pin)."""
    verdict = smart.classify(body, route.threshold)
    mode = smart.header_mode(smart_header, tier_header)
    decision = smart.decide_tier(
        verdict if mode.classify else None,
        smart_header=smart_header,
        tier_header=tier_header,
        pin=None,
        has_session=False,
        now=0.0,  # only stamps a pin, and none is written without a session
    )
    signals = verdict.signals if mode.classify else ()
    if decision.ignored_header:
        signals = (*signals, "header_ignored")
    return TesterResult(
        verdict=verdict,
        classified=mode.classify,
        tier=decision.tier,
        source=decision.source,
        signals=signals,
        enforce_target=route.hard if decision.tier == "hard" else route.easy,
        hard_target=route.hard,
    )


def smart_route_view(request: HttpRequest, alias: str) -> HttpResponse:
    if not request.user.has_perm("combos.view_smartroute"):
        raise PermissionDenied(
            "Trying a smart route needs the permission: combos.view_smartroute."
        )
    route = get_object_or_404(SmartRoute, alias=alias)
    form = ClassifyForm(request.POST if request.method == "POST" else None)
    result = None
    if form.is_bound and form.is_valid():
        values = form.cleaned_data
        result = try_request(
            route,
            values["body"],
            smart_header=values["smart_header"] or None,
            tier_header=values["tier_header"] or None,
        )
    context = {
        **admin.site.each_context(request),
        "title": f"Smart route {route.alias}",
        "route": route,
        "mode": read_settings().smart_routing_mode,
        "window_hours": int(WINDOW.total_seconds() // 3600),
        "classifier_version": smart.CLASSIFIER_VERSION,
        "stats": alias_stats(route.alias, route.threshold, timezone.now()),
        "form": form,
        "result": result,
    }
    return TemplateResponse(request, TEMPLATE, context)
