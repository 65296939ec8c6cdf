"""The inline SVG line charts of the dashboards (spec 06 §4.1): well-formed, escaped,
self-contained, with gaps for unknown values and axes that fit the data."""

from __future__ import annotations

import xml.etree.ElementTree as ET

import pytest

from telemetry.charts import Series, compact, line_chart, multi_line_chart, nice_ceiling

SVG = "{http://www.w3.org/2000/svg}"


def _parse(svg: str) -> ET.Element:
    return ET.fromstring(svg)


def test_line_chart_draws_one_polyline_through_every_point():
    svg = line_chart([("00:00", 1), ("01:00", 3), ("02:00", 2)], title="Requests")

    root = _parse(svg)
    (line,) = root.iter(f"{SVG}polyline")
    points = [tuple(map(float, p.split(","))) for p in line.get("points", "").split()]
    assert len(points) == 3
    xs = [x for x, _ in points]
    assert xs == sorted(xs)
    assert points[1][1] < points[2][1] < points[0][1]  # higher value, smaller y
    assert [t.text for t in root.iter(f"{SVG}text") if t.get("class") == "x-tick"] == [
        "00:00",
        "01:00",
        "02:00",
    ]
    assert root.find(f"{SVG}title") is not None
    assert root.get("role") == "img"


def test_unknown_values_break_the_line_instead_of_dropping_to_zero():
    svg = line_chart(
        [("a", 1), ("b", 2), ("c", None), ("d", 4), ("e", 5), ("f", None), ("g", 7)],
        title="p95 latency",
    )

    root = _parse(svg)
    lines = list(root.iter(f"{SVG}polyline"))
    assert [len(line.get("points", "").split()) for line in lines] == [2, 2]
    assert len(list(root.iter(f"{SVG}circle"))) == 5  # "g" alone is a dot


def test_y_axis_ends_at_a_nice_number_above_the_largest_value():
    svg = line_chart([("a", 0), ("b", 730)], title="Requests")

    ticks = [
        t.text for t in _parse(svg).iter(f"{SVG}text") if t.get("class") == "y-tick"
    ]
    assert ticks == ["0", "250", "500", "750", "1,000"]


@pytest.mark.parametrize(
    ("value", "expected"),
    [(0, 1.0), (1, 1.0), (7, 10.0), (730, 1000.0), (0.0012, 0.002), (240, 250.0)],
)
def test_nice_ceiling(value: float, expected: float):
    assert nice_ceiling(value) == pytest.approx(expected)


def test_compact_numbers():
    assert [compact(v) for v in (0, 5, 1234, 2.5, 0.25, 0.00012)] == [
        "0",
        "5",
        "1,234",
        "2.5",
        "0.25",
        "0.00012",
    ]


def test_labels_and_names_are_escaped():
    svg = multi_line_chart(
        ["<b>&"],
        [Series(name='"><script>', values=(1.0,))],
        title="<title>",
    )

    assert "<script>" not in svg
    assert "<b>" not in svg
    root = _parse(svg)
    assert root.get("aria-label") == "<title>"


def test_a_right_axis_series_uses_its_own_scale():
    svg = multi_line_chart(
        ["a", "b"],
        [
            Series(name="Requests", values=(10.0, 20.0)),
            Series(name="Success rate", values=(50.0, 100.0), right_axis=True),
        ],
        title="Requests and success rate",
        right_format=lambda v: f"{v:.0f} %",
        right_top=100,
    )

    root = _parse(svg)
    right = [
        t.text for t in root.iter(f"{SVG}text") if t.get("class") == "y-tick-right"
    ]
    assert right == ["0 %", "25 %", "50 %", "75 %", "100 %"]
    requests, rate = root.iter(f"{SVG}polyline")
    top_of = [float(p.split(",")[1]) for p in (requests.get("points") or "").split()]
    top_rate = [float(p.split(",")[1]) for p in (rate.get("points") or "").split()]
    assert top_of[1] == top_rate[1]  # 20 of 20 and 100 of 100 both reach the top


def test_a_chart_without_values_says_no_data():
    svg = line_chart([("a", None), ("b", None)], title="Cost")

    assert "No data" in svg
    assert "<polyline" not in svg


def test_chart_is_self_contained():
    svg = line_chart([("a", 1), ("b", 2)], title="Requests")

    for forbidden in ("<script", "http://", "https://", "@import", "url("):
        assert forbidden not in svg.replace('xmlns="http://www.w3.org/2000/svg"', "")


def test_series_length_must_match_the_labels():
    with pytest.raises(ValueError, match="one value per label"):
        multi_line_chart(["a", "b"], [Series(name="x", values=(1.0,))], title="t")
