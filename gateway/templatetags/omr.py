"""Template filters of the admin console (issue #15): one time format everywhere.

``{{ when|omr_time }}`` renders a ``<time>`` element with the ISO instant and the
server's rendering ("2026-12-02 06:40:12 UTC"); the console's script
(``omniroute/admin.js``) rewrites it in the browser's local time, with seconds.
``{{ when|omr_left }}`` adds the time left ("23 s left"), ``{{ when|omr_ago }}`` the
time since ("5 min ago"); the script keeps both counting.
"""

from __future__ import annotations

from datetime import UTC, datetime

from django import template
from django.utils import timezone
from django.utils.html import format_html
from django.utils.safestring import SafeString, mark_safe

from providers.console_access import may_open

register = template.Library()


MINUTE, HOUR, DAY = 60, 3600, 86400
#: below this many minutes the seconds are still worth showing
SHOW_SECONDS_BELOW_MIN = 10
#: up to this many hours a span is written in hours, then in days
HOURS_UP_TO = 48


def span_text(seconds: float) -> str:
    """``seconds`` as the console writes a duration: 23 s, 4 min 5 s, 2 h 3 min, 3 d."""
    total = max(0, round(seconds))
    if total < MINUTE:
        return f"{total} s"
    minutes, secs = divmod(total, MINUTE)
    if minutes < MINUTE:
        if secs and minutes < SHOW_SECONDS_BELOW_MIN:
            return f"{minutes} min {secs} s"
        return f"{minutes} min"
    hours, minutes = divmod(minutes, MINUTE)
    if hours < HOURS_UP_TO:
        return f"{hours} h {minutes} min" if minutes else f"{hours} h"
    return f"{total // DAY} d"


def _parsed(when: object) -> datetime | None:
    """A datetime, or an ISO 8601 text (health records carry ``...Z`` strings)."""
    if isinstance(when, datetime):
        return when
    if isinstance(when, str) and when:
        try:
            return datetime.fromisoformat(when)
        except ValueError:
            return None
    return None


def _element(
    when: datetime | str | None, mode: str, now: datetime | None = None
) -> SafeString:
    when = _parsed(when)
    if when is None:  # None, or a variable the page lacks
        return mark_safe('<span class="omr-muted">—</span>')
    if timezone.is_naive(when):
        when = timezone.make_aware(when, UTC)
    now = now or timezone.now()
    text = when.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
    delta = (when - now).total_seconds()
    if mode == "left":
        extra = f"{span_text(delta)} left" if delta > 0 else "over"
    elif mode == "ago":
        extra = f"{span_text(-delta)} ago" if delta <= 0 else f"in {span_text(delta)}"
    else:
        extra = ""
    return format_html(
        '<time class="omr-time" datetime="{}" data-mode="{}" title="{}">{}</time>',
        when.isoformat(),
        mode,
        text,
        extra or text,
    )


@register.filter
def omr_time(when: datetime | str | None) -> SafeString:
    return _element(when, "abs")


@register.filter
def omr_left(when: datetime | str | None) -> SafeString:
    return _element(when, "left")


@register.filter
def omr_ago(when: datetime | str | None) -> SafeString:
    return _element(when, "ago")


@register.filter
def omr_percent(value: float | None) -> str:
    return "—" if value is None else f"{value * 100:.1f} %"


@register.filter
def omr_words(value: str | None) -> str:
    """``auth_disabled`` -> ``auth disabled``."""
    return str(value or "").replace("_", " ")


@register.simple_tag(takes_context=True)
def omr_may(context: template.Context, page: str) -> bool:
    """``{% omr_may "playground" as can_play %}``: whether the page's user may open
    that console page (``providers.console_access``), so a link is shown only to
    those it will not refuse."""
    request = context.get("request")
    return request is not None and may_open(request.user, page)
