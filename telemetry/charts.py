"""Server-rendered SVG line charts for the admin dashboards (spec 06 §4.1).

``line_chart(points, ...)`` draws one series from ``(x_label, value)`` points;
``multi_line_chart(labels, series, ...)`` draws several over the same x labels,
each on the left axis or on a right one (e.g. a percentage beside a count).
Both return one ``<svg>`` element as text: axes, gridlines, tick labels, a legend,
a polyline per series and a dot with a ``<title>`` per point.

Invariants: pure (no Django, no I/O, deterministic output); a ``None`` value is a
gap, so the line breaks there instead of dropping to zero; each axis starts at 0
and ends at a "nice" number (1, 2, 2.5 or 5 × 10^k) at or above its largest value;
every text is escaped; no script, external font or stylesheet is referenced.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from html import escape

Number = float | int
Formatter = Callable[[float], str]

WIDTH = 720
HEIGHT = 240
MARGIN_TOP = 28  # the legend
MARGIN_BOTTOM = 28  # the x labels
MARGIN_SIDE = 64  # a y axis's tick labels
MARGIN_PLAIN = 16  # a side without an axis
TICKS = 4  # gridlines above the baseline
MAX_X_LABELS = 8
PALETTE = ("#417690", "#d9822b", "#5b8c3a", "#ba2121")


def compact(value: float) -> str:
    """``1234`` → ``1,234``; ``0.25`` → ``0.25``; ``0.000123`` → ``0.000123``."""
    if value == 0:
        return "0"
    if abs(value) >= 100 or float(value).is_integer():  # noqa: PLR2004
        return f"{value:,.0f}"
    return f"{value:.3g}" if abs(value) >= 1 else f"{value:.2g}"


def nice_ceiling(value: float) -> float:
    """The smallest 1, 2, 2.5 or 5 × 10^k at or above ``value`` (1 for ≤ 0)."""
    if value <= 0:
        return 1.0
    base = 10.0 ** math.floor(math.log10(value))
    for step in (1.0, 2.0, 2.5, 5.0, 10.0):
        if value <= step * base * (1 + 1e-9):
            return step * base
    return 10.0 * base  # pragma: no cover - the loop always returns


@dataclass(frozen=True, slots=True, kw_only=True)
class Series:
    name: str
    values: tuple[float | None, ...]
    color: str = PALETTE[0]
    right_axis: bool = False


@dataclass(frozen=True, slots=True, kw_only=True)
class _Axis:
    top: float
    fmt: Formatter


@dataclass(frozen=True, slots=True, kw_only=True)
class _Frame:
    left: float
    right: float
    top: float
    bottom: float
    count: int

    def x(self, index: int) -> float:
        if self.count == 1:
            return (self.left + self.right) / 2
        return self.left + index * (self.right - self.left) / (self.count - 1)

    def y(self, value: float, axis: _Axis) -> float:
        return self.bottom - (self.bottom - self.top) * value / axis.top


def line_chart(
    points: Sequence[tuple[str, Number | None]],
    *,
    title: str,
    unit_format: Formatter = compact,
    color: str = PALETTE[0],
    width: int = WIDTH,
    height: int = HEIGHT,
) -> str:
    """One series from ``(x_label, value)`` points."""
    series = Series(
        name=title,
        values=tuple(None if v is None else float(v) for _, v in points),
        color=color,
    )
    return multi_line_chart(
        [label for label, _ in points],
        [series],
        title=title,
        left_format=unit_format,
        width=width,
        height=height,
    )


def _axis(series: Sequence[Series], fmt: Formatter, fixed_top: float | None) -> _Axis:
    values = [v for s in series for v in s.values if v is not None]
    top = fixed_top if fixed_top is not None else nice_ceiling(max(values, default=0))
    return _Axis(top=top, fmt=fmt)


def multi_line_chart(
    labels: Sequence[str],
    series: Sequence[Series],
    *,
    title: str,
    left_format: Formatter = compact,
    right_format: Formatter = compact,
    right_top: float | None = None,
    width: int = WIDTH,
    height: int = HEIGHT,
) -> str:
    """Several series over ``labels``; ``right_top`` fixes the right axis's top
    (100 for a percentage), else it fits the data like the left one."""
    for item in series:
        if len(item.values) != len(labels):
            raise ValueError(f"series {item.name!r}: one value per label expected")
    has_right = any(s.right_axis for s in series)
    frame = _Frame(
        left=MARGIN_SIDE,
        right=width - (MARGIN_SIDE if has_right else MARGIN_PLAIN),
        top=MARGIN_TOP,
        bottom=height - MARGIN_BOTTOM,
        count=max(1, len(labels)),
    )
    left = _axis([s for s in series if not s.right_axis], left_format, None)
    right = _axis([s for s in series if s.right_axis], right_format, right_top)
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" class="omr-chart" '
        f'viewBox="0 0 {width} {height}" width="100%" role="img" '
        f'aria-label="{escape(title)}" font-family="sans-serif" font-size="11">',
        f"<title>{escape(title)}</title>",
        *_grid(frame, left, right if has_right else None),
        *_x_labels(frame, labels),
        *_legend(frame, series),
    ]
    has_data = False
    for item in series:
        axis = right if item.right_axis else left
        parts.extend(_lines(frame, axis, labels, item))
        has_data = has_data or any(v is not None for v in item.values)
    if not has_data:
        middle_x, middle_y = (
            (frame.left + frame.right) / 2,
            (frame.top + frame.bottom) / 2,
        )
        parts.append(
            f'<text x="{middle_x:.1f}" y="{middle_y:.1f}" text-anchor="middle" '
            'fill="#666">No data</text>'
        )
    parts.append("</svg>")
    return "".join(parts)


def _grid(frame: _Frame, left: _Axis, right: _Axis | None) -> list[str]:
    parts = []
    for step in range(TICKS + 1):
        fraction = step / TICKS
        y = frame.bottom - (frame.bottom - frame.top) * fraction
        stroke = "#999" if step == 0 else "#e5e5e5"
        parts.append(
            f'<line x1="{frame.left:.1f}" y1="{y:.1f}" x2="{frame.right:.1f}" '
            f'y2="{y:.1f}" stroke="{stroke}"/>'
        )
        parts.append(
            f'<text class="y-tick" x="{frame.left - 6:.1f}" y="{y + 4:.1f}" '
            f'text-anchor="end" fill="#666">{escape(left.fmt(left.top * fraction))}'
            "</text>"
        )
        if right is not None:
            parts.append(
                f'<text class="y-tick-right" x="{frame.right + 6:.1f}" '
                f'y="{y + 4:.1f}" fill="#666">'
                f"{escape(right.fmt(right.top * fraction))}</text>"
            )
    parts.append(
        f'<line x1="{frame.left:.1f}" y1="{frame.top:.1f}" x2="{frame.left:.1f}" '
        f'y2="{frame.bottom:.1f}" stroke="#999"/>'
    )
    return parts


def _x_labels(frame: _Frame, labels: Sequence[str]) -> list[str]:
    every = max(1, math.ceil(len(labels) / MAX_X_LABELS))
    return [
        f'<text class="x-tick" x="{frame.x(i):.1f}" y="{frame.bottom + 16:.1f}" '
        f'text-anchor="middle" fill="#666">{escape(label)}</text>'
        for i, label in enumerate(labels)
        if i % every == 0
    ]


def _legend(frame: _Frame, series: Sequence[Series]) -> list[str]:
    parts = []
    x = frame.left
    for item in series:
        suffix = " (right axis)" if item.right_axis else ""
        parts.append(
            f'<line x1="{x:.1f}" y1="12" x2="{x + 16:.1f}" y2="12" '
            f'stroke="{escape(item.color)}" stroke-width="2"/>'
            f'<text x="{x + 20:.1f}" y="16" fill="#333">'
            f"{escape(item.name + suffix)}</text>"
        )
        x += 40 + 7 * len(item.name + suffix)
    return parts


def _lines(
    frame: _Frame, axis: _Axis, labels: Sequence[str], item: Series
) -> list[str]:
    color = escape(item.color)
    runs: list[list[str]] = [[]]
    dots = []
    for i, value in enumerate(item.values):
        if value is None:
            runs.append([])
            continue
        x, y = frame.x(i), frame.y(value, axis)
        runs[-1].append(f"{x:.1f},{y:.1f}")
        label = labels[i] if i < len(labels) else ""
        dots.append(
            f'<circle cx="{x:.1f}" cy="{y:.1f}" r="2.5" fill="{color}">'
            f"<title>{escape(f'{item.name} {label}: {axis.fmt(value)}')}</title>"
            "</circle>"
        )
    lines = [
        f'<polyline class="series" data-series="{escape(item.name)}" fill="none" '
        f'stroke="{color}" stroke-width="2" points="{" ".join(run)}"/>'
        for run in runs
        if len(run) > 1
    ]
    return lines + dots
